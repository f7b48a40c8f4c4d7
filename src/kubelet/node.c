/*
 * The node's heartbeats, as upstream's kubelet sends them (k8s-facts §4):
 *
 *   status — register the Node (POST; on 409 GET and reconcile, as
 *            tryRegisterWithAPIServer), then every nodeStatusUpdateFrequency
 *            take the node, compute the status, and PATCH nodes/<n>/status
 *            only when something changed or nodeStatusReportFrequency has
 *            passed; five tries per period. The first try takes the node
 *            from the kubelet's informer on it (upstream since 1.30: its
 *            node lister), the retries GET it from the store.
 *   lease  — kube-node-lease/<n>, renewed every 25 % of the lease duration
 *            (+4 % jitter): five optimistic PUTs, then get-or-create with a
 *            100 ms → 7 s backoff (component-helpers lease controller).
 *
 * The machine's figures (CPUs, memory, disk) are read once per kubelet.
 */
#include "kubelet/internal.h"

#include "client/informer.h"
#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/intern.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/timeutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#define STATUS_TRIES 5      /* nodeStatusUpdateRetry */
#define LEASE_TRIES 5       /* maxUpdateRetries */
#define REGISTER_MAX_NS (7 * NS_PER_SEC)
#define LEASE_BACKOFF_MAX_NS (7 * NS_PER_SEC)
#define LEASE_NS "kube-node-lease"

/* The same for every hollow node of a process: one copy (str_intern). */
struct machine {
	const char *cpu, *memory, *memory_alloc, *storage, *storage_alloc;
	const char *kernel, *os_image;
};

struct heartbeat {
	struct kubelet *k;
	struct machine m;
	/* registration and status */
	struct timer *status_timer;
	struct rest_call *status_call;
	struct informer *nodes;   /* this Node alone (metadata.name), kept as text */
	bool registered;
	int64_t register_step_ns;
	int tries;
	int64_t last_report_mono; /* INT64_MIN: never reported */
	char *node_uid;
	/* The last sync from the informer had nothing to write (quiet) for
	 * this Node text and these status_inputs(), both fingerprinted. */
	bool quiet;
	uint64_t quiet_node, quiet_inputs;
	/* the lease */
	struct timer *lease_timer, *ensure_timer;
	struct rest_call *lease_call;
	char *latest;             /* the lease as last written, its text (a tree is
	                           * 5x that, kept 10 s); NULL: get-or-create */
	int lease_tries;          /* updates tried in this round */
	bool after_ensure;        /* this round follows a get-or-create */
	bool lease_phased, status_phased; /* random_phase: the first period taken */
	bool ensure_resumes;      /* get-or-create for a conflict, mid-round */
	int64_t lease_sleep_ns;   /* get-or-create backoff */
};

/* ---- the machine ------------------------------------------------------------------ */

static void read_os_image(char *out, size_t n)
{
	FILE *f = fopen("/etc/os-release", "r");
	char line[256];

	snprintf(out, n, "Linux");
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "PRETTY_NAME=", 12))
			continue;
		char *v = line + 12, *e;
		if (*v == '"')
			v++;
		if ((e = strpbrk(v, "\"\n")))
			*e = '\0';
		snprintf(out, n, "%s", v);
	}
	if (f)
		fclose(f);
}

