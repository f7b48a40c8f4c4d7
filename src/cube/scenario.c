#include "cube/scenario_int.h"

#include "client/informer.h"
#include "client/rest.h"
#include "pki/kubeconfig.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Compressed: Leases renewed every 500 ms, a 5 s grace period checked
 * every 500 ms, 8 s tolerations — the seeds' sequence in seconds. */
const struct scen_timings scen_compressed = {
    .name = "compressed",
    .monitor_period_ns = 500 * NS_PER_MS,
    .grace_ns = 5 * NS_PER_SEC,
    .lease_duration_s = 2,
    .status_update_ns = NS_PER_SEC,
    .toleration_s = 8,
};

/* Upstream 1.32's defaults. */
const struct scen_timings scen_upstream = {
    .name = "upstream",
    .monitor_period_ns = 5 * NS_PER_SEC,
    .grace_ns = 50 * NS_PER_SEC,
    .lease_duration_s = 40,
    .status_update_ns = 10 * NS_PER_SEC,
    .toleration_s = 300,
};

const struct scen_taint scen_taints[TAINT_KINDS] = {
    {"node.kubernetes.io/unreachable", "NoSchedule"},
    {"node.kubernetes.io/unreachable", "NoExecute"},
    {"node.kubernetes.io/not-ready", "NoSchedule"},
    {"node.kubernetes.io/not-ready", "NoExecute"},
    {"node.kubernetes.io/unschedulable", "NoSchedule"},
};

struct scen {
	struct scen_opts o;
	struct scen_record r;
	char self[PATH_MAX], bindir[PATH_MAX];
	pid_t child;
	struct loop *loop;
	struct rest_client *api;
	struct informer *nodes, *pods, *csrs, *events, *leases;
	int pods_by_node;
	int64_t t0;
	/* scen_wait */
	scen_cond cond;
	void *cond_arg;
	bool held, timed_out;
	int64_t deadline;
	struct timer *tick;
};

static char *vfmt(const char *fmt, va_list ap)
{
	char *out;
	if (vasprintf(&out, fmt, ap) < 0)
		abort();
	return out;
}

double scen_now(const struct scen *s)
{
	return (double)(clock_mono() - s->t0) / 1e9;
}

const struct scen_timings *scen_timings(const struct scen *s)
{
	return s->o.timings;
}

int scen_nodes(const struct scen *s)
{
	return s->o.nodes;
}

const char *scen_dir(const struct scen *s)
{
	return s->r.dir;
}

/* ---- the timeline --------------------------------------------------------------- */

static void ventry(struct scen *s, enum entry_kind kind, const char *who, const char *fmt,
                   va_list ap)
{
	struct entry *e = VEC_PUSH(s->r.entries);

	e->t = scen_now(s);
	e->kind = kind;
	e->who = strdup(who);
	e->text = vfmt(fmt, ap);
	if (kind == E_SAY)
		printf("\n%s\n", e->text);
	else if (!s->o.quiet || kind == E_ACTION)
		printf("  t+%6.1fs  %-12s %s\n", e->t, who, e->text);
	fflush(stdout);
}

