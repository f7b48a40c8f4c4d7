/*
 * endpoints-controller and endpointslice-controller (upstream
 * pkg/controller/endpoint and staging endpointslice, 1.32;
 * reference/k8s-controllers-1.32.md §8): for each Service with a selector
 * (not ExternalName), the pods it selects, as an Endpoints object of the
 * same name and as EndpointSlices.
 *
 *   Endpoints — pods with an IP, not Succeeded/Failed. Ready ones in
 *     subsets[].addresses, the others in notReadyAddresses (all in
 *     addresses with publishNotReadyAddresses); pods being deleted are left
 *     out unless publishNotReadyAddresses. A node that goes NotReady makes
 *     its pods not Ready (node lifecycle), so they move to
 *     notReadyAddresses: the seeds' "endpoint drift". Ports: each Service
 *     port's targetPort (a number, or a container port's name). Subsets are
 *     packed as upstream's RepackSubsets (one per port set, addresses sorted).
 *   EndpointSlices — generateName "<service>-", labels
 *     kubernetes.io/service-name and endpointslice.kubernetes.io/managed-by,
 *     addressType IPv4, at most 100 endpoints each; every endpoint has
 *     conditions ready (serving and not terminating, or
 *     publishNotReadyAddresses), serving (Ready) and terminating
 *     (deletionTimestamp), nodeName and targetRef. Terminating pods stay in
 *     the slices.
 *
 * Both write only when what they computed differs from what is stored.
 * Threads: the loop's. Everything goes through the API server.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

#include "api/selector.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SVC_PATH "/api/v1/services"
#define EP_PATH "/api/v1/endpoints"
#define SLICE_PATH "/apis/discovery.k8s.io/v1/endpointslices"
#define MAX_PER_SLICE 100
#define MANAGED_BY "endpointslice-controller.k8s.io"

struct endpoints {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	bool slices; /* endpointslice-controller, else endpoints-controller */
	struct informer *services, *pods, *targets;
	int pods_by_ns, targets_by_service;
	struct keyed *work;
	struct event_recorder *events;
};

static const char *s_(const char *v)
{
	return v ? v : "";
}

static const char *proto(const json_t *port)
{
	const char *p = jx_str(port, "protocol");
	return p && *p ? p : "TCP";
}

/* A copy of v, or an empty object when v is absent or not an object. */
static json_t *object_copy(const json_t *v)
{
	return json_is_object(v) ? json_deep_copy(v) : json_object();
}

/* have (absent: empty) equals want. */
static bool same(const json_t *have, const json_t *want)
{
	if (!have)
		return json_array_size(want) == 0 && json_object_size(want) == 0;
	return json_equal(have, want);
}

static const char *slice_service(const json_t *slice)
{
	const char *svc = json_string_value(
		json_object_get(jx_get(slice, "metadata.labels"), "kubernetes.io/service-name"));
	static char buf[512];
	if (!svc)
		return NULL;
	snprintf(buf, sizeof(buf), "%s/%s", s_(jx_str(slice, "metadata.namespace")), svc);
	return buf;
}

/* ---- what a Service selects --------------------------------------------------------- */

static bool selects(const json_t *svc, const json_t *pod)
{
	const json_t *sel = jx_get(svc, "spec.selector");
	const char *k;
	json_t *v;

	if (!json_object_size(sel))
		return false;
	if (strcmp(s_(jx_str(svc, "metadata.namespace")), s_(jx_str(pod, "metadata.namespace"))))
		return false;
	json_object_foreach((json_t *)sel, k, v)
	{
		const char *have = json_string_value(json_object_get(jx_get(pod, "metadata.labels"), k));
		if (!have || strcmp(have, s_(json_string_value(v))))
			return false;
	}
	return true;
}

/* findPort: a Service port's targetPort on this pod, 0 if it has none. */
static int64_t target_port(const json_t *pod, const json_t *port)
{
	const json_t *tp = json_object_get(port, "targetPort"), *c, *cp;
	size_t i, j;

	if (!tp)
		return jx_int(port, "port", 0);
	if (json_is_integer(tp))
		return json_integer_value(tp);
	if (json_is_string(tp)) {
		char *end;
		long v = strtol(json_string_value(tp), &end, 10);
		if (!*end && *json_string_value(tp))
			return v;
		json_array_foreach(jx_get(pod, "spec.containers"), i, c)
			json_array_foreach(json_object_get(c, "ports"), j, cp) if (
				!strcmp(s_(jx_str(cp, "name")), json_string_value(tp)) &&
				!strcmp(proto(cp), proto(port))) return jx_int(cp, "containerPort", 0);
	}
	return 0;
}