/* printf into the process's one copy of the result. */
static const char *interned(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *interned(const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return str_intern(buf);
}

/* The kernel and OS image: the machine's, read once a process, not once
 * for each of its hollow nodes. */
static const char *machine_kernel, *machine_os_image;

static void read_os(void)
{
	struct utsname u;
	char os_image[128];

	machine_kernel = interned("%s", uname(&u) == 0 ? u.release : "");
	read_os_image(os_image, sizeof(os_image));
	machine_os_image = interned("%s", os_image);
}

static void read_machine(struct kubelet *k, struct machine *m)
{
	static pthread_once_t os_once = PTHREAD_ONCE_INIT;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int64_t mem = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	struct statvfs fs;
	int64_t disk = 0;

	if (statvfs(k->cfg.root_dir, &fs) == 0)
		disk = (int64_t)fs.f_blocks * (int64_t)fs.f_frsize;
	m->cpu = interned("%ld", cpus > 0 ? cpus : 1);
	m->memory = interned("%" PRId64 "Ki", mem / 1024);
	/* Allocatable: minus upstream's default hard eviction thresholds,
	 * memory.available<100Mi and nodefs.available<10%. */
	m->memory_alloc = interned("%" PRId64 "Ki", (mem - 100 * 1024 * 1024) / 1024);
	m->storage = interned("%" PRId64 "Ki", disk / 1024);
	m->storage_alloc = interned("%" PRId64, disk / 10 * 9);
	pthread_once(&os_once, read_os);
	m->kernel = machine_kernel;
	m->os_image = machine_os_image;
}

/* ---- the Node object ---------------------------------------------------------------- */

static json_t *labels(struct kubelet *k)
{
	json_t *l = json_pack("{s:s,s:s,s:s,s:s,s:s}", "beta.kubernetes.io/arch", "amd64",
			      "beta.kubernetes.io/os", "linux", "kubernetes.io/arch", "amd64",
			      "kubernetes.io/hostname", k->cfg.node_name, "kubernetes.io/os",
			      "linux");
	for (size_t i = 0; i < k->cfg.node_labels.n; i++) {
		const char *kv = k->cfg.node_labels.v[i], *eq = strchr(kv, '=');
		char key[256];
		if (!eq)
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
		json_object_set_new(l, key, json_string(eq + 1));
	}
	return l;
}

/* One condition as setters.go writes it: the transition time moves only
 * when the status flips. */
static json_t *condition(const json_t *old_status, const char *type, const char *status,
			 const char *reason, const char *message, const char *now)
{
	const json_t *old = jx_condition(old_status, type);
	const char *ot = old ? jx_str(old, "status") : NULL;
	const char *since = ot && !strcmp(ot, status) && jx_str(old, "lastTransitionTime")
				    ? jx_str(old, "lastTransitionTime")
				    : now;
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status,
			 "lastHeartbeatTime", now, "lastTransitionTime", since, "reason", reason,
			 "message", message);
}

/* Renewals in a row that make "rotation keeps failing". */
#define CERT_CONDITION_FAILURES 3

/*
 * cube's ClientCertificateExpiring (certificateCondition, opt-in; upstream's
 * kubelet has none): True once the client certificate is past 90 % of its
 * life — the end of the window in which rotation renews it — or after
 * CERT_CONDITION_FAILURES failed renewals in a row, naming the certificate
 * and its NotAfter, while the kubelet can still post it. Ready, and so the
 * taints and the scheduler, are left alone. Its status, reason and
 * message:
 */
struct cert_words {
	const char *status, *reason;
	char msg[1024];
};

static void cert_words(struct kubelet *k, struct cert_words *w)
{
	EVP_PKEY *key;
	X509 *cert = k->client_cm ? certmgr_held(k->client_cm, &key) : NULL;
	const char *last = NULL;
	int failing = k->client_cm ? certmgr_failing(k->client_cm, &last) : 0;
	char na[TIME_BUF], *path;
	int64_t nb, end, t = clock_now();
	size_t n;
	bool late;

	if (!cert) {
		w->status = "Unknown";
		w->reason = "NoClientCertificate";
		snprintf(w->msg, sizeof(w->msg), "the kubelet holds no client certificate");
		return;
	}
	nb = pki_cert_not_before(cert);
	end = pki_cert_not_after(cert);
	late = t >= nb + (end - nb) / 10 * 9;
	path = certstore_current_path(k->cfg.cert_dir, CERTSTORE_CLIENT);
	time_format_rfc3339(end, na);
	if (!late && failing < CERT_CONDITION_FAILURES) {
		w->status = "False";
		w->reason = "ClientCertificateValid";
		snprintf(w->msg, sizeof(w->msg), "client certificate %s valid until %s%s", path, na,
			 k->cfg.rotate_certificates ? "; rotation renews it at 70-90% of its life"
						    : "; rotation is off");
		free(path);
		return;
	}
	/* No countdown in it: the message changing at every sync would post the
	 * whole status each time. */
	w->status = "True";
	w->reason = late ? "ClientCertificateNearExpiry" : "ClientCertificateRotationFailing";
	n = (size_t)snprintf(w->msg, sizeof(w->msg), "client certificate %s (NotAfter %s) %s",
			     path, na,
			     end > t ? (late ? "is past 90% of its life and not renewed"
					     : "is not renewed")
				     : "has expired");
	if (!k->cfg.rotate_certificates && n < sizeof(w->msg))
		n += (size_t)snprintf(w->msg + n, sizeof(w->msg) - n, "; rotation is off");
	if (failing && n < sizeof(w->msg))
		snprintf(w->msg + n, sizeof(w->msg) - n, "; %d renewals failed in a row, the last: %s",
			 failing, last ? last : "");
	free(path);
}

