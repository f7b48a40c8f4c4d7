/*
 * Pods bound to this node, on a simulated runtime: an informer on
 * /api/v1/pods?fieldSelector=spec.nodeName=<node> feeds a work queue; each
 * pod "starts" pod-start-delay after the kubelet first sees it and is then
 * reported Running and Ready (PATCH pods/<p>/status), the way the status
 * manager reports a real one. A pod with a deletionTimestamp "stops" after
 * min(its grace period, the simulated stop time), is reported terminated,
 * and the kubelet confirms the deletion with gracePeriodSeconds=0 and a UID
 * precondition — the API server then removes it.
 *
 * A container runs its image's entrypoint forever — a server. One with a
 * command runs it, as far as the simulation understands it: `sleep D`
 * waits D (seconds, or with an s/m/h/d suffix), `exit N` ends with N,
 * `false` with 1, anything else takes no time and succeeds; `sh -c
 * "<script>"` runs the script's statements in turn. Where the pod's
 * restartPolicy is Never the pod ends Succeeded (every container exited 0)
 * or Failed; with OnFailure a failing container is restarted in place
 * (restartCount, lastState) after upstream's first 10 s back-off; with
 * Always the program is ignored and the container keeps running.
 *
 * The desired status is re-asserted whenever the API's copy differs (for
 * instance after the node lifecycle controller marked the pod not ready
 * while the kubelet was away), as upstream's status manager does.
 */
#include "kubelet/internal.h"

#include "client/informer.h"
#include "client/workqueue.h"

#include "base/clock.h"
#include "base/strv.h"
#include "base/sbuf.h"
#include "base/err.h"
#include "base/hmap.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One pod as the simulated runtime knows it. */
struct pod_state {
	struct pods *p;
	char *key; /* "namespace/name" */
	char *uid;
	int64_t seen_wall;    /* startTime: when the kubelet first saw the pod */
	int64_t start_at;     /* mono time its containers start; 0 = not planned */
	int64_t started_wall; /* when they started */
	int64_t stop_at;      /* mono time they stop; 0 = not stopping */
	int64_t stopped_wall;
	bool terminated;   /* the terminated status has been written */
	int64_t finish_at; /* mono time the program ends; 0 = runs forever */
	int64_t finished_wall;
	int exit_code; /* of the program that ended (first non-zero container) */
	int restarts;  /* OnFailure restarts so far */
	int last_exit; /* the exit code of the run before the last restart */
	int64_t last_started_wall, last_finished_wall;
	bool done;          /* ended for good: phase Succeeded or Failed */
	bool planned;       /* the program has been read */
	int64_t restart_at; /* mono end of a CrashLoopBackOff; 0 = none */
	int64_t backoff_ns; /* its length */
	char ip[32];
	struct timer *timer;
	struct rest_call *call;
};

struct pods {
	struct kubelet *k;
	struct informer *inf;
	struct workqueue *q;
	struct hmap states; /* key → struct pod_state * */
	unsigned next_ip;
};

/* ---- bookkeeping ----------------------------------------------------------------- */

static void on_wake(void *arg)
{
	struct pod_state *st = arg;
	workqueue_add(st->p->q, st->key);
}

static struct pod_state *state_new(struct pods *p, const char *key, const char *uid)
{
	struct pod_state *st = calloc(1, sizeof(*st));

	if (!st)
		abort();
	st->p = p;
	st->key = strdup(key);
	st->uid = strdup(uid ? uid : "");
	st->seen_wall = clock_now();
	st->timer = loop_timer(p->k->loop, on_wake, st);
	hmap_put(&p->states, key, st);
	return st;
}

static void state_free(struct pod_state *st)
{
	if (!st)
		return;
	rest_cancel(st->call);
	timer_free(st->timer);
	free(st->key);
	free(st->uid);
	free(st);
}

static void forget(struct pods *p, const char *key)
{
	state_free(hmap_del(&p->states, key));
}

