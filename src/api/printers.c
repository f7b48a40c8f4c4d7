#include "api/printers.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/sbuf.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- column definitions ------------------------------------------------ */

struct col {
	const char *name, *type, *format, *desc;
	int priority;
};

/* Descriptions are the API's field docs, as upstream fills them from
 * SwaggerDoc(); kubectl never shows them, so long ones keep their first
 * sentence only. */
#define D_NAME                                                                                     \
	"Name must be unique within a namespace. Is required when creating resources, although "   \
	"some resources may allow a client to request the generation of an appropriate name "      \
	"automatically. Name is primarily intended for creation idempotence and configuration "    \
	"definition. Cannot be updated. More info: "                                              \
	"https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
#define D_AGE                                                                                      \
	"CreationTimestamp is a timestamp representing the server time when this object was "      \
	"created. It is not guaranteed to be set in happens-before order across separate "         \
	"operations. Clients may not set this value. It is represented in RFC3339 form and is in " \
	"UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "                  \
	"https://git.k8s.io/community/contributors/devel/sig-architecture/"                       \
	"api-conventions.md#metadata"
#define D_CONTAINERS "Names of each container in the template."
#define D_IMAGES "Images referenced by each container in the template."
#define D_NODE_ADDRESSES                                                                           \
	"List of addresses reachable to the node. Queried from cloud provider, if available. More " \
	"info: https://kubernetes.io/docs/reference/node/node-status/#addresses"

/* Column rows: name, type, format, description, priority. */
#define C_NAME "Name", "string", "name", D_NAME, 0
#define C_AGE "Age", "string", "", D_AGE, 0
#define C_STR(n, d) n, "string", "", d, 0
#define C_INT(n, d) n, "integer", "", d, 0
#define C_WIDE(n, d) n, "string", "", d, 1

static const struct col node_cols[] = {
	{C_NAME},
	{C_STR("Status", "The status of the node")},
	{C_STR("Roles", "The roles of the node")},
	{C_AGE},
	{C_STR("Version", "Kubelet Version reported by the node.")},
	{C_WIDE("Internal-IP", D_NODE_ADDRESSES)},
	{C_WIDE("External-IP", D_NODE_ADDRESSES)},
	{C_WIDE("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian "
			    "GNU/Linux 7 (wheezy)).")},
	{C_WIDE("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. "
				 "3.16.0-0.bpo.4-amd64).")},
	{C_WIDE("Container-Runtime", "ContainerRuntime Version reported by the node through "
				    "runtime remote API (e.g. containerd://1.4.2).")},
};

static const struct col pod_cols[] = {
	{C_NAME},
	{C_STR("Ready", "The aggregate readiness state of this pod for accepting traffic.")},
	{C_STR("Status", "The aggregate status of the containers in this pod.")},
	{C_STR("Restarts", "The number of times the containers in this pod have been restarted "
			  "and when the last container in this pod has restarted.")},
	{C_AGE},
	{C_WIDE("IP", "podIP address allocated to the pod. Routable at least within the cluster. "
		     "Empty if not yet allocated.")},
	{C_WIDE("Node", "NodeName indicates in which node this pod is scheduled.")},
	{C_WIDE("Nominated Node", "nominatedNodeName is set only when this pod preempts other "
				 "pods on the node, but it cannot be scheduled right away as "
				 "preemption victims receive their graceful termination periods.")},
	{C_WIDE("Readiness Gates", "If specified, all readiness gates will be evaluated for pod "
				  "readiness.")},
};

static const struct col csr_cols[] = {
	{C_NAME},
	{C_AGE},
	{C_STR("SignerName", "Requested signer for the request.")},
	{C_STR("Requestor", "Base64-encoded PKCS#10 CSR data")},
	{C_STR("RequestedDuration", "expirationSeconds is the requested duration of validity of "
				   "the issued certificate.")},
	{C_STR("Condition", "Conditions applied to the request, such as approval or denial.")},
};

static const struct col lease_cols[] = {
	{C_NAME},
	{C_STR("Holder", "holderIdentity contains the identity of the holder of a current lease.")},
	{C_AGE},
};

static const struct col event_cols[] = {
	{C_STR("Last Seen", "The time at which the most recent occurrence of this event was "
			   "recorded.")},
	{C_STR("Type", "Type of this event (Normal, Warning), new types could be added in the "
		      "future")},
	{C_STR("Reason", "This should be a short, machine understandable string that gives the "
			"reason for the transition into the object's current status.")},
	{C_STR("Object", "The object that this event is about.")},
	{C_WIDE("Subobject", "If referring to a piece of an object instead of an entire object, "
			    "this string should contain a valid JSON/Go field access statement.")},
	{C_WIDE("Source", "The component reporting this event. Should be a short machine "
			 "understandable string.")},
	{C_STR("Message", "A human-readable description of the status of this operation.")},
	{C_WIDE("First Seen", "The time at which the event was first recorded. (Time of server "
			     "receipt is in TypeMeta.)")},
	{C_WIDE("Count", "The number of times this event has occurred.")},
	{"Name", "string", "name", D_NAME, 1},
};

static const struct col deployment_cols[] = {
	{C_NAME},
	{C_STR("Ready", "Number of the pod with ready state")},
	{C_STR("Up-to-date", "Total number of non-terminated pods targeted by this deployment "
			    "that have the desired template spec.")},
	{C_STR("Available", "Total number of available pods (ready for at least "
			   "minReadySeconds) targeted by this deployment.")},
	{C_AGE},
	{C_WIDE("Containers", D_CONTAINERS)},
	{C_WIDE("Images", D_IMAGES)},
	{C_WIDE("Selector", "Label selector for pods. Existing ReplicaSets whose pods are selected "
			   "by this will be the ones affected by this deployment.")},
};

static const struct col replicaset_cols[] = {
	{C_NAME},
	{C_INT("Desired", "Replicas is the number of desired replicas.")},
	{C_INT("Current", "Replicas is the most recently observed number of replicas.")},
	{C_INT("Ready", "The number of ready replicas for this replica set.")},
	{C_AGE},
	{C_WIDE("Containers", D_CONTAINERS)},
	{C_WIDE("Images", D_IMAGES)},
	{C_WIDE("Selector", "Selector is a label query over pods that should match the replica "
			   "count.")},
};