static json_t *target_ref(const json_t *pod)
{
	return json_pack("{s:s,s:s,s:s,s:s}", "kind", "Pod", "namespace",
			 s_(jx_str(pod, "metadata.namespace")), "name",
			 s_(jx_str(pod, "metadata.name")), "uid", s_(jx_str(pod, "metadata.uid")));
}

/* ---- Endpoints --------------------------------------------------------------------------- */

static int by_ip(const void *a, const void *b)
{
	return strcmp(s_(jx_str(*(json_t *const *)a, "ip")), s_(jx_str(*(json_t *const *)b, "ip")));
}

/* One subset per distinct port list, addresses sorted by IP. */
static void add_to_subset(json_t *subsets, json_t *ports, json_t *addr, bool ready)
{
	json_t *sub;
	size_t i;
	json_array_foreach(subsets, i, sub) if (json_equal(json_object_get(sub, "ports"), ports))
	{
		json_t *list = json_object_get(sub, ready ? "addresses" : "notReadyAddresses");
		if (!list) {
			list = json_array();
			json_object_set_new(sub, ready ? "addresses" : "notReadyAddresses", list);
		}
		json_array_append_new(list, addr);
		json_decref(ports);
		return;
	}
	sub = json_pack("{s:o}", "ports", ports);
	json_object_set_new(sub, ready ? "addresses" : "notReadyAddresses", json_pack("[o]", addr));
	json_array_append_new(subsets, sub);
}

static void sort_subsets(json_t *subsets)
{
	json_t *sub;
	size_t i;
	json_array_foreach(subsets, i, sub)
	{
		static const char *const lists[] = {"addresses", "notReadyAddresses"};
		for (int l = 0; l < 2; l++) {
			jx_array_sort(json_object_get(sub, lists[l]), by_ip);
		}
	}
}

static json_t *subsets_for(struct endpoints *c, const json_t *svc)
{
	bool publish = json_is_true(jx_get(svc, "spec.publishNotReadyAddresses"));
	json_t *subsets = json_array(), **pods;
	size_t n = informer_indexed(c->pods, c->pods_by_ns, jx_str(svc, "metadata.namespace"), &pods);

	for (size_t i = 0; i < n; i++) {
		const json_t *pod = pods[i], *port;
		const char *ip = jx_str(pod, "status.podIP"), *phase = s_(jx_str(pod, "status.phase"));
		json_t *ports = json_array(), *addr;
		size_t k;

		if (!selects(svc, pod) || !ip || !*ip || !strcmp(phase, "Succeeded") ||
		    !strcmp(phase, "Failed") || (!publish && jx_get(pod, "metadata.deletionTimestamp"))) {
			json_decref(ports);
			continue;
		}
		json_array_foreach(jx_get(svc, "spec.ports"), k, port)
		{
			int64_t tp = target_port(pod, port);
			json_t *ep;
			if (!tp)
				continue;
			ep = json_pack("{s:I,s:s}", "port", (json_int_t)tp, "protocol", proto(port));
			if (jx_str(port, "name") && *jx_str(port, "name"))
				json_object_set_new(ep, "name", json_string(jx_str(port, "name")));
			if (jx_str(port, "appProtocol"))
				json_object_set_new(ep, "appProtocol",
						    json_string(jx_str(port, "appProtocol")));
			json_array_append_new(ports, ep);
		}
		addr = json_pack("{s:s,s:o}", "ip", ip, "targetRef", target_ref(pod));
		if (jx_str(pod, "spec.nodeName") && *jx_str(pod, "spec.nodeName"))
			json_object_set_new(addr, "nodeName", json_string(jx_str(pod, "spec.nodeName")));
		if (jx_str(pod, "spec.hostname") &&
		    !strcmp(s_(jx_str(pod, "spec.subdomain")), s_(jx_str(svc, "metadata.name"))))
			json_object_set_new(addr, "hostname", json_string(jx_str(pod, "spec.hostname")));
		add_to_subset(subsets, ports, addr, publish || pod_ready(pod));
	}
	free(pods);
	sort_subsets(subsets);
	return subsets;
}

/* Which write a callback answers: the event names it as upstream does. */
struct ep_write {
	struct endpoints *c;
	bool create; /* POST of an Endpoints object */
};