/* Does a pod of this node hold ip — one this kubelet runs, or one the API
 * says has it (a restarted kubelet has not seen them all yet)? */
static bool ip_in_use(struct pods *p, const struct pod_state *self, const char *ip)
{
	size_t it = 0, n;
	const char *key;
	void *v;
	json_t **objs;
	bool used = false;

	while (!used && hmap_next(&p->states, &it, &key, &v))
		used = v != self && !strcmp(((struct pod_state *)v)->ip, ip);
	n = used ? 0 : informer_list(p->inf, &objs);
	for (size_t i = 0; i < n && !used; i++)
		used = !strcmp(jx_str(objs[i], "status.podIP") ?: "", ip);
	if (n)
		free(objs);
	return used;
}

/* A pod IP from this node's own /24 of 10.244.0.0/16, not in use. */
static void assign_ip(struct pods *p, struct pod_state *st, const json_t *pod)
{
	const char *had = jx_str(pod, "status.podIP");
	unsigned char h[32];
	unsigned int n = 0;

	if (had && *had) {
		snprintf(st->ip, sizeof(st->ip), "%s", had);
		return;
	}
	EVP_Digest(p->k->cfg.node_name, strlen(p->k->cfg.node_name), h, &n, EVP_sha256(), NULL);
	for (int tries = 0; tries < 253; tries++) {
		snprintf(st->ip, sizeof(st->ip), "10.244.%u.%u", h[0], 2 + p->next_ip++ % 253);
		if (!ip_in_use(p, st, st->ip))
			return;
	}
}

/* ---- what a container runs ----------------------------------------------------------- */

/* A sleep longer than this runs "forever" (sleep infinity, 1e30). */
#define FOREVER_S (100.0 * 365 * 86400)

/* One statement of a simulated program: time it takes, and its exit code
 * (-1: none, keep going); false when it never ends. */
static bool statement(const char *stmt, int64_t *ns, int *code)
{
	char verb[32] = "", arg[64] = "";

	if (sscanf(stmt, " %31s %63s", verb, arg) < 1)
		return true;
	if (!strcmp(verb, "sleep") && *arg) {
		char unit = arg[strlen(arg) - 1], num[64];
		double mult = unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 1;
		snprintf(num, sizeof(num), "%.*s",
		         (int)strlen(arg) - (strchr("smhd", unit) ? 1 : 0), arg);
		double secs = strtod(num, NULL) * mult;
		if (!isfinite(secs) || secs > FOREVER_S)
			return false;
		*ns += secs > 0 ? (int64_t)(secs * 1e9) : 0;
	} else if (!strcmp(verb, "exit")) {
		*code = *arg ? atoi(arg) : 0;
	} else if (!strcmp(verb, "false")) {
		*code = 1;
	}
	return true;
}

/* A container's program as one script: `sh -c "<script>"`'s script, else
 * its command and args as words; false when it has neither (it runs its
 * image's entrypoint). */
static bool container_script(const json_t *c, char *script, size_t n)
{
	json_t *cmd = json_object_get(c, "command"), *args = json_object_get(c, "args"), *w;
	size_t i, len = 0;

	script[0] = '\0';
	if (!json_array_size(cmd) && !json_array_size(args))
		return false;
	json_t *words = json_array();
	json_array_foreach(cmd, i, w) json_array_append(words, w);
	json_array_foreach(args, i, w) json_array_append(words, w);
	for (i = 0; i + 1 < json_array_size(words); i++)
		if (!strcmp(json_string_value(json_array_get(words, i)) ?: "", "-c")) {
			snprintf(script, n, "%s",
			         json_string_value(json_array_get(words, i + 1)) ?: "");
			break;
		}
	if (!*script)
		json_array_foreach(words, i, w) if (len < n) len += (size_t)snprintf(
		    script + len, n - len, "%s%s", i ? " " : "", json_string_value(w) ?: "");
	json_decref(words);
	return true;
}