static json_t *certificate_condition(struct kubelet *k, const json_t *old_status,
				     const char *now)
{
	struct cert_words w;

	cert_words(k, &w);
	return condition(old_status, "ClientCertificateExpiring", w.status, w.reason, w.msg, now);
}

static json_t *conditions(struct kubelet *k, const json_t *old_status, const char *now)
{
	json_t *list = json_pack(
		"[o,o,o,o]",
		condition(old_status, "MemoryPressure", "False", "KubeletHasSufficientMemory",
			  "kubelet has sufficient memory available", now),
		condition(old_status, "DiskPressure", "False", "KubeletHasNoDiskPressure",
			  "kubelet has no disk pressure", now),
		condition(old_status, "PIDPressure", "False", "KubeletHasSufficientPID",
			  "kubelet has sufficient PID available", now),
		condition(old_status, "Ready", "True", "KubeletReady",
			  "kubelet is posting ready status", now));

	if (k->cfg.certificate_condition)
		json_array_append_new(list, certificate_condition(k, old_status, now));
	return list;
}

static int status_port(struct kubelet *k)
{
	return k->cfg.port > 0 ? k->cfg.port : kubelet_port(k);
}

/*
 * The status as setNodeStatus makes it. Besides old_status and the clock's
 * `now` it reads the kubelet's fixed figures (machine, names, addresses,
 * IDs) and what status_inputs() hashes: anything new read here that can
 * change while the kubelet runs must go there too.
 */
static json_t *build_status(struct heartbeat *h, const json_t *old_status)
{
	struct kubelet *k = h->k;
	const struct machine *m = &h->m;
	char now[TIME_BUF], pods[16];
	int port = status_port(k);

	time_format_rfc3339(clock_now(), now);
	snprintf(pods, sizeof(pods), "%d", k->cfg.max_pods);
	return json_pack(
		"{s:{s:s,s:s,s:s,s:s,s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s,s:s},s:o,"
		"s:[{s:s,s:s},{s:s,s:s}],s:{s:{s:i}},"
		"s:{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}}",
		"capacity", "cpu", m->cpu, "ephemeral-storage", m->storage, "hugepages-1Gi", "0",
		"hugepages-2Mi", "0", "memory", m->memory, "pods", pods, "allocatable", "cpu",
		m->cpu, "ephemeral-storage", m->storage_alloc, "hugepages-1Gi", "0",
		"hugepages-2Mi", "0", "memory", m->memory_alloc, "pods", pods, "conditions",
		conditions(k, old_status, now), "addresses", "type", "InternalIP", "address",
		k->cfg.node_ip, "type", "Hostname", "address", k->cfg.node_name,
		"daemonEndpoints", "kubeletEndpoint", "Port", port, "nodeInfo", "machineID",
		k->machine_id, "systemUUID", k->system_uuid, "bootID", k->boot_id,
		"kernelVersion", m->kernel, "osImage", m->os_image, "containerRuntimeVersion",
		KUBELET_RUNTIME_VERSION, "kubeletVersion", KUBELET_VERSION, "kubeProxyVersion",
		"", "operatingSystem", "linux", "architecture", "amd64");
}

/* FNV-1a, 64 bits: a fingerprint, not a defence against anyone. */
#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)

static uint64_t fnv1a(uint64_t x, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		x = (x ^ b[i]) * UINT64_C(0x100000001b3);
	return x;
}

/* What build_status reads that may change while the kubelet runs: its
 * port, and with certificateCondition that condition's words. */