static void entry(struct scen *s, enum entry_kind kind, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void entry(struct scen *s, enum entry_kind kind, const char *who, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ventry(s, kind, who, fmt, ap);
	va_end(ap);
}

void scen_say(struct scen *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ventry(s, E_SAY, "", fmt, ap);
	va_end(ap);
}

void scen_mark(struct scen *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ventry(s, E_ACTION, "action", fmt, ap);
	va_end(ap);
}

static struct lane *lane_for(struct scen *s, const char *node)
{
	struct lane *l;

	for (size_t i = 0; i < s->r.lanes.n; i++)
		if (!strcmp(s->r.lanes.v[i].node, node))
			return &s->r.lanes.v[i];
	l = VEC_PUSH(s->r.lanes);
	l->node = strdup(node);
	l->last_renew = -1;
	return l;
}

static struct sample *last_sample(struct lane *l)
{
	return l->n ? &l->v[l->n - 1] : NULL;
}

/* A new sample when anything differs from the last one. */
static void sample(struct scen *s, struct lane *l, const char *ready, unsigned taints, int pods)
{
	struct sample *last = last_sample(l), *n;

	if (last && !strcmp(last->ready, ready) && last->taints == taints && last->pods == pods)
		return;
	n = VEC_PUSH(*l);
	n->t = scen_now(s);
	snprintf(n->ready, sizeof(n->ready), "%s", ready);
	n->taints = taints;
	n->pods = pods;
}

/* ---- what the observer sees ----------------------------------------------------------- */

const char *scen_ready(const json_t *node)
{
	const json_t *c = jx_condition(json_object_get(node, "status"), "Ready");
	return c ? jx_str(c, "status") : NULL;
}

bool scen_has_taint(const json_t *node, const char *key, const char *effect)
{
	json_t *t;
	size_t i;

	json_array_foreach(jx_get(node, "spec.taints"), i,
	                   t) if (!strcmp(jx_str(t, "key") ?: "", key) &&
	                          !strcmp(jx_str(t, "effect") ?: "", effect)) return true;
	return false;
}

static unsigned taint_bits(const json_t *node)
{
	unsigned bits = 0;
	for (int i = 0; i < TAINT_KINDS; i++)
		if (scen_has_taint(node, scen_taints[i].key, scen_taints[i].effect))
			bits |= 1u << i;
	return bits;
}

static const char *pod_node(const json_t *pod)
{
	return jx_str(pod, "spec.nodeName");
}

static bool pod_active(const json_t *pod)
{
	const char *phase = jx_str(pod, "status.phase") ?: "";
	return !jx_get(pod, "metadata.deletionTimestamp") && strcmp(phase, "Succeeded") &&
	       strcmp(phase, "Failed");
}

static int active_pods_on(struct scen *s, const char *node)
{
	json_t **v;
	size_t n = informer_indexed(s->pods, s->pods_by_node, node, &v);
	int active = 0;

	for (size_t i = 0; i < n; i++)
		active += pod_active(v[i]);
	free(v);
	return active;
}

static void check_cond(struct scen *s)
{
	if (s->cond && !s->held && s->cond(s, s->cond_arg)) {
		s->held = true;
		loop_stop(s->loop);
	}
}

static void node_seen(struct scen *s, const json_t *node)
{
	const char *name = jx_str(node, "metadata.name") ?: "?";
	struct lane *l = lane_for(s, name);
	struct sample *last = last_sample(l);
	const char *ready = scen_ready(node) ?: "-";
	unsigned bits = taint_bits(node), was = last ? last->taints : 0;

	if (!last || strcmp(last->ready, ready)) {
		const json_t *c = jx_condition(json_object_get(node, "status"), "Ready");
		entry(s, E_NODE, name, "Ready=%s%s%s", ready, c && jx_str(c, "reason") ? " " : "",
		      c && jx_str(c, "reason") ? jx_str(c, "reason") : "");
	}
	for (int i = 0; i < TAINT_KINDS; i++)
		if ((bits ^ was) & (1u << i))
			entry(s, E_TAINT, name, "taint %s:%s %s", scen_taints[i].key,
			      scen_taints[i].effect, bits & (1u << i) ? "added" : "removed");
	sample(s, l, ready, bits, last ? last->pods : 0);
}

static void on_node_add(void *arg, json_t *obj)
{
	node_seen(arg, obj);
	check_cond(arg);
}

static void on_node_update(void *arg, json_t *old, json_t *obj)
{
	on_node_add(arg, obj);
}

static void on_node_delete(void *arg, json_t *obj)
{
	entry(arg, E_NODE, jx_str(obj, "metadata.name") ?: "?", "deleted");
	check_cond(arg);
}

static void recount(struct scen *s, const char *node)
{
	struct lane *l;
	struct sample *last;

	if (!node || !*node)
		return;
	l = lane_for(s, node);
	last = last_sample(l);
	sample(s, l, last ? last->ready : "-", last ? last->taints : 0, active_pods_on(s, node));
}

static void pod_changed(struct scen *s, const json_t *old, const json_t *pod, bool deleted)
{
	const char *name = jx_str(pod, "metadata.name") ?: "?", *node = pod_node(pod);
	const char *was_node = old ? pod_node(old) : NULL;
	const char *phase = jx_str(pod, "status.phase"),
	           *was_phase = old ? jx_str(old, "status.phase") : NULL;

	if (deleted)
		entry(s, E_POD, name, "deleted%s%s", node ? " from " : "", node ?: "");
	else if (!old)
		entry(s, E_POD, name, "created%s%s", node ? " on " : "", node ?: "");
	else {
		if (node && !was_node)
			entry(s, E_POD, name, "bound to %s", node);
		if (phase && (!was_phase || strcmp(phase, was_phase)))
			entry(s, E_POD, name, "%s%s%s", phase, node ? " on " : "", node ?: "");
		if (jx_get(pod, "metadata.deletionTimestamp") &&
		    !jx_get(old, "metadata.deletionTimestamp"))
			entry(s, E_POD, name, "Terminating%s%s", node ? " on " : "", node ?: "");
	}
	recount(s, node);
	if (was_node && (!node || strcmp(was_node, node)))
		recount(s, was_node);
	check_cond(s);
}

static void on_pod_add(void *arg, json_t *obj)
{
	pod_changed(arg, NULL, obj, false);
}

static void on_pod_update(void *arg, json_t *old, json_t *obj)
{
	pod_changed(arg, old, obj, false);
}

static void on_pod_delete(void *arg, json_t *obj)
{
	pod_changed(arg, NULL, obj, true);
}

static bool has_condition(const json_t *csr, const char *type)
{
	return jx_condition_in(jx_get(csr, "status.conditions"), type) != NULL;
}

static void csr_changed(struct scen *s, const json_t *old, const json_t *csr)
{
	static const char *const types[] = {"Approved", "Denied", "Failed"};
	const char *name = jx_str(csr, "metadata.name") ?: "?";

	if (!old)
		entry(s, E_CSR, name, "created by %s (%s)%s", jx_str(csr, "spec.username") ?: "?",
		      jx_str(csr, "spec.signerName") ?: "?",
		      jx_str(csr, "status.certificate") ? ", issued" : "");
	for (size_t i = 0; old && i < sizeof(types) / sizeof(types[0]); i++)
		if (has_condition(csr, types[i]) && !has_condition(old, types[i])) {
			const json_t *c =
			    jx_condition_in(jx_get(csr, "status.conditions"), types[i]);
			entry(s, E_CSR, name, "%s (%s)", types[i], jx_str(c, "reason") ?: "");
		}
	if (old && jx_str(csr, "status.certificate") && !jx_str(old, "status.certificate"))
		entry(s, E_CSR, name, "Issued");
	check_cond(s);
}

static void on_csr_add(void *arg, json_t *obj)
{
	csr_changed(arg, NULL, obj);
}

static void on_csr_update(void *arg, json_t *old, json_t *obj)
{
	csr_changed(arg, old, obj);
}

/* The events a person reads the story from: warnings, and the node
 * lifecycle's and taint eviction's own. */
static bool event_worth_showing(const json_t *ev)
{
	static const char *const reasons[] = {
	    "TaintManagerEviction", "NodeNotReady", "RegisteredNode", "NodeReady", "Killing", NULL};
	const char *reason = jx_str(ev, "reason") ?: "";

	if (!strcmp(jx_str(ev, "type") ?: "", "Warning"))
		return true;
	for (size_t i = 0; reasons[i]; i++)
		if (!strcmp(reasons[i], reason))
			return true;
	return false;
}

static void on_event_add(void *arg, json_t *ev)
{
	struct scen *s = arg;
	char who[300];

	if (event_worth_showing(ev)) {
		snprintf(who, sizeof(who), "%s", jx_str(ev, "involvedObject.name") ?: "?");
		entry(s, E_EVENT, who, "%s %s: %s", jx_str(ev, "type") ?: "",
		      jx_str(ev, "reason") ?: "", jx_str(ev, "message") ?: "");
	}
	check_cond(s);
}

static void on_lease(void *arg, json_t *old, json_t *obj)
{
	struct scen *s = arg;
	struct lane *l;
	const char *renew = jx_str(obj, "spec.renewTime");

	if (strcmp(jx_str(obj, "metadata.namespace") ?: "", "kube-node-lease") || !renew)
		return;
	l = lane_for(s, jx_str(obj, "metadata.name") ?: "?");
	if (!l->renew_time || strcmp(l->renew_time, renew)) {
		free(l->renew_time);
		l->renew_time = strdup(renew);
		l->last_renew = scen_now(s);
	}
	check_cond(s);
}

static void on_lease_add(void *arg, json_t *obj)
{
	on_lease(arg, NULL, obj);
}

json_t *scen_node(const struct scen *s, const char *name)
{
	return informer_get(s->nodes, name);
}

json_t *scen_pod(const struct scen *s, const char *ns_name)
{
	return informer_get(s->pods, ns_name);
}

size_t scen_pods(const struct scen *s, json_t ***out)
{
	return informer_list(s->pods, out);
}

size_t scen_csrs(const struct scen *s, json_t ***out)
{
	return informer_list(s->csrs, out);
}

size_t scen_events(const struct scen *s, json_t ***out)
{
	return informer_list(s->events, out);
}

double scen_last_renew(const struct scen *s, const char *node)
{
	for (size_t i = 0; i < s->r.lanes.n; i++)
		if (!strcmp(s->r.lanes.v[i].node, node))
			return s->r.lanes.v[i].last_renew;
	return -1;
}

static struct informer *watch(struct scen *s, const char *path, void (*add)(void *, json_t *),
                              void (*update)(void *, json_t *, json_t *),
                              void (*del)(void *, json_t *))
{
	struct informer_handlers h = {
	    .on_add = add, .on_update = update, .on_delete = del, .arg = s};
	return informer_new(s->loop, s->api, path, NULL, &h);
}

static void observe(struct scen *s)
{
	s->nodes = watch(s, "/api/v1/nodes", on_node_add, on_node_update, on_node_delete);
	s->pods = watch(s, "/api/v1/pods", on_pod_add, on_pod_update, on_pod_delete);
	s->pods_by_node = informer_add_index(s->pods, pod_node);
	s->csrs = watch(s, "/apis/certificates.k8s.io/v1/certificatesigningrequests", on_csr_add,
	                on_csr_update, NULL);
	s->events = watch(s, "/api/v1/events", on_event_add, NULL, NULL);
	s->leases = watch(s, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
	                  on_lease_add, on_lease, NULL);
	informer_start(s->nodes);
	informer_start(s->pods);
	informer_start(s->csrs);
	informer_start(s->events);
	informer_start(s->leases);
}

/* ---- waiting ----------------------------------------------------------------------------- */

static void on_tick(void *arg)
{
	struct scen *s = arg;

	check_cond(s);
	if (s->held)
		return;
	if (clock_mono() >= s->deadline) {
		s->timed_out = true;
		loop_stop(s->loop);
		return;
	}
	timer_after(s->tick, 100 * NS_PER_MS);
}

double scen_wait(struct scen *s, const char *what, scen_cond cond, void *arg, double timeout_s)
{
	s->cond = cond;
	s->cond_arg = arg;
	s->held = s->timed_out = false;
	s->deadline = clock_mono() + (int64_t)(timeout_s * 1e9);
	if (!cond(s, arg)) {
		timer_after(s->tick, 0);
		while (!s->held && !s->timed_out)
			loop_run(s->loop);
		timer_cancel(s->tick);
	} else {
		s->held = true;
	}
	s->cond = NULL;
	if (!s->held) {
		scen_expect(s, what, false, "timed out after %.0fs", timeout_s);
		return -1;
	}
	return scen_now(s);
}

/* ---- expectations -------------------------------------------------------------------------- */

static bool expect(struct scen *s, const char *what, bool ok, char *detail)
{
	struct expect *e = VEC_PUSH(s->r.expects);

	e->ok = ok;
	e->what = strdup(what);
	e->detail = detail;
	printf("  %s  %s: %s\n", ok ? "PASS" : "FAIL", what, detail);
	fflush(stdout);
	return ok;
}

bool scen_expect_time(struct scen *s, const char *what, double measured_s, double expected_s,
                      double tol_s)
{
	char *d;
	bool ok =
	    measured_s >= 0 && measured_s >= expected_s - tol_s && measured_s <= expected_s + tol_s;

	if (asprintf(&d, "measured %.1fs, expected %.1fs ± %.1fs", measured_s, expected_s, tol_s) <
	    0)
		abort();
	return expect(s, what, ok, d);
}

bool scen_expect(struct scen *s, const char *what, bool held, const char *fmt, ...)
{
	va_list ap;
	char *d;

	va_start(ap, fmt);
	d = vfmt(fmt, ap);
	va_end(ap);
	return expect(s, what, held, d);
}

/* ---- commands ---------------------------------------------------------------------------- */

struct pipe_read {
	struct scen *s;
	struct event *ev;
	char *buf;
	size_t len;
	bool eof;
};

static void on_pipe(evutil_socket_t fd, short what, void *arg)
{
	struct pipe_read *p = arg;
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n > 0) {
		if (!(p->buf = realloc(p->buf, p->len + (size_t)n + 1)))
			abort();
		memcpy(p->buf + p->len, chunk, (size_t)n);
		p->len += (size_t)n;
		p->buf[p->len] = '\0';
		return;
	}
	if (n < 0 && errno == EINTR)
		return;
	p->eof = true;
	loop_stop(p->s->loop);
}