/* Statements split on ; && || and newlines. */
#define STATEMENT_SEPS ";&|\n"

/* A container's command + args as the simulation runs them: false when it
 * runs its entrypoint (forever); else its duration and exit code. */
static bool container_program(const json_t *c, int64_t *ns, int *code)
{
	char script[2048];

	*ns = 0;
	*code = 0;
	if (!container_script(c, script, sizeof(script)))
		return false;
	/* Run until an exit. */
	for (char *save = NULL, *stmt = strtok_r(script, STATEMENT_SEPS, &save); stmt;
	     stmt = strtok_r(NULL, STATEMENT_SEPS, &save)) {
		int rc = -1;
		if (!statement(stmt, ns, &rc))
			return false;
		if (rc >= 0) {
			*code = rc;
			if (!strncmp(stmt + strspn(stmt, " "), "exit", 4))
				break;
		}
	}
	return true;
}

/* The pod's program: how long until every container has ended, and the
 * first non-zero exit code. False when any container runs forever, or
 * the restartPolicy is Always. */
static bool pod_program(const json_t *pod, int64_t *ns, int *code)
{
	const char *rp = jx_str(pod, "spec.restartPolicy") ?: "Always";
	json_t *c;
	size_t i;

	*ns = 0;
	*code = 0;
	if (!strcmp(rp, "Always") || !json_array_size(jx_get(pod, "spec.containers")))
		return false;
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
	{
		int64_t d;
		int rc;
		if (!container_program(c, &d, &rc))
			return false;
		if (d > *ns)
			*ns = d;
		if (rc && !*code)
			*code = rc;
	}
	return true;
}

/* ---- what the runtime reports ------------------------------------------------------- */