static const struct col daemonset_cols[] = {
	{C_NAME},
	{C_INT("Desired", "The total number of nodes that should be running the daemon pod "
			 "(including nodes correctly running the daemon pod).")},
	{C_INT("Current", "The number of nodes that are running at least 1 daemon pod and are "
			 "supposed to run the daemon pod.")},
	{C_INT("Ready", "The number of nodes that should be running the daemon pod and have one "
		       "or more of the daemon pod running and ready.")},
	{C_INT("Up-to-date", "The total number of nodes that are running updated daemon pod")},
	{C_INT("Available", "The number of nodes that should be running the daemon pod and have "
			   "one or more of the daemon pod running and available (ready for at "
			   "least spec.minReadySeconds)")},
	{C_STR("Node Selector", "NodeSelector is a selector which must be true for the pod to fit "
			       "on a node.")},
	{C_AGE},
	{C_WIDE("Containers", D_CONTAINERS)},
	{C_WIDE("Images", D_IMAGES)},
	{C_WIDE("Selector", "A label query over pods that are managed by the daemon set.")},
};

static const struct col role_cols[] = {
	{C_NAME},
	{"Created At", "date", "", "CreationTimestamp is a timestamp representing the server time "
				   "when this object was created.", 0},
};

static const struct col rolebinding_cols[] = {
	{C_NAME},
	{C_STR("Role", "RoleRef can reference a Role in the current namespace or a ClusterRole in "
		       "the global namespace.")},
	{C_AGE},
	{C_WIDE("Users", "Users in the roleBinding")},
	{C_WIDE("Groups", "Groups in the roleBinding")},
	{C_WIDE("ServiceAccounts", "ServiceAccounts in the roleBinding")},
};

static const struct col job_cols[] = {
	{C_NAME},
	{C_STR("Status", "Status of the job.")},
	{C_STR("Completions", "The number of pods which reached phase Succeeded.")},
	{C_STR("Duration", "Time required to complete the job.")},
	{C_AGE},
	{C_WIDE("Containers", D_CONTAINERS)},
	{C_WIDE("Images", D_IMAGES)},
	{C_WIDE("Selector", "A label query over pods that should match the pod count.")},
};

static const struct col statefulset_cols[] = {
	{C_NAME},
	{C_STR("Ready", "Number of the pod with ready state")},
	{C_AGE},
	{C_WIDE("Containers", D_CONTAINERS)},
	{C_WIDE("Images", D_IMAGES)},
};

static const struct col namespace_cols[] = {
	{C_NAME},
	{C_STR("Status", "The status of the namespace")},
	{C_AGE},
};

static const struct col service_cols[] = {
	{C_NAME},
	{C_STR("Type", "type determines how the Service is exposed.")},
	{C_STR("Cluster-IP", "clusterIP is the IP address of the service and is usually assigned "
			    "randomly.")},
	{C_STR("External-IP", "externalIPs is a list of IP addresses for which nodes in the "
			     "cluster will also accept traffic for this service.")},
	{C_STR("Port(s)", "The list of ports that are exposed by this service.")},
	{C_AGE},
	{C_WIDE("Selector", "Route service traffic to pods with label keys and values matching "
			   "this selector.")},
};

static const struct col endpoints_cols[] = {
	{C_NAME},
	{C_STR("Endpoints", "The set of all endpoints is the union of all subsets.")},
	{C_AGE},
};

static const struct col endpointslice_cols[] = {
	{C_NAME},
	{C_STR("AddressType", "addressType specifies the type of address carried by this "
			     "EndpointSlice.")},
	{C_STR("Ports", "ports specifies the list of network ports exposed by each endpoint in "
		       "this slice.")},
	{C_STR("Endpoints", "endpoints is a list of unique endpoints in this slice.")},
	{C_AGE},
};

static const struct col configmap_cols[] = {
	{C_NAME},
	{C_STR("Data", "Data contains the configuration data.")},
	{C_AGE},
};

static const struct col secret_cols[] = {
	{C_NAME},
	{C_STR("Type", "Used to facilitate programmatic handling of secret data.")},
	{C_STR("Data", "Data contains the secret data.")},
	{C_AGE},
};

static const struct col controllerrevision_cols[] = {
	{C_NAME},
	{C_STR("Controller", "Controller of the object")},
	{C_INT("Revision", "Revision indicates the revision of the state represented by Data.")},
	{C_AGE},
};

static const struct col default_cols[] = {{C_NAME}, {C_AGE}};

/* ---- small helpers ----------------------------------------------------- */

/* The string at path, or dflt when missing or empty (Go's zero value). */
static const char *str_or(const json_t *o, const char *path, const char *dflt)
{
	const char *s = jx_str(o, path);
	return s && *s ? s : dflt;
}

static bool present(const json_t *o, const char *path)
{
	json_t *v = jx_get(o, path);
	return v && !json_is_null(v);
}

static bool ts_get(const json_t *o, const char *path, int64_t *ns)
{
	const char *s = jx_str(o, path);
	return s && *s && time_parse_rfc3339(s, ns) == 0;
}

/* translateTimestampSince into buf; false (and "<unknown>") for a zero time. */
static bool since_buf(const json_t *o, const char *path, int64_t now, char buf[DURATION_BUF])
{
	int64_t t;
	if (!ts_get(o, path, &t)) {
		strcpy(buf, "<unknown>");
		return false;
	}
	duration_human(now - t, buf);
	return true;
}

static json_t *since(const json_t *o, const char *path, int64_t now)
{
	char buf[DURATION_BUF];
	since_buf(o, path, now, buf);
	return json_string(buf);
}

static json_t *age(const json_t *o, int64_t now)
{
	return since(o, "metadata.creationTimestamp", now);
}

static json_t *name(const json_t *o)
{
	return json_string(str_or(o, "metadata.name", ""));
}

/* A cell from a vector: joined with sep, or `empty` when that gives "". */
static json_t *joined(struct strv *sv, const char *sep, const char *empty)
{
	char *s = strv_join(sv, sep);
	json_t *cell = json_string(*s ? s : empty);
	free(s);
	strv_free(sv);
	return cell;
}

static json_t *fmt_cell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *fmt_cell(const char *fmt, ...)
{
	va_list ap;
	char *s;
	json_t *cell;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	cell = json_string(s);
	free(s);
	return cell;
}

static void setf(char **dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void setf(char **dst, const char *fmt, ...)
{
	va_list ap;
	free(*dst);
	va_start(ap, fmt);
	if (vasprintf(dst, fmt, ap) < 0)
		abort();
	va_end(ap);
}

/* Go's labels.FormatLabels: "k=v" sorted by key, comma-joined; "<none>". */
static json_t *format_labels(const json_t *map)
{
	struct strv sv = STRV_INIT;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)map, k, v)
		strv_pushf(&sv, "%s=%s", k, json_is_string(v) ? json_string_value(v) : "");
	strv_sort(&sv);
	return joined(&sv, ",", "<none>");
}