static void child_env(struct scen *s)
{
	char path[PATH_MAX * 2], *v;

	snprintf(path, sizeof(path), "%s:%s", s->bindir, getenv("PATH") ?: "/usr/bin:/bin");
	setenv("PATH", path, 1);
	v = file_join(s->r.dir, "admin.conf");
	setenv("KUBECONFIG", v, 1);
	free(v);
	v = file_join(s->r.dir, "home");
	file_mkdirs(v, 0700);
	setenv("HOME", v, 1);
	free(v);
	setenv("CUBE_DATA", s->r.dir, 1);
}

int scen_sh(struct scen *s, bool diagnose, const char *cmd, char **out)
{
	int fds[2], status = -1;
	struct pipe_read p = {.s = s};
	struct diag *d;
	double t = scen_now(s);
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, STDIN_FILENO);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		child_env(s);
		execl("/usr/bin/timeout", "timeout", "60", "/bin/sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	p.ev = event_new(loop_base(s->loop), fds[0], EV_READ | EV_PERSIST, on_pipe, &p);
	event_add(p.ev, NULL);
	while (!p.eof)
		loop_run(s->loop);
	event_free(p.ev);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (diagnose || status != 0) {
		d = VEC_PUSH(s->r.diags);
		d->t = t;
		d->action = !diagnose;
		d->rc = status;
		d->cmd = strdup(cmd);
		d->out = strdup(p.buf ?: "");
		if (diagnose) {
			printf("\n  $ %s\n", cmd);
			for (char *line = p.buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
				nl = strchr(line, '\n');
				printf("    %.*s\n", (int)(nl ? nl - line : (long)strlen(line)),
				       line);
			}
			printf("\n");
			fflush(stdout);
		}
	}
	if (out)
		*out = p.buf ? p.buf : strdup("");
	else
		free(p.buf);
	return status;
}