static void hex_digest(const char *a, const char *b, char out[65])
{
	unsigned char h[32];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	EVP_DigestUpdate(ctx, a, strlen(a));
	EVP_DigestUpdate(ctx, b, strlen(b));
	EVP_DigestFinal_ex(ctx, h, &n);
	EVP_MD_CTX_free(ctx);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* "nginx" → "docker.io/library/nginx:latest", as containerd reports it. */
static void full_image(const char *image, char *out, size_t n)
{
	const char *slash = strchr(image, '/'), *last = strrchr(image, '/');
	bool registry = slash && (memchr(image, '.', (size_t)(slash - image)) ||
	                          memchr(image, ':', (size_t)(slash - image)) ||
	                          !strncmp(image, "localhost/", 10));
	bool tagged = strchr(last ? last : image, ':') || strchr(image, '@');

	snprintf(out, n, "%s%s%s",
	         registry ? ""
	         : slash  ? "docker.io/"
	                  : "docker.io/library/",
	         image, tagged ? "" : ":latest");
}

/* The repository part of a full image reference: without ":tag" or "@digest". */
static size_t repo_len(const char *img)
{
	const char *at = strchr(img, '@'), *colon = strrchr(img, ':'), *slash = strrchr(img, '/');
	if (at)
		return (size_t)(at - img);
	if (colon && (!slash || colon > slash))
		return (size_t)(colon - img);
	return strlen(img);
}

static json_t *terminated_state(const struct pod_state *st, int code, int64_t started,
                                int64_t finished, const char *container_id)
{
	char a[TIME_BUF], b[TIME_BUF];
	return json_pack("{s:{s:i,s:s,s:s,s:s,s:s}}", "terminated", "exitCode", code, "reason",
	                 code ? "Error" : "Completed", "startedAt", time_format_rfc3339(started, a),
	                 "finishedAt", time_format_rfc3339(finished, b), "containerID",
	                 container_id);
}

static bool in_backoff(const struct pod_state *st)
{
	return st->restart_at && clock_mono() < st->restart_at;
}

static json_t *container_status(const struct pod_state *st, const json_t *pod, const json_t *c,
                                bool running)
{
	const char *name = jx_str(c, "name") ?: "", *image = jx_str(c, "image") ?: "";
	char img[512], id[65], digest[65], started[TIME_BUF];
	char image_id[640], container_id[80];
	json_t *state, *last = json_object();

	full_image(image, img, sizeof(img));
	hex_digest(st->uid, name, id);
	hex_digest(img, "", digest);
	snprintf(image_id, sizeof(image_id), "%.*s@sha256:%s", (int)repo_len(img), img, digest);
	snprintf(container_id, sizeof(container_id), "cube://%s", id);
	time_format_rfc3339(st->started_wall, started);
	bool waiting = running && in_backoff(st);
	if (waiting) {
		char msg[768], wait[DURATION_BUF];
		snprintf(
		    msg, sizeof(msg), "back-off %s restarting failed container=%s pod=%s_%s(%s)",
		    duration_format(st->backoff_ns, wait), name, jx_str(pod, "metadata.name") ?: "",
		    jx_str(pod, "metadata.namespace") ?: "", st->uid);
		state = json_pack("{s:{s:s,s:s}}", "waiting", "reason", "CrashLoopBackOff",
		                  "message", msg);
		running = false;
	} else if (running)
		state = json_pack("{s:{s:s}}", "running", "startedAt", started);
	else
		state =
		    terminated_state(st, st->done ? st->exit_code : 0, st->started_wall,
		                     st->done ? st->finished_wall : st->stopped_wall, container_id);
	if (st->restarts) {
		json_decref(last);
		last = terminated_state(st, st->last_exit, st->last_started_wall,
		                        st->last_finished_wall, container_id);
	}
	return json_pack("{s:s,s:o,s:o,s:b,s:i,s:s,s:s,s:s,s:b}", "name", name, "state", state,
	                 "lastState", last, "ready", running, "restartCount", st->restarts, "image",
	                 img, "imageID", image_id, "containerID", container_id, "started", running);
}

static json_t *pod_condition(const json_t *pod, const char *type, bool ok, const char *reason,
                             const char *now)
{
	json_t *c = jx_condition(json_object_get(pod, "status"), type);
	const char *since = now;

	/* The transition time moves only when the status does. */
	if (c && !strcmp(jx_str(c, "status") ?: "", ok ? "True" : "False") &&
	    jx_str(c, "lastTransitionTime"))
		since = jx_str(c, "lastTransitionTime");
	c = json_pack("{s:s,s:s,s:n,s:s}", "type", type, "status", ok ? "True" : "False",
	              "lastProbeTime", "lastTransitionTime", since);
	if (reason)
		json_object_set_new(c, "reason", json_string(reason));
	return c;
}

/* The status the runtime reports: running, or stopped. */
static json_t *runtime_status(struct pods *p, const struct pod_state *st, const json_t *pod,
                              bool running)
{
	const char *done = running                     ? NULL
	                   : st->done && st->exit_code ? "PodFailed"
	                                               : "PodCompleted";
	json_t *containers = json_array(), *c;
	char now[TIME_BUF], start[TIME_BUF];
	size_t i;
	bool ready = running && !in_backoff(st);

	if (running && !ready)
		done = "ContainersNotReady";
	time_format_rfc3339(clock_now(), now);
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
	    json_array_append_new(containers, container_status(st, pod, c, running));
	return json_pack(
	    "{s:s,s:[o,o,o,o,o],s:s,s:[{s:s}],s:s,s:[{s:s}],s:s,s:o}", "phase",
	    running                     ? "Running"
	    : st->done && st->exit_code ? "Failed"
	                                : "Succeeded",
	    "conditions", pod_condition(pod, "PodReadyToStartContainers", running, NULL, now),
	    pod_condition(pod, "Initialized", true, NULL, now),
	    pod_condition(pod, "Ready", ready, done, now),
	    pod_condition(pod, "ContainersReady", ready, done, now),
	    pod_condition(pod, "PodScheduled", true, NULL, now), "hostIP", p->k->cfg.node_ip,
	    "hostIPs", "ip", p->k->cfg.node_ip, "podIP", st->ip, "podIPs", "ip", st->ip,
	    "startTime", time_format_rfc3339(st->seen_wall, start), "containerStatuses",
	    containers);
}

/* Does the API's copy already say what the runtime would? */
static bool reported_running(const struct pod_state *st, const json_t *pod)
{
	const char *phase = jx_str(pod, "status.phase"), *ip = jx_str(pod, "status.podIP");
	const json_t *c = jx_condition(json_object_get(pod, "status"), "Ready");
	bool ready = c && !strcmp(jx_str(c, "status") ?: "", "True");

	return phase && !strcmp(phase, "Running") && ready == !in_backoff(st) && ip &&
	       !strcmp(ip, st->ip) &&
	       json_array_size(jx_get(pod, "status.containerStatuses")) ==
	           json_array_size(jx_get(pod, "spec.containers")) &&
	       jx_int(json_array_get(jx_get(pod, "status.containerStatuses"), 0), "restartCount",
	              0) == st->restarts;
}

/* ---- talking to the API server ------------------------------------------------------- */

static void pod_path(const struct pod_state *st, const char *sub, char *buf, size_t n)
{
	const char *slash = strchr(st->key, '/');
	snprintf(buf, n, "/api/v1/namespaces/%.*s/pods/%s%s", (int)(slash - st->key), st->key,
	         slash + 1, sub);
}

/* An API call for the pod ended: the key is done, retried on failure. */
static void op_done(struct pod_state *st, int status, json_t *body, const char *err,
                    const char *method, const char *what)
{
	struct pods *p = st->p;
	char why[512], path[600], q[600];

	st->call = NULL;
	if (status >= 200 && status < 300) {
		workqueue_forget(p->q, st->key);
	} else {
		pod_path(st, strcmp(method, "PATCH") ? "" : "/status", path, sizeof(path));
		kubelet_http_error(method, p->k->server, path, status, body, err, why, sizeof(why));
		LOG_ERROR("\"%s\" pod=\"%s\" err=\"%s\"", what, st->key,
		          log_quote(q, sizeof(q), why));
		workqueue_retry(p->q, st->key);
	}
	workqueue_done(p->q, st->key);
}

static void on_status_patched(void *arg, int status, json_t *body, const char *err)
{
	struct pod_state *st = arg;
	if (status == 200)
		LOG_V(3, "\"Status for pod updated successfully\" pod=\"%s\" phase=\"%s\"", st->key,
		      jx_str(body, "status.phase") ?: "");
	op_done(st, status, body, err, "PATCH", "Failed to update status for pod");
}

static void patch_status(struct pod_state *st, json_t *status, rest_cb cb)
{
	json_t *patch = json_pack("{s:{s:s},s:o}", "metadata", "uid", st->uid, "status", status);
	char path[600];

	pod_path(st, "/status", path, sizeof(path));
	st->call = rest_do_ct(st->p->k->client, "PATCH", path,
	                      "application/strategic-merge-patch+json", patch, cb, st);
	json_decref(patch);
}

static void on_deleted(void *arg, int status, json_t *body, const char *err)
{
	struct pod_state *st = arg;

	/* 404: already gone; 409: the UID precondition failed, a new pod
	 * took the name. Either way this pod is done with. */
	if (status == 200 || status == 404 || status == 409) {
		if (status == 200)
			LOG_INFO("\"Pod fully terminated and removed from etcd\" pod=\"%s\"",
			         st->key);
		status = 200;
	}
	op_done(st, status, body, err, "DELETE", "Failed to delete pod");
}

/* The containers have stopped: say so, then confirm the deletion. */
static void on_terminated_reported(void *arg, int status, json_t *body, const char *err)
{
	struct pod_state *st = arg;
	json_t *opts;
	char path[640];

	if (status == 404) {
		op_done(st, 200, body, err, "PATCH", "");
		return;
	}
	if (status != 200) {
		op_done(st, status, body, err, "PATCH", "Failed to update status for pod");
		return;
	}
	st->terminated = true;
	opts = json_pack("{s:s,s:s,s:i,s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
	                 "gracePeriodSeconds", 0, "preconditions", "uid", st->uid);
	pod_path(st, "?gracePeriodSeconds=0", path, sizeof(path));
	st->call = rest_do(st->p->k->client, "DELETE", path, opts, on_deleted, st);
	json_decref(opts);
}

/* ---- the work ------------------------------------------------------------------------ */

/* 1 when waiting for the timer, 0 when it is time to act. */
static int wait_until(struct pod_state *st, int64_t at)
{
	if (clock_mono() >= at)
		return 0;
	timer_at(st->timer, at);
	return 1;
}

static void sync_deleting(struct pods *p, struct pod_state *st, const json_t *pod)
{
	int64_t grace = jx_int(pod, "metadata.deletionGracePeriodSeconds", 30) * NS_PER_SEC;

	if (!st->stop_at) {
		LOG_INFO("\"SyncLoop DELETE\" source=\"api\" pods=[\"%s\"]", st->key);
		st->stop_at =
		    clock_mono() +
		    (grace < p->k->cfg.pod_stop_delay_ns ? grace : p->k->cfg.pod_stop_delay_ns);
	}
	if (wait_until(st, st->stop_at)) {
		workqueue_done(p->q, st->key);
		return;
	}
	if (!st->stopped_wall)
		st->stopped_wall = clock_now();
	if (!st->started_wall)
		st->started_wall = st->stopped_wall;
	if (!st->ip[0])
		assign_ip(p, st, pod);
	if (st->terminated) {
		on_terminated_reported(st, 200, NULL, NULL);
		return;
	}
	patch_status(st, runtime_status(p, st, pod, false), on_terminated_reported);
}

/* The program ended: the pod is done (Never, or success), or OnFailure
 * restarts the container in place after a back-off of 10 s doubling to
 * 5 min, as the kubelet's CrashLoopBackOff. */
static void program_ended(struct pods *p, struct pod_state *st, const json_t *pod)
{
	const char *rp = jx_str(pod, "spec.restartPolicy") ?: "Always";

	if (st->exit_code && !strcmp(rp, "OnFailure")) {
		/* The kubelet restarts at once the first time, then backs off. */
		int64_t backoff = st->restarts
		                      ? 10 * NS_PER_SEC << (st->restarts < 6 ? st->restarts - 1 : 5)
		                      : 0,
		        d;
		if (backoff > 300 * NS_PER_SEC)
			backoff = 300 * NS_PER_SEC;
		st->last_exit = st->exit_code;
		st->last_started_wall = st->started_wall;
		st->last_finished_wall = clock_now();
		st->restarts++;
		st->started_wall = clock_now() + backoff;
		st->backoff_ns = backoff;
		st->restart_at = clock_mono() + backoff;
		pod_program(pod, &d, &st->exit_code);
		st->finish_at = st->restart_at + d;
		LOG_INFO("\"Container exited, restarting\" pod=\"%s\" exitCode=%d restartCount=%d",
		         st->key, st->last_exit, st->restarts);
		patch_status(st, runtime_status(p, st, pod, true), on_status_patched);
		return;
	}
	st->done = true;
	st->finished_wall = clock_now();
	LOG_V(2, "\"Pod completed\" pod=\"%s\" exitCode=%d", st->key, st->exit_code);
	patch_status(st, runtime_status(p, st, pod, false), on_status_patched);
}

static void sync_running(struct pods *p, struct pod_state *st, const json_t *pod)
{
	const char *phase = jx_str(pod, "status.phase");

	if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) {
		workqueue_done(p->q, st->key);
		return;
	}
	if (!st->start_at) {
		assign_ip(p, st, pod);
		st->start_at = clock_mono() + p->k->cfg.pod_start_delay_ns;
		/* A pod a previous run already started keeps running. */
		if (reported_running(st, pod))
			st->start_at = clock_mono();
	}
	if (wait_until(st, st->start_at)) {
		workqueue_done(p->q, st->key);
		return;
	}
	if (!st->started_wall) {
		int64_t t;
		const char *was = jx_str(json_array_get(jx_get(pod, "status.containerStatuses"), 0),
		                         "state.running.startedAt");
		st->started_wall = was && time_parse_rfc3339(was, &t) == 0 ? t : clock_now();
	}
	if (!st->planned) {
		int64_t d;
		st->planned = true;
		if (pod_program(pod, &d, &st->exit_code))
			st->finish_at = clock_mono() + d;
	}
	if (st->finish_at && clock_mono() >= st->finish_at) {
		program_ended(p, st, pod);
		return;
	}
	if (reported_running(st, pod)) {
		/* The timer wakes the key when the back-off or the program ends. */
		if (in_backoff(st))
			wait_until(st, st->restart_at);
		else if (st->finish_at)
			wait_until(st, st->finish_at);
		workqueue_done(p->q, st->key);
		return;
	}
	patch_status(st, runtime_status(p, st, pod, true), on_status_patched);
}