static uint64_t status_inputs(struct heartbeat *h)
{
	struct kubelet *k = h->k;
	int port = status_port(k);
	uint64_t x = fnv1a(FNV_OFFSET, &port, sizeof(port));

	if (k->cfg.certificate_condition) {
		struct cert_words w;
		cert_words(k, &w);
		x = fnv1a(x, w.status, strlen(w.status) + 1);
		x = fnv1a(x, w.reason, strlen(w.reason) + 1);
		x = fnv1a(x, w.msg, strlen(w.msg) + 1);
	}
	return x;
}

/* Each of a's fields but its heartbeat is the same in b. */
static bool heartbeat_aside_in(const json_t *a, const json_t *b)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)a, k, v)
	{
		if (strcmp(k, "lastHeartbeatTime") && !jx_equal(v, json_object_get(b, k)))
			return false;
	}
	return true;
}

/* Two conditions alike but for their heartbeats (either may be NULL). */
static bool same_condition(const json_t *a, const json_t *b)
{
	if (!a || !b)
		return a == b;
	return heartbeat_aside_in(a, b) && heartbeat_aside_in(b, a);
}

/* What nodeStatusHasChanged compares: the kubelet's fields, heartbeats
 * aside. Read in place: every node does this every 10 s. */
static bool status_changed(const json_t *old_status, const json_t *new_status)
{
	static const char *const keys[] = {"capacity", "allocatable", "addresses",
					   "daemonEndpoints", "nodeInfo", NULL};
	static const char *const types[] = {"MemoryPressure", "DiskPressure", "PIDPressure",
					    "Ready", "ClientCertificateExpiring", NULL};

	for (size_t i = 0; keys[i]; i++) {
		if (!jx_equal(json_object_get(old_status, keys[i]),
			      json_object_get(new_status, keys[i])))
			return true;
	}
	for (size_t i = 0; types[i]; i++)
		if (!same_condition(jx_condition(old_status, types[i]),
				    jx_condition(new_status, types[i])))
			return true;
	return false;
}

static json_t *initial_node(struct heartbeat *h)
{
	struct kubelet *k = h->k;
	json_t *spec = json_object();

	if (k->cfg.register_with_taints && json_array_size(k->cfg.register_with_taints))
		json_object_set(spec, "taints", k->cfg.register_with_taints);
	return json_pack("{s:s,s:s,s:{s:s,s:o,s:{s:s}},s:o,s:o}", "apiVersion", "v1", "kind",
			 "Node", "metadata", "name", k->cfg.node_name, "labels", labels(k),
			 "annotations", "volumes.kubernetes.io/controller-managed-attach-detach",
			 "true", "spec", spec, "status", build_status(h, NULL));
}

/* ---- registration and status ------------------------------------------------------------ */

static void status_sync(void *arg);
static void status_try(struct heartbeat *h);

/* random_phase: the first wait is a uniform part of the period (0 when
 * this is not the first, or the kubelet runs alone). */
static int64_t first_period(const struct kubelet *k, bool *taken, int64_t period)
{
	if (!k->cfg.random_phase || *taken)
		return 0;
	*taken = true;
	return 1 + (int64_t)(rand_double() * (double)period);
}

static void status_done(struct heartbeat *h)
{
	/* wait.JitterUntil(syncNodeStatus, nodeStatusUpdateFrequency, 0.04,
	 * sliding=true): the jittered period starts when this sync is done. */
	int64_t f = h->k->cfg.node_status_update_frequency_ns;
	timer_after(h->status_timer, first_period(h->k, &h->status_phased, f) ?:
	                                 f + (int64_t)(rand_double() * 0.04 * (double)f));
}

static void registered(struct heartbeat *h, const json_t *node, const char *how)
{
	free(h->node_uid);
	h->node_uid = jx_str(node, "metadata.uid") ? strdup(jx_str(node, "metadata.uid")) : NULL;
	h->registered = true;
	LOG_INFO("\"%s\" node=\"%s\"", how, h->k->cfg.node_name);
	h->tries = 0;
	status_try(h);
}

static void register_retry(struct heartbeat *h)
{
	h->register_step_ns = h->register_step_ns ? h->register_step_ns * 2 : 100 * NS_PER_MS;
	if (h->register_step_ns > REGISTER_MAX_NS)
		h->register_step_ns = REGISTER_MAX_NS;
	timer_after(h->status_timer, h->register_step_ns);
}