int scen_fault(struct scen *s, const char *args)
{
	char cmd[1024];
	int rc;

	snprintf(cmd, sizeof(cmd), "cube fault --data-dir \"$CUBE_DATA\" %s", args);
	scen_mark(s, "cube fault %s", args);
	rc = scen_sh(s, false, cmd, NULL);
	if (rc != 0)
		scen_expect(s, "cube fault succeeds", false, "cube fault %s: exit %d", args, rc);
	return rc;
}

int scen_create(struct scen *s, const char *path, const json_t *obj)
{
	char *err = NULL;
	json_t *r = NULL;
	int status = rest_do_sync(s->api, "POST", path, obj, &r, &err);
	int rc = 0;

	if (status != 201)
		rc = err_set(ERR_INVALID, "POST %s: %d %s", path, status,
		             err ? err : (jx_str(r, "message") ?: ""));
	free(err);
	json_decref(r);
	return rc;
}

/* ---- the cluster ---------------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* A fresh data dir: made, or a previous scenario's emptied; anything else
 * there is refused, never deleted. */
static int fresh_dir(const char *dir)
{
	char *marker = file_join(dir, ".cube-scenario");
	int rc = 0;
	struct stat st;

	if (stat(dir, &st) == 0) {
		if (!file_exists(marker)) {
			rc = err_set(ERR_EXISTS,
			             "%s exists and is not a previous scenario's data dir; "
			             "choose another --data-dir",
			             dir);
			goto out;
		}
		if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0) {
			rc = err_set(ERR_IO, "remove %s: %s", dir, strerror(errno));
			goto out;
		}
	}
	if ((rc = file_mkdirs(dir, 0700)) == 0)
		rc = file_write_atomic(marker, "", 0, 0600);