static void on_written(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	struct ep_write *w = arg;
	struct endpoints *c = w->c;
	char why[512], ns[256];
	const char *key = ksync_key(s), *slash = strchr(key, '/');
	struct event_ref ref;

	if (status == 200 || status == 201 || status == 404) {
		free(w);
		return;
	}
	api_error(why, sizeof(why), status, body, err);
	snprintf(ns, sizeof(ns), "%.*s", slash ? (int)(slash - key) : 0, key);
	if (c->slices) {
		ref = (struct event_ref){"v1", "Service", ns, slash ? slash + 1 : key, NULL};
		event_record(c->events, &ref, "Warning", "FailedToUpdateEndpointSlices",
			     "Error updating Endpoint Slices for Service %s: %s", key, why);
	} else {
		/* On the Endpoints object, as the endpoints controller records it. */
		ref = (struct event_ref){"v1", "Endpoints", ns, slash ? slash + 1 : key, NULL};
		if (w->create)
			event_record(c->events, &ref, "Warning", "FailedToCreateEndpoint",
				     "Failed to create endpoint for service %s: %s", key, why);
		else
			event_record(c->events, &ref, "Warning", "FailedToUpdateEndpoint",
				     "Failed to update endpoint %s: %s", key, why);
	}
	free(w);
	ksync_fail(s, "%s", why);
}

/* A write to the API with its callback's context. */
static void ep_call(struct endpoints *c, struct ksync *s, const char *method, const char *path,
		    const json_t *body, bool create)
{
	struct ep_write *w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->c = c;
	w->create = create;
	ksync_call_owned(s, method, path, NULL, body, on_written, w, free);
}

static void sync_endpoints(struct endpoints *c, struct ksync *s, const json_t *svc)
{
	char path[768], now[TIME_BUF];
	const char *ns = s_(jx_str(svc, "metadata.namespace")), *name = s_(jx_str(svc, "metadata.name"));
	json_t *have = informer_get(c->targets, ksync_key(s)), *subsets = subsets_for(c, svc);
	json_t *labels = object_copy(jx_get(svc, "metadata.labels")), *ep;

	if (!strcmp(s_(jx_str(svc, "spec.clusterIP")), "None"))
		json_object_set_new(labels, "service.kubernetes.io/headless", json_string(""));
	if (have && same(jx_get(have, "subsets"), subsets) &&
	    same(jx_get(have, "metadata.labels"), labels)) {
		json_decref(subsets);
		json_decref(labels);
		return;
	}
	time_format_rfc3339(clock_now(), now);
	ep = have ? json_deep_copy(have)
		  : json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "v1", "kind", "Endpoints",
			      "metadata", "name", name, "namespace", ns);
	json_object_set_new(ep, "subsets", subsets);
	json_object_set_new(json_object_get(ep, "metadata"), "labels", labels);
	if (!json_is_object(jx_get(ep, "metadata.annotations")))
		jx_set(ep, "metadata.annotations", json_object());
	json_object_set_new(jx_get(ep, "metadata.annotations"),
			    "endpoints.kubernetes.io/last-change-trigger-time", json_string(now));
	if (have) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/endpoints/%s", ns, name);
		ep_call(c, s, "PUT", path, ep, false);
	} else {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/endpoints", ns);
		ep_call(c, s, "POST", path, ep, true);
	}
	json_decref(ep);
}

/* ---- EndpointSlices ---------------------------------------------------------------------- */

static json_t *slice_ports(const json_t *svc, const json_t *pod)
{
	json_t *ports = json_array(), *port;
	size_t k;
	json_array_foreach(jx_get(svc, "spec.ports"), k, port)
	{
		int64_t tp = target_port(pod, port);
		if (tp)
			json_array_append_new(ports,
					      json_pack("{s:s,s:I,s:s}", "name",
							s_(jx_str(port, "name")), "port",
							(json_int_t)tp, "protocol", proto(port)));
	}
	return ports;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(s_(jx_str(*(json_t *const *)a, "targetRef.name")),
		      s_(jx_str(*(json_t *const *)b, "targetRef.name")));
}