static void on_label_patch(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;
	char why[512], q[600];

	h->status_call = NULL;
	if (status != 200) {
		kubelet_http_error("PATCH", h->k->server, "/api/v1/nodes", status, body, err, why,
				   sizeof(why));
		LOG_ERROR("\"Unable to reconcile node with API server,error updating node\" "
			  "err=\"%s\" node=\"%s\"",
			  log_quote(q, sizeof(q), why), h->k->cfg.node_name);
		register_retry(h);
		return;
	}
	registered(h, body, "Successfully registered node");
}

/* The labels updateDefaultLabels reconciles on an existing Node; others,
 * --node-labels included, are the Node's own once it exists. */
static bool default_label(const char *key)
{
	static const char *const keys[] = {
		"kubernetes.io/hostname", "topology.kubernetes.io/zone",
		"topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
		"failure-domain.beta.kubernetes.io/region", "kubernetes.io/os", "kubernetes.io/arch",
		"node.kubernetes.io/windows-build", "node.kubernetes.io/instance-type",
		"beta.kubernetes.io/instance-type", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
		NULL};
	for (size_t i = 0; keys[i]; i++)
		if (!strcmp(keys[i], key))
			return true;
	return false;
}

/* The node exists already: take it over, fixing the labels the kubelet owns. */
static void on_existing(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;
	json_t *want, *patch;
	char path[300], why[512], q[600];
	const char *key;
	json_t *v;
	bool differ = false;

	h->status_call = NULL;
	if (status != 200) {
		kubelet_http_error("GET", h->k->server, "/api/v1/nodes", status, body, err, why,
				   sizeof(why));
		LOG_ERROR("\"Unable to register node with API server, error getting existing node\" "
			  "err=\"%s\" node=\"%s\"",
			  log_quote(q, sizeof(q), why), h->k->cfg.node_name);
		register_retry(h);
		return;
	}
	LOG_INFO("\"Node was previously registered\" node=\"%s\"", h->k->cfg.node_name);
	want = json_object();
	{
		json_t *all = labels(h->k);
		json_object_foreach(all, key, v)
		{
			/* A missing label reads as "", as a Go map does. */
			const char *have = json_string_value(
				json_object_get(jx_get(body, "metadata.labels"), key));
			if (!have)
				have = "";
			if (!default_label(key) || !strcmp(have, json_string_value(v)))
				continue;
			/* An empty value removes the label, as upstream. */
			json_object_set(want, key, *json_string_value(v) ? v : json_null());
			differ = true;
		}
		json_decref(all);
	}
	if (!differ) {
		json_decref(want);
		registered(h, body, "Successfully registered node");
		return;
	}
	patch = json_pack("{s:{s:o}}", "metadata", "labels", want);
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", h->k->cfg.node_name);
	h->status_call = rest_do_ct(h->k->client, "PATCH", path, "application/merge-patch+json",
				    patch, on_label_patch, h);
	json_decref(patch);
}

static void on_register(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;
	char path[300], why[512], q[600];

	h->status_call = NULL;
	if (status == 201 || status == 200) {
		registered(h, body, "Successfully registered node");
		return;
	}
	if (status == 409) {
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", h->k->cfg.node_name);
		h->status_call = rest_do(h->k->client, "GET", path, NULL, on_existing, h);
		return;
	}
	kubelet_http_error("POST", h->k->server, "/api/v1/nodes", status, body, err, why,
			   sizeof(why));
	LOG_ERROR("\"Unable to register node with API server\" err=\"%s\" node=\"%s\"",
		  log_quote(q, sizeof(q), why), h->k->cfg.node_name);
	register_retry(h);
}

static void try_register(struct heartbeat *h)
{
	json_t *node = initial_node(h);
	kubelet_addresses_observed(h->k);
	LOG_INFO("\"Attempting to register node\" node=\"%s\"", h->k->cfg.node_name);
	h->status_call = rest_do(h->k->client, "POST", "/api/v1/nodes", node, on_register, h);
	json_decref(node);
}