out:
	free(marker);
	return rc;
}

static int spawn_cluster(struct scen *s)
{
	const struct scen_timings *t = s->o.timings;
	char nodes[16], period[DURATION_BUF], grace[DURATION_BUF], status[DURATION_BUF];
	char lease[16], tol[16], *console = file_join(s->r.dir, "console.log");
	int fd = open(console, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);

	free(console);
	if (fd < 0)
		return err_set(ERR_IO, "console.log: %s", strerror(errno));
	snprintf(nodes, sizeof(nodes), "%d", s->o.nodes);
	duration_format(t->monitor_period_ns, period);
	duration_format(t->grace_ns, grace);
	duration_format(t->status_update_ns, status);
	snprintf(lease, sizeof(lease), "%d", t->lease_duration_s);
	snprintf(tol, sizeof(tol), "%d", t->toleration_s);
	fflush(stdout);
	if ((s->child = fork()) == 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execl(s->self, "cube", "up", "--nodes", nodes, "--data-dir", s->r.dir, "--port",
		      "0", "--cert-ttl", "10m", "--node-monitor-period", period,
		      "--node-monitor-grace-period", grace, "--node-lease-duration-seconds", lease,
		      "--node-status-update-frequency", status,
		      "--default-not-ready-toleration-seconds", tol,
		      "--default-unreachable-toleration-seconds", tol, (char *)NULL);
		_exit(127);
	}
	close(fd);
	return s->child < 0 ? err_set(ERR_IO, "fork: %s", strerror(errno)) : 0;
}