struct req {
	const char *key;
	char *text;
	size_t idx;
};

static int req_cmp(const void *a, const void *b)
{
	const struct req *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* One matchExpressions entry as a labels.Requirement string; NULL when
 * upstream's NewRequirement would refuse it. */
static char *expr_string(const json_t *e)
{
	const char *key = str_or(e, "key", ""), *op = str_or(e, "operator", "");
	json_t *vals = json_object_get(e, "values"), *v;
	size_t nvals = json_array_size(vals), i;
	struct strv sv = STRV_INIT;
	char *list, *out;
	bool in = strcmp(op, "In") == 0, notin = strcmp(op, "NotIn") == 0;

	if (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0) {
		if (nvals)
			return NULL;
		if (asprintf(&out, "%s%s", op[0] == 'D' ? "!" : "", key) < 0)
			abort();
		return out;
	}
	if ((!in && !notin) || !nvals)
		return NULL;
	json_array_foreach(vals, i, v)
		strv_push(&sv, json_is_string(v) ? json_string_value(v) : "");
	strv_sort(&sv);
	list = strv_join(&sv, ",");
	strv_free(&sv);
	if (asprintf(&out, "%s %s (%s)", key, in ? "in" : "notin", list) < 0)
		abort();
	free(list);
	return out;
}

/*
 * metav1.LabelSelectorAsSelector(sel).String(): requirements sorted by key,
 * comma-joined; "" for a nil or empty selector. Returns a malloc'd string,
 * or NULL when the selector does not convert.
 */
static char *selector_string(const json_t *sel)
{
	json_t *ml = json_object_get(sel, "matchLabels"), *me = json_object_get(sel, "matchExpressions");
	size_t n = 0, cap = json_object_size(ml) + json_array_size(me), i;
	struct req *r = calloc(cap ? cap : 1, sizeof(*r));
	struct strv sv = STRV_INIT;
	bool ok = true;
	const char *k;
	json_t *v;
	char *out = NULL;

	if (!r)
		abort();
	json_object_foreach(ml, k, v) {
		r[n].key = k;
		r[n].idx = n;
		if (asprintf(&r[n].text, "%s=%s", k, json_is_string(v) ? json_string_value(v) : "") < 0)
			abort();
		n++;
	}
	json_array_foreach(me, i, v) {
		r[n].key = str_or(v, "key", "");
		r[n].idx = n;
		if (!(r[n].text = expr_string(v)))
			ok = false;
		n++;
	}
	qsort(r, n, sizeof(*r), req_cmp);
	for (i = 0; i < n; i++) {
		if (ok)
			strv_push(&sv, r[i].text);
		free(r[i].text);
	}
	free(r);
	if (ok)
		out = strv_join(&sv, ",");
	strv_free(&sv);
	return out;
}

/* metav1.FormatLabelSelector: "<error>" when invalid, "<none>" when empty. */
static json_t *format_label_selector(const json_t *sel)
{
	char *s = selector_string(sel);
	json_t *cell = json_string(!s ? "<error>" : *s ? s : "<none>");
	free(s);
	return cell;
}

/* layoutContainerCells: names and images, comma-joined, appended to cells. */
static void container_cells(json_t *cells, const json_t *pod_spec)
{
	json_t *cs = json_object_get(pod_spec, "containers"), *c;
	struct strv names = STRV_INIT, images = STRV_INIT;
	size_t i;
	json_array_foreach(cs, i, c) {
		strv_push(&names, str_or(c, "name", ""));
		strv_push(&images, str_or(c, "image", ""));
	}
	json_array_append_new(cells, joined(&names, ",", ""));
	json_array_append_new(cells, joined(&images, ",", ""));
}

static json_t *cond_find(const json_t *conds, const char *type)
{
	return jx_condition_in(conds, type);
}

static bool cond_true(const json_t *conds, const char *type)
{
	json_t *c = cond_find(conds, type);
	return c && strcmp(str_or(c, "status", ""), "True") == 0;
}

/* ---- Node -------------------------------------------------------------- */

static const char *node_address(const json_t *node, const char *type)
{
	json_t *a;
	size_t i;
	json_array_foreach(jx_get(node, "status.addresses"), i, a)
		if (strcmp(str_or(a, "type", ""), type) == 0)
			return str_or(a, "address", "");
	return "<none>";
}

static json_t *node_cells(const json_t *node, int64_t now)
{
	static const char prefix[] = "node-role.kubernetes.io/";
	json_t *cells = json_array(), *conds = jx_get(node, "status.conditions"), *c = NULL, *x, *v;
	struct strv status = STRV_INIT, roles = STRV_INIT;
	const char *k;
	size_t i;

	/* Upstream keys conditions by type in a map: the last Ready wins. */
	json_array_foreach(conds, i, x)
		if (strcmp(str_or(x, "type", ""), "Ready") == 0)
			c = x;
	if (c)
		strv_push(&status,
			  strcmp(str_or(c, "status", ""), "True") == 0 ? "Ready" : "NotReady");
	else
		strv_push(&status, "Unknown");
	if (jx_bool(node, "spec.unschedulable", false))
		strv_push(&status, "SchedulingDisabled");

	json_object_foreach(jx_get(node, "metadata.labels"), k, v) {
		if (strncmp(k, prefix, sizeof(prefix) - 1) == 0 && k[sizeof(prefix) - 1])
			strv_push_unique(&roles, k + sizeof(prefix) - 1);
		else if (strcmp(k, "kubernetes.io/role") == 0 && json_is_string(v) &&
			 *json_string_value(v))
			strv_push_unique(&roles, json_string_value(v));
	}
	strv_sort(&roles);

	json_array_append_new(cells, name(node));
	json_array_append_new(cells, joined(&status, ",", ""));
	json_array_append_new(cells, joined(&roles, ",", "<none>"));
	json_array_append_new(cells, age(node, now));
	json_array_append_new(cells, json_string(str_or(node, "status.nodeInfo.kubeletVersion", "")));
	json_array_append_new(cells, json_string(node_address(node, "InternalIP")));
	json_array_append_new(cells, json_string(node_address(node, "ExternalIP")));
	json_array_append_new(cells,
			      json_string(str_or(node, "status.nodeInfo.osImage", "<unknown>")));
	json_array_append_new(cells,
			      json_string(str_or(node, "status.nodeInfo.kernelVersion", "<unknown>")));
	json_array_append_new(
		cells, json_string(str_or(node, "status.nodeInfo.containerRuntimeVersion", "<unknown>")));
	return cells;
}

/* ---- Pod --------------------------------------------------------------- */

static bool restartable_init(const json_t *pod, const char *cname)
{
	json_t *c;
	size_t i;
	json_array_foreach(jx_get(pod, "spec.initContainers"), i, c)
		if (strcmp(str_or(c, "name", ""), cname) == 0)
			return strcmp(str_or(c, "restartPolicy", ""), "Always") == 0;
	return false;
}

/* Keep the latest lastState.terminated.finishedAt of a container status. */
static void note_restart(const json_t *cs, bool *have, int64_t *last)
{
	int64_t t;
	if (present(cs, "lastState.terminated") && ts_get(cs, "lastState.terminated.finishedAt", &t) &&
	    (!*have || t > *last)) {
		*have = true;
		*last = t;
	}
}

struct pod_state {
	char *reason;
	int64_t restarts, ready, total;
	bool have_last;
	int64_t last;
};

/* Walk the init containers; true when the pod is still initializing. */
static bool pod_init_walk(const json_t *pod, struct pod_state *st, int64_t *ri_restarts,
			  bool *ri_have, int64_t *ri_last)
{
	json_t *ics = jx_get(pod, "status.initContainerStatuses"), *c;
	size_t i, n_spec = json_array_size(jx_get(pod, "spec.initContainers"));

	json_array_foreach(ics, i, c) {
		bool restartable = restartable_init(pod, str_or(c, "name", ""));
		int64_t rc = jx_int(c, "restartCount", 0);

		st->restarts += rc;
		note_restart(c, &st->have_last, &st->last);
		if (restartable) {
			*ri_restarts += rc;
			note_restart(c, ri_have, ri_last);
		}
		if (present(c, "state.terminated") && jx_int(c, "state.terminated.exitCode", 0) == 0)
			continue;
		if (restartable && jx_bool(c, "started", false)) {
			if (jx_bool(c, "ready", false))
				st->ready++;
			continue;
		}
		if (present(c, "state.terminated")) {
			const char *r = str_or(c, "state.terminated.reason", NULL);
			int64_t sig = jx_int(c, "state.terminated.signal", 0);
			if (r)
				setf(&st->reason, "Init:%s", r);
			else if (sig)
				setf(&st->reason, "Init:Signal:%" PRId64, sig);
			else
				setf(&st->reason, "Init:ExitCode:%" PRId64,
				     jx_int(c, "state.terminated.exitCode", 0));
		} else if (present(c, "state.waiting") && str_or(c, "state.waiting.reason", NULL) &&
			   strcmp(jx_str(c, "state.waiting.reason"), "PodInitializing") != 0) {
			setf(&st->reason, "Init:%s", jx_str(c, "state.waiting.reason"));
		} else {
			setf(&st->reason, "Init:%zu/%zu", i, n_spec);
		}
		return true;
	}
	return false;
}

static void pod_containers_walk(const json_t *pod, struct pod_state *st)
{
	json_t *cs = jx_get(pod, "status.containerStatuses");
	bool running = false;

	for (size_t i = json_array_size(cs); i-- > 0;) {
		json_t *c = json_array_get(cs, i);
		st->restarts += jx_int(c, "restartCount", 0);
		note_restart(c, &st->have_last, &st->last);
		if (present(c, "state.waiting") && str_or(c, "state.waiting.reason", NULL)) {
			setf(&st->reason, "%s", jx_str(c, "state.waiting.reason"));
		} else if (present(c, "state.terminated") &&
			   str_or(c, "state.terminated.reason", NULL)) {
			setf(&st->reason, "%s", jx_str(c, "state.terminated.reason"));
		} else if (present(c, "state.terminated")) {
			int64_t sig = jx_int(c, "state.terminated.signal", 0);
			if (sig)
				setf(&st->reason, "Signal:%" PRId64, sig);
			else
				setf(&st->reason, "ExitCode:%" PRId64,
				     jx_int(c, "state.terminated.exitCode", 0));
		} else if (jx_bool(c, "ready", false) && present(c, "state.running")) {
			running = true;
			st->ready++;
		}
	}
	/* A pod whose containers completed but one still runs is not Completed. */
	if (strcmp(st->reason, "Completed") == 0 && running)
		setf(&st->reason, "%s",
		     cond_true(jx_get(pod, "status.conditions"), "Ready") ? "Running" : "NotReady");
}

static json_t *pod_readiness_gates(const json_t *pod)
{
	json_t *gates = jx_get(pod, "spec.readinessGates"), *g, *c;
	json_t *conds = jx_get(pod, "status.conditions");
	size_t i, n = json_array_size(gates), ok = 0;

	if (!n)
		return json_string("<none>");
	json_array_foreach(gates, i, g)
		if ((c = cond_find(conds, str_or(g, "conditionType", ""))) &&
		    strcmp(str_or(c, "status", ""), "True") == 0)
			ok++;
	return fmt_cell("%zu/%zu", ok, n);
}

static json_t *pod_cells(const json_t *pod, int64_t now)
{
	struct pod_state st = {0};
	json_t *cells = json_array(), *c;
	const char *phase = str_or(pod, "status.phase", "");
	int64_t ri_restarts = 0, ri_last = 0;
	bool ri_have = false, initializing;
	size_t i;
	char buf[DURATION_BUF];

	setf(&st.reason, "%s", str_or(pod, "status.reason", phase));
	json_array_foreach(jx_get(pod, "status.conditions"), i, c)
		if (strcmp(str_or(c, "type", ""), "PodScheduled") == 0 &&
		    strcmp(str_or(c, "reason", ""), "SchedulingGated") == 0)
			setf(&st.reason, "SchedulingGated");

	st.total = (int64_t)json_array_size(jx_get(pod, "spec.containers"));
	json_array_foreach(jx_get(pod, "spec.initContainers"), i, c)
		if (strcmp(str_or(c, "restartPolicy", ""), "Always") == 0)
			st.total++;

	initializing = pod_init_walk(pod, &st, &ri_restarts, &ri_have, &ri_last);
	if (!initializing || cond_true(jx_get(pod, "status.conditions"), "Initialized")) {
		/* Only sidecar restarts survive into the running pod's count. */
		st.restarts = ri_restarts;
		st.have_last = ri_have;
		st.last = ri_last;
		pod_containers_walk(pod, &st);
	}

	if (present(pod, "metadata.deletionTimestamp") &&
	    strcmp(str_or(pod, "status.reason", ""), "NodeLost") == 0)
		setf(&st.reason, "Unknown");
	else if (present(pod, "metadata.deletionTimestamp") && strcmp(phase, "Succeeded") != 0 &&
		 strcmp(phase, "Failed") != 0)
		setf(&st.reason, "Terminating");

	json_array_append_new(cells, name(pod));
	json_array_append_new(cells, fmt_cell("%" PRId64 "/%" PRId64, st.ready, st.total));
	json_array_append_new(cells, json_string(st.reason));
	if (st.restarts != 0 && st.have_last)
		json_array_append_new(cells, fmt_cell("%" PRId64 " (%s ago)", st.restarts,
						      duration_human(now - st.last, buf)));
	else
		json_array_append_new(cells, fmt_cell("%" PRId64, st.restarts));
	json_array_append_new(cells, age(pod, now));
	free(st.reason);

	/* status.podIP is what podIPs[0] is converted from when podIPs is unset. */
	json_array_append_new(cells, json_string(str_or(json_array_get(jx_get(pod, "status.podIPs"), 0),
							"ip", str_or(pod, "status.podIP", "<none>"))));
	json_array_append_new(cells, json_string(str_or(pod, "spec.nodeName", "<none>")));
	json_array_append_new(cells, json_string(str_or(pod, "status.nominatedNodeName", "<none>")));
	json_array_append_new(cells, pod_readiness_gates(pod));
	return cells;
}

/* ---- certificates, coordination, events -------------------------------- */

static json_t *csr_cells(const json_t *csr, int64_t now)
{
	json_t *cells = json_array(), *conds = jx_get(csr, "status.conditions");
	bool approved = cond_find(conds, "Approved"), denied = cond_find(conds, "Denied");
	char buf[DURATION_BUF];

	json_array_append_new(cells, name(csr));
	json_array_append_new(cells, age(csr, now));
	json_array_append_new(cells, json_string(str_or(csr, "spec.signerName", "<none>")));
	json_array_append_new(cells, json_string(str_or(csr, "spec.username", "")));
	if (json_is_integer(jx_get(csr, "spec.expirationSeconds"))) {
		/* an int32 upstream: clamp so a stray value cannot overflow */
		int64_t secs = jx_int(csr, "spec.expirationSeconds", 0);
		secs = secs > INT32_MAX ? INT32_MAX : secs < INT32_MIN ? INT32_MIN : secs;
		json_array_append_new(cells, json_string(duration_human(secs * NS_PER_SEC, buf)));
	} else
		json_array_append_new(cells, json_string("<none>"));
	json_array_append_new(cells,
			      fmt_cell("%s%s%s", denied ? "Denied" : approved ? "Approved" : "Pending",
				       cond_find(conds, "Failed") ? ",Failed" : "",
				       str_or(csr, "status.certificate", NULL) ? ",Issued" : ""));
	return cells;
}

static json_t *lease_cells(const json_t *lease, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(lease));
	json_array_append_new(cells, json_string(str_or(lease, "spec.holderIdentity", "")));
	json_array_append_new(cells, age(lease, now));
	return cells;
}