static void sync_slices(struct endpoints *c, struct ksync *s, const json_t *svc)
{
	bool publish = json_is_true(jx_get(svc, "spec.publishNotReadyAddresses"));
	const char *ns = s_(jx_str(svc, "metadata.namespace")), *name = s_(jx_str(svc, "metadata.name"));
	json_t **pods, **have, **eps, *ports = NULL;
	size_t n = informer_indexed(c->pods, c->pods_by_ns, ns, &pods), neps = 0, nhave, nslices;
	char path[768];

	nhave = informer_indexed(c->targets, c->targets_by_service, ksync_key(s), &have);
	if (!(eps = calloc(n + 1, sizeof(*eps))))
		abort();
	for (size_t i = 0; i < n; i++) {
		const json_t *pod = pods[i];
		const char *ip = jx_str(pod, "status.podIP"), *phase = s_(jx_str(pod, "status.phase"));
		bool serving = pod_ready(pod), terminating = jx_get(pod, "metadata.deletionTimestamp");
		json_t *ep;
		if (!selects(svc, pod) || !ip || !*ip || !strcmp(phase, "Succeeded") ||
		    !strcmp(phase, "Failed"))
			continue;
		if (!ports)
			ports = slice_ports(svc, pod);
		ep = json_pack("{s:[s],s:{s:b,s:b,s:b},s:o}", "addresses", ip, "conditions", "ready",
			       publish || (serving && !terminating), "serving", serving,
			       "terminating", terminating, "targetRef", target_ref(pod));
		if (jx_str(pod, "spec.nodeName") && *jx_str(pod, "spec.nodeName"))
			json_object_set_new(ep, "nodeName", json_string(jx_str(pod, "spec.nodeName")));
		eps[neps++] = ep;
	}
	free(pods);
	qsort(eps, neps, sizeof(*eps), by_name);
	if (!ports)
		ports = json_array();
	/* The slices as they should be: 100 endpoints each, one (empty)
	 * placeholder when there are none. */
	nslices = neps ? (neps + MAX_PER_SLICE - 1) / MAX_PER_SLICE : 1;
	for (size_t k = 0; k < nslices; k++) {
		json_t *list = json_array(), *labels, *want;
		for (size_t i = k * MAX_PER_SLICE; i < neps && i < (k + 1) * MAX_PER_SLICE; i++)
			json_array_append(list, eps[i]);
		labels = object_copy(jx_get(svc, "metadata.labels"));
		json_object_set_new(labels, "kubernetes.io/service-name", json_string(name));
		json_object_set_new(labels, "endpointslice.kubernetes.io/managed-by",
				    json_string(MANAGED_BY));
		if (!strcmp(s_(jx_str(svc, "spec.clusterIP")), "None"))
			json_object_set_new(labels, "service.kubernetes.io/headless", json_string(""));
		if (k < nhave) {
			json_t *old = have[k];
			if (same(jx_get(old, "endpoints"), list) && same(jx_get(old, "ports"), ports) &&
			    json_equal(jx_get(old, "metadata.labels"), labels)) {
				json_decref(list);
				json_decref(labels);
				continue;
			}
			want = json_deep_copy(old);
			json_object_set_new(want, "endpoints", list);
			json_object_set(want, "ports", ports);
			json_object_set_new(json_object_get(want, "metadata"), "labels", labels);
			snprintf(path, sizeof(path),
				 "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s", ns,
				 s_(jx_str(old, "metadata.name")));
			ep_call(c, s, "PUT", path, want, false);
		} else {
			char prefix[300];
			snprintf(prefix, sizeof(prefix), "%s-", name);
			want = json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:[o]},s:s,s:o,s:O}", "apiVersion",
					 "discovery.k8s.io/v1", "kind", "EndpointSlice", "metadata",
					 "generateName", prefix, "namespace", ns, "labels", labels,
					 "ownerReferences", owner_ref_to(svc, "v1", "Service"),
					 "addressType", "IPv4", "endpoints", list, "ports", ports);
			snprintf(path, sizeof(path),
				 "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices", ns);
			ep_call(c, s, "POST", path, want, false);
		}
		json_decref(want);
	}
	/* Slices beyond what is needed go. */
	for (size_t k = nslices; k < nhave; k++) {
		snprintf(path, sizeof(path), "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s",
			 ns, s_(jx_str(have[k], "metadata.name")));
		ep_call(c, s, "DELETE", path, NULL, false);
	}
	for (size_t i = 0; i < neps; i++)
		json_decref(eps[i]);
	free(eps);
	free(have);
	json_decref(ports);
}

static void sync_service(void *ctl, struct ksync *s)
{
	struct endpoints *c = ctl;
	json_t *svc = informer_get(c->services, ksync_key(s));

	if (!svc) {
		/* The Service is gone: its Endpoints go too (they carry no owner
		 * reference; the slices do, and the cascading delete takes them). */
		const char *key = ksync_key(s), *slash = strchr(key, '/');
		char path[768];
		if (!c->slices && slash && informer_get(c->targets, key)) {
			snprintf(path, sizeof(path), "/api/v1/namespaces/%.*s/endpoints/%s",
				 (int)(slash - key), key, slash + 1);
			ep_call(c, s, "DELETE", path, NULL, false);
		}
		return;
	}
	if (!json_object_size(jx_get(svc, "spec.selector")) ||
	    !strcmp(s_(jx_str(svc, "spec.type")), "ExternalName"))
		return;
	if (c->slices)
		sync_slices(c, s, svc);
	else
		sync_endpoints(c, s, svc);
}