static void status_failed(struct heartbeat *h, const char *what)
{
	char q[1024];
	LOG_ERROR("\"Error updating node status, will retry\" err=\"%s\"",
		  log_quote(q, sizeof(q), what));
	if (++h->tries < STATUS_TRIES) {
		status_try(h);
		return;
	}
	LOG_ERROR("\"Unable to update node status\" err=\"update node status exceeds retry "
		  "count\"");
	status_done(h);
}

/* A status call that failed, in upstream's words: `doing` "<node>": the
 * HTTP error (method on the node's path, suffix "" or "/status"). */
static void call_failed(struct heartbeat *h, const char *doing, const char *method,
			const char *suffix, int status, const json_t *body, const char *err)
{
	char why[512], what[768], path[300];

	snprintf(path, sizeof(path), "/api/v1/nodes/%s%s", h->k->cfg.node_name, suffix);
	snprintf(what, sizeof(what), "%s \"%s\": %s", doing, h->k->cfg.node_name,
		 kubelet_http_error(method, h->k->server, path, status, body, err, why,
				    sizeof(why)));
	status_failed(h, what);
}

static void on_patched(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;

	h->status_call = NULL;
	if (status != 200) {
		call_failed(h, "failed to patch status for node", "PATCH", "/status", status, body,
			    err);
		return;
	}
	h->last_report_mono = clock_mono();
	status_done(h);
}

/* nodeStatusReportFrequency has passed since the last write. */
static bool report_due(const struct heartbeat *h)
{
	return clock_mono() - h->last_report_mono >= h->k->cfg.node_status_report_frequency_ns;
}

/* The status computed against node, PATCHed when it changed or is due.
 * True when there was nothing to write. */
static bool update_from(struct heartbeat *h, const json_t *node)
{
	const json_t *old = jx_get(node, "status");
	json_t *next, *patch;
	char path[300];

	next = build_status(h, old);
	if (!report_due(h) && !status_changed(old, next)) {
		json_decref(next);
		status_done(h);
		return true;
	}
	patch = json_pack("{s:o}", "status", next);
	snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", h->k->cfg.node_name);
	h->status_call = rest_do_ct(h->k->client, "PATCH", path,
				    "application/strategic-merge-patch+json", patch, on_patched, h);
	json_decref(patch);
	return false;
}

static void on_node(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;

	h->status_call = NULL;
	if (status != 200) {
		call_failed(h, "error getting node", "GET", "", status, body, err);
		return;
	}
	h->quiet = false;
	update_from(h, body);
}

/*
 * tryUpdateNodeStatus: the first try reads the node the informer holds (it
 * may lag a write, or not have the node yet: "not found", as the lister
 * says); a retry GETs it from the store, as after a conflict.
 *
 * The same Node text and the same inputs as at the last sync that had
 * nothing to write give the same answer, so that sync is not computed
 * again: no parse of the Node's 2 KB every 10 s, the larger part of a
 * heartbeating hollow kubelet's CPU. The outcome is upstream's.
 */
static void status_try(struct heartbeat *h)
{
	const char *name = h->k->cfg.node_name, *text;
	char path[300], what[600];
	uint64_t node_hash, inputs;
	json_t *node;

	if (h->tries > 0) {
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
		h->status_call = rest_do(h->k->client, "GET", path, NULL, on_node, h);
		return;
	}
	if (!(text = informer_text(h->nodes, name))) {
		h->quiet = false;
		snprintf(what, sizeof(what), "error getting node \"%s\": node \"%s\" not found",
			 name, name);
		status_failed(h, what);
		return;
	}
	node_hash = fnv1a(FNV_OFFSET, text, strlen(text));
	inputs = status_inputs(h);
	if (h->quiet && node_hash == h->quiet_node && inputs == h->quiet_inputs &&
	    !report_due(h)) {
		status_done(h);
		return;
	}
	node = informer_read(h->nodes, name);
	h->quiet = update_from(h, node);
	h->quiet_node = node_hash;
	h->quiet_inputs = inputs;
	json_decref(node);
}

/* syncNodeStatus: register first (retrying with backoff), then update. */
static void status_sync(void *arg)
{
	struct heartbeat *h = arg;

	if (h->k->exited)
		return;
	if (!h->registered) {
		try_register(h);
		return;
	}
	h->tries = 0;
	status_try(h);
}