static char *trim_space(const char *s)
{
	size_t n;
	char *out;
	while (*s && isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (!(out = strndup(s, n)))
		abort();
	return out;
}

/* core/v1 and events.k8s.io/v1 name the same Event fields differently. */
struct event_fields {
	const char *regarding, *note, *component, *host, *first, *last, *count, *controller;
};

static json_t *event_cells(const json_t *ev, int64_t now)
{
	static const struct event_fields core = {"involvedObject", "message", "source.component",
						 "source.host", "firstTimestamp", "lastTimestamp",
						 "count", "reportingComponent"};
	static const struct event_fields events = {
		"regarding", "note", "deprecatedSource.component", "deprecatedSource.host",
		"deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount",
		"reportingController"};
	const struct event_fields *f =
		strncmp(str_or(ev, "apiVersion", ""), "events.k8s.io/", 14) == 0 ? &events : &core;
	json_t *cells = json_array(), *obj = jx_get(ev, f->regarding);
	char first[DURATION_BUF], last[DURATION_BUF], *msg;
	const char *kind = str_or(obj, "kind", ""), *oname = str_or(obj, "name", "");
	const char *comp = str_or(ev, f->component, str_or(ev, f->controller, ""));
	const char *host = str_or(ev, f->host, str_or(ev, "reportingInstance", ""));
	int64_t count = jx_int(ev, f->count, 0);
	char *lkind = strdup(kind);

	if (!lkind)
		abort();
	for (char *p = lkind; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!since_buf(ev, f->first, now, first))
		since_buf(ev, "eventTime", now, first);
	if (!since_buf(ev, f->last, now, last))
		strcpy(last, first);
	if (present(ev, "series")) {
		since_buf(ev, "series.lastObservedTime", now, last);
		count = jx_int(ev, "series.count", 0);
	} else if (count == 0) {
		count = 1; /* singleton events carry no count in the new API */
	}
	msg = trim_space(str_or(ev, f->note, ""));

	json_array_append_new(cells, json_string(last));
	json_array_append_new(cells, json_string(str_or(ev, "type", "")));
	json_array_append_new(cells, json_string(str_or(ev, "reason", "")));
	json_array_append_new(cells, *oname ? fmt_cell("%s/%s", lkind, oname) : json_string(lkind));
	json_array_append_new(cells, json_string(str_or(obj, "fieldPath", "")));
	json_array_append_new(cells, *host ? fmt_cell("%s, %s", comp, host) : json_string(comp));
	json_array_append_new(cells, json_string(msg));
	json_array_append_new(cells, json_string(first));
	json_array_append_new(cells, json_integer(count));
	json_array_append_new(cells, name(ev));
	free(lkind);
	free(msg);
	return cells;
}

/* ---- apps -------------------------------------------------------------- */

static json_t *deployment_cells(const json_t *d, int64_t now)
{
	json_t *cells = json_array();
	char *sel = selector_string(jx_get(d, "spec.selector"));

	json_array_append_new(cells, name(d));
	json_array_append_new(cells, fmt_cell("%" PRId64 "/%" PRId64,
					      jx_int(d, "status.readyReplicas", 0),
					      jx_int(d, "spec.replicas", 1)));
	json_array_append_new(cells, json_integer(jx_int(d, "status.updatedReplicas", 0)));
	json_array_append_new(cells, json_integer(jx_int(d, "status.availableReplicas", 0)));
	json_array_append_new(cells, age(d, now));
	container_cells(cells, jx_get(d, "spec.template.spec"));
	json_array_append_new(cells, json_string(sel ? sel : "<invalid>"));
	free(sel);
	return cells;
}

static json_t *replicaset_cells(const json_t *rs, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(rs));
	json_array_append_new(cells, json_integer(jx_int(rs, "spec.replicas", 1)));
	json_array_append_new(cells, json_integer(jx_int(rs, "status.replicas", 0)));
	json_array_append_new(cells, json_integer(jx_int(rs, "status.readyReplicas", 0)));
	json_array_append_new(cells, age(rs, now));
	container_cells(cells, jx_get(rs, "spec.template.spec"));
	json_array_append_new(cells, format_label_selector(jx_get(rs, "spec.selector")));
	return cells;
}