static void process(void *arg, const char *key)
{
	struct pods *p = arg;
	json_t *pod = informer_get(p->inf, key);
	struct pod_state *st = hmap_get(&p->states, key);
	const char *uid = jx_str(pod, "metadata.uid");

	if (!pod || p->k->exited) {
		if (!pod)
			forget(p, key);
		workqueue_done(p->q, key);
		return;
	}
	if (st && uid && strcmp(st->uid, uid)) {
		forget(p, key); /* a new pod under an old name */
		st = NULL;
	}
	if (!st) {
		LOG_INFO("\"SyncLoop ADD\" source=\"api\" pods=[\"%s\"]", key);
		st = state_new(p, key, uid);
	}
	if (jx_get(pod, "metadata.deletionTimestamp"))
		sync_deleting(p, st, pod);
	else
		sync_running(p, st, pod);
}

static void on_add(void *arg, json_t *obj)
{
	struct pods *p = arg;
	char key[512];
	workqueue_add(p->q, informer_key(obj, key, sizeof(key)));
}

static void on_update(void *arg, json_t *old, json_t *obj)
{
	on_add(arg, obj);
}

static void on_delete(void *arg, json_t *obj)
{
	on_add(arg, obj); /* process() finds it gone and forgets it */
}

struct pods *pods_new(struct kubelet *k)
{
	struct pods *p = calloc(1, sizeof(*p));
	struct informer_handlers h = {on_add, on_update, on_delete, p};
	char query[512];