/* The port `cube up` printed, once it has (at most 60 s). */
static int cluster_port(struct scen *s)
{
	char *console = file_join(s->r.dir, "console.log"), *text = NULL;
	int64_t deadline = clock_mono() + 60 * NS_PER_SEC;
	int port = 0;

	while (!port && clock_mono() < deadline) {
		const char *at;
		int st;
		if (file_read(console, &text, NULL, 1 << 20) == 0 &&
		    (at = strstr(text, "API server on https://127.0.0.1:")))
			port = atoi(at + strlen("API server on https://127.0.0.1:"));
		free(text);
		text = NULL;
		if (!port && waitpid(s->child, &st, WNOHANG) == s->child) {
			s->child = 0;
			break;
		}
		if (!port)
			usleep(50 * 1000);
	}
	free(console);
	return port ? port
	            : err_set(ERR_UNAVAILABLE, "the cluster did not start (see %s/console.log)",
	                      s->r.dir);
}

static int connect_api(struct scen *s, int port)
{
	char *admin = file_join(s->r.dir, "admin.conf"), server[64];

	snprintf(server, sizeof(server), "https://127.0.0.1:%d", port);
	s->api = rest_client_for_component(s->loop, admin, NULL, server, "cube-scenario");
	free(admin);
	return s->api ? 0 : -1;
}

static void self_path(struct scen *s)
{
	ssize_t n = readlink("/proc/self/exe", s->self, sizeof(s->self) - 1);
	s->self[n > 0 ? n : 0] = '\0';
	file_dirname(s->self, s->bindir, sizeof(s->bindir));
}

static void teardown(struct scen *s);
static void record_free(struct scen_record *r);