static json_t *daemonset_cells(const json_t *ds, int64_t now)
{
	static const char *const counts[] = {
		"status.desiredNumberScheduled", "status.currentNumberScheduled",
		"status.numberReady", "status.updatedNumberScheduled", "status.numberAvailable"};
	json_t *cells = json_array();

	json_array_append_new(cells, name(ds));
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		json_array_append_new(cells, json_integer(jx_int(ds, counts[i], 0)));
	json_array_append_new(cells, format_labels(jx_get(ds, "spec.template.spec.nodeSelector")));
	json_array_append_new(cells, age(ds, now));
	container_cells(cells, jx_get(ds, "spec.template.spec"));
	json_array_append_new(cells, format_label_selector(jx_get(ds, "spec.selector")));
	return cells;
}

static json_t *statefulset_cells(const json_t *ss, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(ss));
	json_array_append_new(cells, fmt_cell("%" PRId64 "/%" PRId64,
					      jx_int(ss, "status.readyReplicas", 0),
					      jx_int(ss, "spec.replicas", 1)));
	json_array_append_new(cells, age(ss, now));
	container_cells(cells, jx_get(ss, "spec.template.spec"));
	return cells;
}

/* ---- rbac.authorization.k8s.io ------------------------------------------ */

static json_t *role_cells(const json_t *role, int64_t now)
{
	json_t *cells = json_array();
	(void)now;
	json_array_append_new(cells, name(role));
	json_array_append_new(cells, json_string(str_or(role, "metadata.creationTimestamp", "")));
	return cells;
}