	if (!p)
		abort();
	p->k = k;
	p->states = (struct hmap)HMAP_INIT;
	snprintf(query, sizeof(query), "fieldSelector=spec.nodeName%%3D%s", k->cfg.node_name);
	p->inf = informer_new(k->loop, k->client, "/api/v1/pods", query, &h);
	p->q = workqueue_new(k->loop, 4, process, p);
	return p;
}

/* ---- logs ------------------------------------------------------------------------------ */

/* What `echo WORDS` prints: its words, quotes taken off. */
static void echo_line(const char *stmt, struct sbuf *out)
{
	const char *p = stmt + strspn(stmt, " ") + 4;
	size_t n;

	p += strspn(p, " ");
	n = strlen(p);
	while (n && p[n - 1] == ' ')
		n--;
	for (size_t i = 0; i < n; i++)
		if (p[i] != '"' && p[i] != '\'')
			sbuf_addc(out, p[i]);
	sbuf_addc(out, '\n');
}

/* The lines the container's program has printed by now: each echo at the
 * moment the script reaches it, from start_wall. */
static void program_output(const json_t *c, int64_t start_wall, int64_t now, bool timestamps,
                           struct strv *lines)
{
	char script[2048];
	int64_t t = 0;

	if (!container_script(c, script, sizeof(script)))
		return;
	for (char *save = NULL, *stmt = strtok_r(script, STATEMENT_SEPS, &save); stmt;
	     stmt = strtok_r(NULL, STATEMENT_SEPS, &save)) {
		const char *w = stmt + strspn(stmt, " ");
		int rc = -1;
		if (!strncmp(w, "echo", 4) && (w[4] == ' ' || !w[4])) {
			struct sbuf b = SBUF_INIT;
			char ts[TIME_BUF + 8];
			if (start_wall + t > now)
				return;
			if (timestamps) {
				/* RFC 3339 with nanoseconds, as the CRI log format. */
				time_format_rfc3339_micro(start_wall + t, ts);
				snprintf(ts + strlen(ts) - 1, 12, "%03dZ ",
				         (int)((start_wall + t) % 1000));
				sbuf_add(&b, ts);
			}
			echo_line(w, &b);
			strv_push(lines, b.s ? b.s : "\n");
			sbuf_free(&b);
		}
		if (!statement(stmt, &t, &rc) || start_wall + t > now)
			return;
		if (rc >= 0 && !strncmp(w, "exit", 4))
			return;
	}
}