struct scen *scen_start(const struct scen_opts *o)
{
	struct scen *s = calloc(1, sizeof(*s));
	char abs[PATH_MAX];
	int port;

	if (!s)
		abort();
	s->o = *o;
	s->r.name = o->name;
	s->r.title = o->title;
	s->r.timings = o->timings;
	s->r.nodes = o->nodes;
	self_path(s);
	if (fresh_dir(o->dir) < 0) {
		free(s);
		return NULL;
	}
	s->r.dir = strdup(realpath(o->dir, abs) ? abs : o->dir);
	time_format_rfc3339(clock_now(), s->r.started);
	s->loop = loop_new();
	s->tick = loop_timer(s->loop, on_tick, s);
	s->t0 = clock_mono();
	if (spawn_cluster(s) < 0 || (port = cluster_port(s)) < 0 || connect_api(s, port) < 0) {
		teardown(s);
		record_free(&s->r);
		free(s);
		return NULL;
	}
	entry(s, E_ACTION, "action", "cube up --nodes %d (timings: %s)", o->nodes,
	      o->timings->name);
	observe(s);
	return s;
}

/* ---- the end ------------------------------------------------------------------------------- */

static void stop_cluster(struct scen *s)
{
	int64_t deadline = clock_mono() + 30 * NS_PER_SEC;
	int st;

	if (s->child <= 0)
		return;
	kill(s->child, SIGINT);
	while (waitpid(s->child, &st, WNOHANG) == 0) {
		if (clock_mono() > deadline) {
			kill(s->child, SIGKILL);
			waitpid(s->child, &st, 0);
			break;
		}
		usleep(20 * 1000);
	}
	s->child = 0;
}

static void record_free(struct scen_record *r)
{
	for (size_t i = 0; i < r->lanes.n; i++) {
		free(r->lanes.v[i].node);
		free(r->lanes.v[i].v);
		free(r->lanes.v[i].renew_time);
	}
	for (size_t i = 0; i < r->entries.n; i++) {
		free(r->entries.v[i].who);
		free(r->entries.v[i].text);
	}
	for (size_t i = 0; i < r->diags.n; i++) {
		free(r->diags.v[i].cmd);
		free(r->diags.v[i].out);
	}
	for (size_t i = 0; i < r->expects.n; i++) {
		free(r->expects.v[i].what);
		free(r->expects.v[i].detail);
	}
	free(r->lanes.v);
	free(r->entries.v);
	free(r->diags.v);
	free(r->expects.v);
	free(r->dir);
}

/* Everything but the record. */
static void teardown(struct scen *s)
{
	informer_free(s->nodes);
	informer_free(s->pods);
	informer_free(s->csrs);
	informer_free(s->events);
	informer_free(s->leases);
	rest_client_free(s->api);
	stop_cluster(s);
	timer_free(s->tick);
	loop_free(s->loop);
}

static int verdict(struct scen *s)
{
	size_t ok = 0, n = s->r.expects.n;

	for (size_t i = 0; i < n; i++)
		ok += s->r.expects.v[i].ok;
	printf("\n%s: %s (%zu/%zu expectations held) in %.1fs\n", s->o.name,
	       ok == n && n > 0 ? "PASS" : "FAIL", ok, n, s->r.end);
	for (size_t i = 0; i < n; i++)
		printf("  %s  %s: %s\n", s->r.expects.v[i].ok ? "PASS" : "FAIL",
		       s->r.expects.v[i].what, s->r.expects.v[i].detail);
	return ok == n && n > 0 ? 0 : 1;
}

int scen_finish(struct scen *s)
{
	int rc;

	s->r.end = scen_now(s);
	teardown(s);
	rc = verdict(s);
	if (s->o.report) {
		if (scen_report_write(&s->r, s->o.report) < 0) {
			fprintf(stderr, "error: report: %s\n", err_msg());
			rc = 1;
		} else {
			char abs[PATH_MAX];
			printf("Report: %s\n", realpath(s->o.report, abs) ? abs : s->o.report);
		}
	}
	printf("The cluster's files are in %s (console.log, logs/, nodes/).\n", s->r.dir ?: "");
	record_free(&s->r);
	free(s);
	return rc;
}