/* printRoleBinding: "<kind>/<name>", then users, groups and "ns/name" of
 * service accounts, comma-joined. */
static json_t *rolebinding_cells(const json_t *rb, int64_t now)
{
	json_t *cells = json_array(), *sub;
	struct strv users = STRV_INIT, groups = STRV_INIT, sas = STRV_INIT;
	size_t i;

	json_array_append_new(cells, name(rb));
	json_array_append_new(cells, fmt_cell("%s/%s", str_or(rb, "roleRef.kind", ""),
					      str_or(rb, "roleRef.name", "")));
	json_array_append_new(cells, age(rb, now));
	json_array_foreach(jx_get(rb, "subjects"), i, sub)
	{
		const char *kind = str_or(sub, "kind", ""), *n = str_or(sub, "name", "");
		if (!strcmp(kind, "User"))
			strv_push(&users, n);
		else if (!strcmp(kind, "Group"))
			strv_push(&groups, n);
		else if (!strcmp(kind, "ServiceAccount"))
			strv_pushf(&sas, "%s/%s", str_or(sub, "namespace", ""), n);
	}
	json_array_append_new(cells, joined(&users, ", ", ""));
	json_array_append_new(cells, joined(&groups, ", ", ""));
	json_array_append_new(cells, joined(&sas, ", ", ""));
	return cells;
}

/* ---- batch ------------------------------------------------------------- */

/* printJob's STATUS: the first of these that holds. */
static const char *job_status(const json_t *job)
{
	const json_t *conds = jx_get(job, "status.conditions");
	if (cond_true(conds, "Complete"))
		return "Complete";
	if (cond_true(conds, "Failed"))
		return "Failed";
	if (jx_get(job, "metadata.deletionTimestamp"))
		return "Terminating";
	if (cond_true(conds, "Suspended"))
		return "Suspended";
	if (cond_true(conds, "FailureTarget"))
		return "FailureTarget";
	return "Running"; /* SuccessCriteriaMet too: printJob has no case for it */
}

static json_t *job_cells(const json_t *job, int64_t now)
{
	json_t *cells = json_array();
	int64_t done = jx_int(job, "status.succeeded", 0), par = jx_int(job, "spec.parallelism", 0);
	int64_t start, end;
	char took[DURATION_BUF] = "";

	json_array_append_new(cells, name(job));
	json_array_append_new(cells, json_string(job_status(job)));
	if (json_is_integer(jx_get(job, "spec.completions")))
		json_array_append_new(cells, fmt_cell("%" PRId64 "/%" PRId64, done,
						      jx_int(job, "spec.completions", 0)));
	else if (par > 1)
		json_array_append_new(cells, fmt_cell("%" PRId64 "/1 of %" PRId64, done, par));
	else
		json_array_append_new(cells, fmt_cell("%" PRId64 "/1", done));
	if (time_parse_rfc3339(str_or(job, "status.startTime", ""), &start) == 0) {
		if (time_parse_rfc3339(str_or(job, "status.completionTime", ""), &end) != 0)
			end = now;
		duration_human(end - start, took);
	}
	json_array_append_new(cells, json_string(took));
	json_array_append_new(cells, age(job, now));
	container_cells(cells, jx_get(job, "spec.template.spec"));
	json_array_append_new(cells, format_label_selector(jx_get(job, "spec.selector")));
	return cells;
}

/* ---- core: namespaces, services, endpoints, config --------------------- */

static json_t *namespace_cells(const json_t *ns, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(ns));
	json_array_append_new(cells, json_string(str_or(ns, "status.phase", "")));
	json_array_append_new(cells, age(ns, now));
	return cells;
}

static void push_list(struct strv *sv, const json_t *arr)
{
	json_t *v;
	size_t i;
	json_array_foreach(arr, i, v)
		if (json_is_string(v))
			strv_push(sv, json_string_value(v));
}

/* getServiceExternalIP, as the server prints it (always wide: no clipping). */
static json_t *service_external_ip(const json_t *svc, const char *type)
{
	struct strv sv = STRV_INIT, lb = STRV_INIT;
	json_t *ing;
	size_t i;

	if (strcmp(type, "ClusterIP") == 0 || strcmp(type, "NodePort") == 0) {
		push_list(&sv, jx_get(svc, "spec.externalIPs"));
		return joined(&sv, ",", "<none>");
	}
	if (strcmp(type, "ExternalName") == 0)
		return json_string(str_or(svc, "spec.externalName", ""));
	if (strcmp(type, "LoadBalancer") != 0)
		return json_string("<unknown>");
	json_array_foreach(jx_get(svc, "status.loadBalancer.ingress"), i, ing) {
		const char *a = str_or(ing, "ip", str_or(ing, "hostname", NULL));
		if (a)
			strv_push_unique(&lb, a);
	}
	strv_sort(&lb);
	for (i = 0; i < lb.n; i++)
		strv_push(&sv, lb.v[i]);
	strv_free(&lb);
	push_list(&sv, jx_get(svc, "spec.externalIPs"));
	return joined(&sv, ",", "<pending>");
}