/* ---- the lease ------------------------------------------------------------------------ */

static void lease_update(struct heartbeat *h);
static void lease_ensure(void *arg);

static int64_t renew_interval(struct heartbeat *h)
{
	int64_t base = (int64_t)h->k->cfg.node_lease_duration_s * NS_PER_SEC / 4;
	return base + (int64_t)(rand_double() * 0.04 * (double)base);
}

/* JitterUntil with sliding: the next period starts when this one ends. */
static void lease_done(struct heartbeat *h)
{
	int64_t base = (int64_t)h->k->cfg.node_lease_duration_s * NS_PER_SEC / 4;
	timer_after(h->lease_timer, first_period(h->k, &h->lease_phased, base) ?: renew_interval(h));
}

static void lease_path(struct heartbeat *h, char *buf, size_t n, bool named)
{
	snprintf(buf, n, "/apis/coordination.k8s.io/v1/namespaces/" LEASE_NS "/leases%s%s",
		 named ? "/" : "", named ? h->k->cfg.node_name : "");
}

/* The lease the server answered with, kept for the next renewal. */
static void keep_latest(struct heartbeat *h, const json_t *lease)
{
	free(h->latest);
	h->latest = lease ? jx_dump(lease) : NULL;
}

/* The lease to write: base renewed now, owned by the Node once its uid is known. */
static json_t *renewed(struct heartbeat *h, const char *base)
{
	struct kubelet *k = h->k;
	json_t *l = base ? jx_parse_dumped(base, strlen(base)) : NULL;
	char now[TIME_BUF];

	if (!json_is_object(l)) {
		json_decref(l);
		l = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1",
			      "kind", "Lease", "metadata", "name", k->cfg.node_name, "namespace",
			      LEASE_NS);
	}

	jx_set_str(l, "spec.holderIdentity", k->cfg.node_name);
	jx_set(l, "spec.leaseDurationSeconds", json_integer(k->cfg.node_lease_duration_s));
	jx_set_str(l, "spec.renewTime", time_format_rfc3339_micro(clock_now(), now));
	if (h->node_uid && json_array_size(jx_get(l, "metadata.ownerReferences")) == 0)
		jx_set(l, "metadata.ownerReferences",
		       json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Node", "name",
				 k->cfg.node_name, "uid", h->node_uid));
	return l;
}

/* Start get-or-create; resume: go on with the current update round after it. */
static void start_ensure(struct heartbeat *h, bool resume)
{
	keep_latest(h, NULL);
	h->ensure_resumes = resume;
	h->lease_sleep_ns = 100 * NS_PER_MS;
	lease_ensure(h);
}

static void on_lease_put(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;
	char why[512], path[300], q[600];

	h->lease_call = NULL;
	if (status == 200) {
		keep_latest(h, body);
		lease_done(h);
		return;
	}
	lease_path(h, path, sizeof(path), true);
	kubelet_http_error("PUT", h->k->server, path, status, body, err, why, sizeof(why));
	LOG_ERROR("\"Failed to update lease\" err=\"%s\"", log_quote(q, sizeof(q), why));
	h->lease_tries++;
	if (status == 409 && h->lease_tries < LEASE_TRIES) {
		/* Someone else wrote it: continue from the newest version. */
		start_ensure(h, true);
		return;
	}
	if (h->lease_tries < LEASE_TRIES) {
		lease_update(h);
		return;
	}
	if (h->after_ensure) {
		LOG_ERROR("\"Will retry updating lease\" err=\"failed %d attempts to update lease\" "
			  "interval=\"%s\"",
			  LEASE_TRIES,
			  duration_format((int64_t)h->k->cfg.node_lease_duration_s * NS_PER_SEC / 4,
					  why));
		lease_done(h);
		return;
	}
	LOG_INFO("\"failed to update lease using latest lease, fallback to ensure lease\" "
		 "err=\"failed %d attempts to update lease\"",
		 LEASE_TRIES);
	start_ensure(h, false);
}