/* ---- informers ---------------------------------------------------------------------------- */

static void enqueue_services_of(struct endpoints *c, const json_t *pod)
{
	json_t **svcs;
	size_t n = informer_list(c->services, &svcs);
	char key[512];
	for (size_t i = 0; i < n; i++)
		if (selects(svcs[i], pod))
			keyed_add(c->work, obj_key(svcs[i], key, sizeof(key)));
	free(svcs);
}

static void on_pod(void *arg, json_t *pod)
{
	enqueue_services_of(arg, pod);
}

static void on_pod_update(void *arg, json_t *old, json_t *pod)
{
	if (json_equal(jx_get(old, "metadata.resourceVersion"), jx_get(pod, "metadata.resourceVersion")))
		return;
	/* Labels changed: the services that selected it before too. */
	if (!json_equal(jx_get(old, "metadata.labels"), jx_get(pod, "metadata.labels")))
		enqueue_services_of(arg, old);
	enqueue_services_of(arg, pod);
}

static void on_service(void *arg, json_t *svc)
{
	struct endpoints *c = arg;
	char key[512];
	keyed_add(c->work, obj_key(svc, key, sizeof(key)));
}

static void on_service_update(void *arg, json_t *old, json_t *svc)
{
	(void)old;
	on_service(arg, svc);
}

/* Someone else changed what we write: put it back. */
static void on_target(void *arg, json_t *obj)
{
	struct endpoints *c = arg;
	char key[512];
	if (c->slices) {
		const char *svc = slice_service(obj);
		if (svc && !strcmp(s_(json_string_value(json_object_get(
					  jx_get(obj, "metadata.labels"),
					  "endpointslice.kubernetes.io/managed-by"))),
				   MANAGED_BY))
			keyed_add(c->work, svc);
		return;
	}
	keyed_add(c->work, obj_key(obj, key, sizeof(key)));
}

static void on_target_update(void *arg, json_t *old, json_t *obj)
{
	(void)old;
	on_target(arg, obj);
}

static const char *index_slice_service(const json_t *slice)
{
	return slice_service(slice);
}

static struct endpoints *endpoints_make(struct controller_manager *m, bool slices)
{
	struct endpoints *c = calloc(1, sizeof(*c));
	struct informer_handlers sh = {on_service, on_service_update, on_service, c};
	struct informer_handlers ph = {on_pod, on_pod_update, on_pod, c};
	struct informer_handlers th = {NULL, on_target_update, on_target, c};

	if (!c)
		abort();
	c->m = m;
	c->slices = slices;
	c->rest = cm_client(m, slices ? "endpointslice-controller" : "endpoint-controller");
	c->services = cm_informer(m, SVC_PATH, &sh);
	c->pods = cm_informer(m, "/api/v1/pods", &ph);
	c->pods_by_ns = cm_index(m, "/api/v1/pods", index_namespace);
	c->targets = cm_informer(m, slices ? SLICE_PATH : EP_PATH, &th);
	if (slices)
		c->targets_by_service = cm_index(m, SLICE_PATH, index_slice_service);
	c->events = event_recorder_new(m->loop, c->rest,
				       slices ? "endpoint-slice-controller" : "endpoint-controller",
				       NULL, 3);
	c->work = keyed_new(m, "endpoint", c->rest, m->workers, sync_service, c,
			    slices ? "error syncing endpoint slices for service %s: %s"
				   : "error syncing service %s: %s");
	LOG_INFO(slices ? "\"Starting endpoint slice controller\""
			: "\"Starting endpoint controller\"");
	return c;
}

struct endpoints *endpoints_new(struct controller_manager *m)
{
	return endpoints_make(m, false);
}

struct endpoints *endpointslice_new(struct controller_manager *m)
{
	return endpoints_make(m, true);
}

void endpoints_stop(struct endpoints *c)
{
	if (!c)
		return;
	keyed_stop(c->work);
	event_recorder_free(c->events);
	c->events = NULL;
}

void endpoints_free(struct endpoints *c)
{
	if (!c)
		return;
	endpoints_stop(c);
	keyed_free(c->work);
	free(c);
}