static json_t *service_cells(const json_t *svc, int64_t now)
{
	json_t *cells = json_array(), *p;
	const char *type = str_or(svc, "spec.type", "ClusterIP");
	json_t *ips = jx_get(svc, "spec.clusterIPs");
	const char *ip = json_array_size(ips) && json_is_string(json_array_get(ips, 0))
				 ? json_string_value(json_array_get(ips, 0))
				 : str_or(svc, "spec.clusterIP", "<none>");
	struct strv ports = STRV_INIT;
	size_t i;

	json_array_foreach(jx_get(svc, "spec.ports"), i, p) {
		int64_t port = jx_int(p, "port", 0), node_port = jx_int(p, "nodePort", 0);
		const char *proto = str_or(p, "protocol", "TCP");
		if (node_port > 0)
			strv_pushf(&ports, "%" PRId64 ":%" PRId64 "/%s", port, node_port, proto);
		else
			strv_pushf(&ports, "%" PRId64 "/%s", port, proto);
	}
	json_array_append_new(cells, name(svc));
	json_array_append_new(cells, json_string(type));
	json_array_append_new(cells, json_string(ip));
	json_array_append_new(cells, service_external_ip(svc, type));
	json_array_append_new(cells, joined(&ports, ",", "<none>"));
	json_array_append_new(cells, age(svc, now));
	json_array_append_new(cells, format_labels(jx_get(svc, "spec.selector")));
	return cells;
}

/* "a,b,c + N more..." as upstream lists at most three. */
#define LIST_MAX 3

static void host_port(struct strv *sv, const char *ip, int64_t port)
{
	if (strchr(ip, ':'))
		strv_pushf(sv, "[%s]:%" PRId64, ip, port);
	else
		strv_pushf(sv, "%s:%" PRId64, ip, port);
}

static json_t *more_list(struct strv *sv, size_t count, const char *empty)
{
	char *s;
	json_t *cell;
	if (count <= LIST_MAX || sv->n < LIST_MAX)
		return joined(sv, ",", empty);
	s = strv_join(sv, ",");
	cell = fmt_cell("%s + %zu more...", s, count - LIST_MAX);
	free(s);
	strv_free(sv);
	return cell;
}

static json_t *endpoints_cell(const json_t *ep)
{
	json_t *subsets = jx_get(ep, "subsets"), *ss, *port, *addr;
	struct strv sv = STRV_INIT;
	size_t i, j, k, count = 0;

	if (!json_array_size(subsets))
		return json_string("<none>");
	json_array_foreach(subsets, i, ss) {
		json_t *addrs = json_object_get(ss, "addresses"), *ports = json_object_get(ss, "ports");
		if (!json_array_size(ports)) {
			/* headless services may have no ports */
			count += json_array_size(addrs);
			json_array_foreach(addrs, k, addr)
				if (sv.n < LIST_MAX)
					strv_push(&sv, str_or(addr, "ip", ""));
			continue;
		}
		json_array_foreach(ports, j, port) {
			count += json_array_size(addrs);
			json_array_foreach(addrs, k, addr)
				if (sv.n < LIST_MAX)
					host_port(&sv, str_or(addr, "ip", ""), jx_int(port, "port", 0));
		}
	}
	return more_list(&sv, count, "");
}

static json_t *endpoints_cells(const json_t *ep, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(ep));
	json_array_append_new(cells, endpoints_cell(ep));
	json_array_append_new(cells, age(ep, now));
	return cells;
}

static json_t *endpointslice_cells(const json_t *es, int64_t now)
{
	json_t *cells = json_array(), *p, *e, *a;
	struct strv ports = STRV_INIT, addrs = STRV_INIT;
	size_t i, j, nports = 0, naddrs = 0;

	json_array_foreach(jx_get(es, "ports"), i, p) {
		if (ports.n < LIST_MAX) {
			if (json_is_integer(json_object_get(p, "port")))
				strv_pushf(&ports, "%" PRId64, jx_int(p, "port", 0));
			else
				strv_push(&ports, jx_str(p, "name") ? jx_str(p, "name") : "*");
		}
		nports++;
	}
	json_array_foreach(jx_get(es, "endpoints"), i, e) {
		json_array_foreach(json_object_get(e, "addresses"), j, a) {
			if (addrs.n < LIST_MAX && json_is_string(a))
				strv_push(&addrs, json_string_value(a));
			naddrs++;
		}
	}
	json_array_append_new(cells, name(es));
	json_array_append_new(cells, json_string(str_or(es, "addressType", "")));
	json_array_append_new(cells, more_list(&ports, nports, "<unset>"));
	json_array_append_new(cells, more_list(&addrs, naddrs, "<unset>"));
	json_array_append_new(cells, age(es, now));
	return cells;
}

static json_t *configmap_cells(const json_t *cm, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(cm));
	json_array_append_new(cells,
			      json_integer((json_int_t)(json_object_size(jx_get(cm, "data")) +
							json_object_size(jx_get(cm, "binaryData")))));
	json_array_append_new(cells, age(cm, now));
	return cells;
}

/* Controller: "<kind>.<group>/<name>" of the controlling owner, lower-case kind. */
static json_t *controllerrevision_cells(const json_t *cr, int64_t now)
{
	json_t *cells = json_array(), *ref;
	char ctl[512] = "<none>";
	size_t i;

	json_array_foreach(jx_get(cr, "metadata.ownerReferences"), i, ref)
	{
		const char *api = jx_str(ref, "apiVersion") ?: "", *slash = strchr(api, '/');
		char kind[128];
		size_t k;
		if (!json_is_true(json_object_get(ref, "controller")))
			continue;
		snprintf(kind, sizeof(kind), "%s", jx_str(ref, "kind") ?: "");
		for (k = 0; kind[k]; k++)
			kind[k] = (char)tolower((unsigned char)kind[k]);
		if (slash)
			snprintf(ctl, sizeof(ctl), "%s.%.*s/%s", kind, (int)(slash - api), api,
				 jx_str(ref, "name") ?: "");
		else
			snprintf(ctl, sizeof(ctl), "%s/%s", kind, jx_str(ref, "name") ?: "");
		break;
	}
	json_array_append_new(cells, name(cr));
	json_array_append_new(cells, json_string(ctl));
	json_array_append_new(cells, json_integer(jx_int(cr, "revision", 0)));
	json_array_append_new(cells, age(cr, now));
	return cells;
}