static void lease_update(struct heartbeat *h)
{
	json_t *l = renewed(h, h->latest);
	char path[300];

	lease_path(h, path, sizeof(path), true);
	h->lease_call = rest_do(h->k->client, "PUT", path, l, on_lease_put, h);
	json_decref(l);
}

static void ensure_failed(struct heartbeat *h, const char *method, int status, json_t *body,
			  const char *err)
{
	char why[512], path[300], d[DURATION_BUF], q[600];

	lease_path(h, path, sizeof(path), strcmp(method, "POST") != 0);
	h->lease_sleep_ns *= 2;
	if (h->lease_sleep_ns > LEASE_BACKOFF_MAX_NS)
		h->lease_sleep_ns = LEASE_BACKOFF_MAX_NS;
	kubelet_http_error(method, h->k->server, path, status, body, err, why, sizeof(why));
	LOG_ERROR("\"Failed to ensure lease exists, will retry\" err=\"%s\" interval=\"%s\"",
		  log_quote(q, sizeof(q), why), duration_format(h->lease_sleep_ns, d));
	/* backoffEnsureLease never gives up. */
	timer_after(h->ensure_timer, h->lease_sleep_ns);
}

static void on_lease_created(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;

	h->lease_call = NULL;
	if (status != 201 && status != 200) {
		ensure_failed(h, "POST", status, body, err);
		return;
	}
	/* A lease just created needs no update. */
	keep_latest(h, body);
	lease_done(h);
}

static void on_lease_get(void *arg, int status, json_t *body, const char *err)
{
	struct heartbeat *h = arg;
	json_t *l;
	char path[300];

	h->lease_call = NULL;
	if (status == 404) {
		l = renewed(h, NULL);
		lease_path(h, path, sizeof(path), false);
		h->lease_call = rest_do(h->k->client, "POST", path, l, on_lease_created, h);
		json_decref(l);
		return;
	}
	if (status != 200) {
		ensure_failed(h, "GET", status, body, err);
		return;
	}
	keep_latest(h, body);
	if (!h->ensure_resumes) {
		h->after_ensure = true;
		h->lease_tries = 0;
	}
	lease_update(h);
}

static void lease_ensure(void *arg)
{
	struct heartbeat *h = arg;
	char path[300];

	lease_path(h, path, sizeof(path), true);
	h->lease_call = rest_do(h->k->client, "GET", path, NULL, on_lease_get, h);
}

/* One renewal period: the optimistic update from the last lease written,
 * or get-or-create when there is none. */
static void lease_sync(void *arg)
{
	struct heartbeat *h = arg;

	if (h->k->exited)
		return;
	h->lease_tries = 0;
	h->after_ensure = false;
	if (h->latest)
		lease_update(h);
	else
		start_ensure(h, false);
}

/* ---- the whole -------------------------------------------------------------------------- */

struct heartbeat *heartbeat_new(struct kubelet *k)
{
	struct heartbeat *h = calloc(1, sizeof(*h));

	if (!h)
		abort();
	h->k = k;
	h->last_report_mono = INT64_MIN / 2;
	read_machine(k, &h->m);
	h->status_timer = loop_timer(k->loop, status_sync, h);
	h->lease_timer = loop_timer(k->loop, lease_sync, h);
	h->ensure_timer = loop_timer(k->loop, lease_ensure, h);
	return h;
}

void heartbeat_start(struct heartbeat *h)
{
	char query[300];

	/* The kubelet's informer on its own Node (its node lister), listed and
	 * watched before the Node exists. */
	snprintf(query, sizeof(query), "fieldSelector=metadata.name%%3D%s", h->k->cfg.node_name);
	h->nodes = informer_new(h->k->loop, h->k->client, "/api/v1/nodes", query, NULL);
	informer_keep_text(h->nodes);
	informer_start(h->nodes);
	timer_after(h->status_timer, 0);
	timer_after(h->lease_timer, 0);
}

void heartbeat_free(struct heartbeat *h)
{
	if (!h)
		return;
	rest_cancel(h->status_call);
	rest_cancel(h->lease_call);
	informer_free(h->nodes);
	timer_free(h->status_timer);
	timer_free(h->lease_timer);
	timer_free(h->ensure_timer);
	free(h->latest);
	free(h->node_uid);
	free(h);
}