int pods_container_log(struct pods *p, const char *ns, const char *name, const char *container,
                       bool timestamps, long tail, char **out)
{
	char key[512];
	const struct pod_state *st;
	const json_t *pod, *c, *found = NULL;
	struct strv lines = STRV_INIT;
	struct sbuf b = SBUF_INIT;
	size_t i;

	snprintf(key, sizeof(key), "%s/%s", ns, name);
	pod = p ? informer_get(p->inf, key) : NULL;
	st = p ? hmap_get(&p->states, key) : NULL;
	/* The kubelet server's texts (getContainerLogs, validateContainerLogStatus). */
	if (!pod)
		return err_set(ERR_NOTFOUND, "pod \"%s\" does not exist", name);
	json_array_foreach(jx_get(pod, "spec.containers"), i, c)
	{
		if (!strcmp(jx_str(c, "name") ?: "", container))
			found = c;
	}
	if (!found)
		return err_set(ERR_NOTFOUND, "container \"%s\" not found in pod \"%s\"", container,
		               name);
	if (!st || !st->started_wall)
		return err_set(ERR_INVALID, "container \"%s\" in pod \"%s\" is not available",
		               container, name);
	program_output(found, st->started_wall, clock_now(), timestamps, &lines);
	for (i = tail >= 0 && (size_t)tail < lines.n ? lines.n - (size_t)tail : 0; i < lines.n; i++)
		sbuf_add(&b, lines.v[i]);
	strv_free(&lines);
	*out = b.s ? sbuf_take(&b) : str_dup("");
	return 0;
}

void pods_start(struct pods *p)
{
	informer_start(p->inf);
}

json_t *pods_list(struct pods *p)
{
	json_t **objs, *items = json_array();
	size_t n = informer_list(p->inf, &objs);

	for (size_t i = 0; i < n; i++)
		json_array_append(items, objs[i]);
	free(objs);
	return json_pack("{s:s,s:s,s:{},s:o}", "kind", "PodList", "apiVersion", "v1", "metadata",
	                 "items", items);
}

void pods_free(struct pods *p)
{
	const char *k;
	void *v;

	if (!p)
		return;
	informer_free(p->inf);
	for (size_t it = 0; hmap_next(&p->states, &it, &k, &v);)
		state_free(v);
	hmap_free(&p->states);
	workqueue_free(p->q);
	free(p);
}