static json_t *secret_cells(const json_t *s, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(s));
	json_array_append_new(cells, json_string(str_or(s, "type", "Opaque")));
	json_array_append_new(cells, json_integer((json_int_t)json_object_size(jx_get(s, "data"))));
	json_array_append_new(cells, age(s, now));
	return cells;
}

static json_t *default_cells(const json_t *o, int64_t now)
{
	json_t *cells = json_array();
	json_array_append_new(cells, name(o));
	json_array_append_new(cells, age(o, now));
	return cells;
}

/* ---- dispatch ---------------------------------------------------------- */

struct printer {
	const char *kind;
	const struct col *cols;
	size_t ncols;
	json_t *(*cells)(const json_t *obj, int64_t now);
};

#define P(k, c, f) {k, c, sizeof(c) / sizeof(c[0]), f}

static const struct printer printers[] = {
	P("Node", node_cols, node_cells),
	P("Pod", pod_cols, pod_cells),
	P("CertificateSigningRequest", csr_cols, csr_cells),
	P("Lease", lease_cols, lease_cells),
	P("Event", event_cols, event_cells),
	P("Deployment", deployment_cols, deployment_cells),
	P("ReplicaSet", replicaset_cols, replicaset_cells),
	P("DaemonSet", daemonset_cols, daemonset_cells),
	P("StatefulSet", statefulset_cols, statefulset_cells),
	P("Job", job_cols, job_cells),
	P("Role", role_cols, role_cells),
	P("ClusterRole", role_cols, role_cells),
	/* The apiserver's default columns, as upstream's CRD storage has. */
	P("CustomResourceDefinition", role_cols, role_cells),
	P("RoleBinding", rolebinding_cols, rolebinding_cells),
	P("ClusterRoleBinding", rolebinding_cols, rolebinding_cells),
	P("Namespace", namespace_cols, namespace_cells),
	P("Service", service_cols, service_cells),
	P("Endpoints", endpoints_cols, endpoints_cells),
	P("EndpointSlice", endpointslice_cols, endpointslice_cells),
	P("ConfigMap", configmap_cols, configmap_cells),
	P("Secret", secret_cols, secret_cells),
	P("ControllerRevision", controllerrevision_cols, controllerrevision_cells),
};

static const struct printer default_printer = P("", default_cols, default_cells);

static const struct printer *printer_for(const char *kind)
{
	for (size_t i = 0; kind && i < sizeof(printers) / sizeof(printers[0]); i++)
		if (strcmp(printers[i].kind, kind) == 0)
			return &printers[i];
	return &default_printer;
}

json_t *printers_columns(const char *kind)
{
	const struct printer *p = printer_for(kind);
	json_t *cols = json_array();
	for (size_t i = 0; i < p->ncols; i++) {
		const struct col *c = &p->cols[i];
		json_array_append_new(cols, json_pack("{s:s,s:s,s:s,s:s,s:i}", "name", c->name, "type",
						      c->type, "format", c->format, "description",
						      c->desc, "priority", c->priority));
	}
	return cols;
}

json_t *printers_cells(const char *kind, const json_t *obj, int64_t now_ns)
{
	return printer_for(kind)->cells(obj, now_ns);
}

json_t *printers_row_object(const json_t *obj, const char *include)
{
	json_t *md, *partial;

	if (include && strcmp(include, "None") == 0)
		return NULL;
	if (include && strcmp(include, "Object") == 0)
		return json_incref((json_t *)obj);
	md = json_object_get(obj, "metadata");
	md = json_is_object(md) ? json_copy(md) : json_object();
	json_object_del(md, "managedFields");
	partial = json_pack("{s:s,s:s}", "kind", "PartialObjectMetadata", "apiVersion",
			    "meta.k8s.io/v1");
	json_object_set_new(partial, "metadata", md);
	return partial;
}

/* Upstream's row condition for pods that have finished. */
static json_t *pod_row_conditions(const json_t *pod)
{
	const char *phase = str_or(pod, "status.phase", "");
	const char *msg;

	if (strcmp(phase, "Succeeded") == 0)
		msg = "The pod has completed successfully.";
	else if (strcmp(phase, "Failed") == 0)
		msg = "The pod failed.";
	else
		return NULL;
	return json_pack("[{s:s,s:s,s:s,s:s}]", "type", "Completed", "status", "True", "reason",
			 phase, "message", msg);
}

json_t *printers_table(const char *kind, const json_t *items, const char *list_rv,
		       const char *continue_token, const char *include, bool with_columns,
		       int64_t now_ns)
{
	json_t *t = json_pack("{s:s,s:s}", "kind", "Table", "apiVersion", "meta.k8s.io/v1");
	json_t *md = json_object(), *rows = json_array(), *item, *conds, *obj;
	bool is_pod = kind && strcmp(kind, "Pod") == 0;
	size_t i;

	if (list_rv && *list_rv)
		json_object_set_new(md, "resourceVersion", json_string(list_rv));
	if (continue_token && *continue_token)
		json_object_set_new(md, "continue", json_string(continue_token));
	json_object_set_new(t, "metadata", md);
	json_object_set_new(t, "columnDefinitions",
			    with_columns ? printers_columns(kind) : json_null());
	json_array_foreach((json_t *)items, i, item) {
		json_t *row = json_object();
		json_object_set_new(row, "cells", printers_cells(kind, item, now_ns));
		if (is_pod && (conds = pod_row_conditions(item)))
			json_object_set_new(row, "conditions", conds);
		obj = printers_row_object(item, include);
		json_object_set_new(row, "object", obj ? obj : json_null());
		json_array_append_new(rows, row);
	}
	json_object_set_new(t, "rows", rows);
	return t;
}

int printers_include_parse(const char *s, const char **out)
{
	static const char *const valid[] = {"Metadata", "Object", "None"};
	char *q;
	int rc;

	if (!s || !*s) {
		*out = valid[0];
		return 0;
	}
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
		if (strcmp(s, valid[i]) == 0) {
			*out = valid[i];
			return 0;
		}
	{
		struct sbuf b = SBUF_INIT;
		sbuf_quote(&b, s);
		q = sbuf_take(&b);
	}
	rc = err_set(ERR_INVALID,
		     "Unable to convert to Table as requested: includeObject: Invalid value: %s: "
		     "must be 'Metadata', 'Object', 'None', or empty",
		     q);
	free(q);
	return rc;
}
