#include "client/leaderelection.h"

#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum phase { ACQUIRING, LEADING, DONE };

struct leader_elector {
	struct loop *loop;
	struct rest_client *c;
	struct leader_election_config cfg;
	char *ns, *name, *identity;
	char *path, *collection, *desc; /* the Lease, its collection, "ns/name" */
	enum phase phase;
	struct timer *tick;     /* the next attempt */
	struct timer *deadline; /* the renewal round's end */
	bool round_ok;          /* this round renewed */
	struct rest_call *call; /* the attempt's request in flight */
	json_t *lease;          /* the Lease as last read or written */
	/* What was last observed, and when (this process's clock). */
	char *observed_raw, *observed_holder;
	int64_t observed_at, observed_duration_ns, observed_transitions;
	char observed_acquire[TIME_BUF];
	void (*release_done)(void *arg);
	void *release_arg;
	bool release_retried;
};

/* ---- the record ----------------------------------------------------------- */

static bool is_leader(const struct leader_elector *le)
{
	return le->observed_holder && !strcmp(le->observed_holder, le->identity);
}

/* The Lease lease says we hold it. */
static bool is_leader_record(const struct leader_elector *le, const json_t *lease)
{
	const char *h = jx_str(lease, "spec.holderIdentity");
	return h && !strcmp(h, le->identity);
}

/* The lease is valid while its observed record is younger than its duration. */
static bool lease_valid(const struct leader_elector *le)
{
	return le->observed_raw && clock_mono() < le->observed_at + le->observed_duration_ns;
}

static char *spec_raw(const json_t *lease)
{
	json_t *spec = json_object_get(lease, "spec");
	return spec ? json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
}

/* Take what lease holds as observed, dated now when it changed. */
static void observe(struct leader_elector *le, const json_t *lease)
{
	char *raw = spec_raw(lease);
	const char *acq = jx_str(lease, "spec.acquireTime");

	if (le->observed_raw && !strcmp(raw, le->observed_raw)) {
		free(raw);
		return;
	}
	free(le->observed_raw);
	free(le->observed_holder);
	le->observed_raw = raw;
	le->observed_holder = strdup(jx_str(lease, "spec.holderIdentity") ?: "");
	le->observed_duration_ns = jx_int(lease, "spec.leaseDurationSeconds", 0) * NS_PER_SEC;
	le->observed_transitions = jx_int(lease, "spec.leaseTransitions", 0);
	snprintf(le->observed_acquire, sizeof(le->observed_acquire), "%s", acq ? acq : "");
	le->observed_at = clock_mono();
}

static void keep_lease(struct leader_elector *le, const json_t *lease)
{
	json_decref(le->lease);
	le->lease = json_deep_copy(lease);
	observe(le, lease);
}

/* Our record: held by us, renewed now; acquired now unless we held it. */
static json_t *our_spec(struct leader_elector *le, bool keep_acquire, int64_t transitions)
{
	char now[TIME_BUF];
	const char *acquired = keep_acquire && *le->observed_acquire ? le->observed_acquire : NULL;

	time_format_rfc3339_micro(clock_now(), now);
	return json_pack("{s:s,s:I,s:s,s:s,s:I}", "holderIdentity", le->identity,
	                 "leaseDurationSeconds",
	                 (json_int_t)(le->cfg.lease_duration_ns / NS_PER_SEC), "acquireTime",
	                 acquired ? acquired : now, "renewTime", now, "leaseTransitions",
	                 (json_int_t)transitions);
}

/* ---- one attempt: tryAcquireOrRenew ---------------------------------------- */

static void attempt_done(struct leader_elector *le, bool ok);

static const char *why(int status, const json_t *body, const char *err, char *buf, size_t n)
{
	if (err)
		return err;
	snprintf(buf, n, "%s", jx_str(body, "message") ?: "unexpected answer");
	if (!jx_str(body, "message"))
		snprintf(buf, n, "the server answered %d", status);
	return buf;
}

/* A write of the lock answered: want is its success status, what client-go
 * logs on failure. */
static void lock_written(struct leader_elector *le, int status, int want, json_t *body,
                         const char *err, const char *what)
{
	char buf[256];

	le->call = NULL;
	if (status == want) {
		keep_lease(le, body);
		attempt_done(le, true);
		return;
	}
	LOG_ERROR("%s: %s", what, why(status, body, err, buf, sizeof(buf)));
	attempt_done(le, false);
}

static void on_updated(void *arg, int status, json_t *body, const char *err)
{
	lock_written(arg, status, 200, body, err, "Failed to update lock");
}

static void on_created(void *arg, int status, json_t *body, const char *err)
{
	lock_written(arg, status, 201, body, err,
	             "error initially creating leader election record");
}

static void put_spec(struct leader_elector *le, json_t *spec)
{
	json_t *next = json_deep_copy(le->lease);
	json_object_set_new(next, "spec", spec);
	le->call = rest_do(le->c, "PUT", le->path, next, on_updated, le);
	json_decref(next);
}

/* The slow path: read the lock, then take or renew it when that is allowed. */
static void on_got(void *arg, int status, json_t *body, const char *err)
{
	struct leader_elector *le = arg;
	char buf[256];

	le->call = NULL;
	if (status == 404) {
		json_t *lease =
		    json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "apiVersion", "coordination.k8s.io/v1",
		              "kind", "Lease", "metadata", "name", le->name, "namespace", le->ns,
		              "spec", our_spec(le, false, 0));
		le->call = rest_do(le->c, "POST", le->collection, lease, on_created, le);
		json_decref(lease);
		return;
	}
	if (status != 200) {
		LOG_ERROR("error retrieving resource lock %s: %s", le->desc,
		          why(status, body, err, buf, sizeof(buf)));
		attempt_done(le, false);
		return;
	}
	json_decref(le->lease);
	le->lease = json_deep_copy(body);
	observe(le, body);
	if (*le->observed_holder && lease_valid(le) && !is_leader(le)) {
		LOG_V(4, "lock is held by %s and has not yet expired", le->observed_holder);
		attempt_done(le, false);
		return;
	}
	/* Ours: renew, keeping when we took it. Another's, expired: take it. */
	if (is_leader(le))
		put_spec(le, our_spec(le, true, le->observed_transitions));
	else
		put_spec(le, our_spec(le, false, le->observed_transitions + 1));
}

static void slow_path(struct leader_elector *le)
{
	le->call = rest_do(le->c, "GET", le->path, NULL, on_got, le);
}

static void on_fast(void *arg, int status, json_t *body, const char *err)
{
	struct leader_elector *le = arg;
	char buf[256];

	le->call = NULL;
	if (status == 200) {
		keep_lease(le, body);
		attempt_done(le, true);
		return;
	}
	LOG_ERROR("Failed to update lock optimistically: %s, falling back to slow path",
	          why(status, body, err, buf, sizeof(buf)));
	slow_path(le);
}

static void attempt(struct leader_elector *le)
{
	if (le->call || le->phase == DONE)
		return;
	/* The leader's fast path: update what it last wrote, unread. */
	if (is_leader(le) && lease_valid(le) && le->lease) {
		json_t *next = json_deep_copy(le->lease);
		json_object_set_new(next, "spec", our_spec(le, true, le->observed_transitions));
		le->call = rest_do(le->c, "PUT", le->path, next, on_fast, le);
		json_decref(next);
		return;
	}
	slow_path(le);
}

/* ---- the phases ------------------------------------------------------------------ */

/* Acquiring retries jittered, as wait.JitterUntil with factor 1.2. */
static int64_t jittered(const struct leader_elector *le)
{
	int64_t p = le->cfg.retry_period_ns;
	return p + (int64_t)(rand_double() * 1.2 * (double)p);
}

static void start_round(struct leader_elector *le)
{
	le->round_ok = false;
	timer_after(le->deadline, le->cfg.renew_deadline_ns);
	attempt(le);
}

static void became_leader(struct leader_elector *le)
{
	LOG_INFO("successfully acquired lease %s", le->desc);
	if (le->cfg.events && le->lease) {
		struct event_ref ref = event_ref_of(le->lease, "coordination.k8s.io/v1", "Lease");
		event_record(le->cfg.events, &ref, "Normal", "LeaderElection", "%s became leader",
		             le->identity);
	}
	le->phase = LEADING;
	if (le->cfg.on_started)
		le->cfg.on_started(le->cfg.arg);
	/* Renewing starts at once, as upstream's wait.Until does. */
	if (le->phase == LEADING)
		start_round(le);
}

static void attempt_done(struct leader_elector *le, bool ok)
{
	if (le->phase == ACQUIRING) {
		if (ok) {
			became_leader(le);
			return;
		}
		LOG_V(4, "failed to acquire lease %s", le->desc);
		timer_after(le->tick, jittered(le));
	} else if (le->phase == LEADING) {
		if (ok) {
			LOG_V(5, "successfully renewed lease %s", le->desc);
			le->round_ok = true;
			timer_cancel(le->deadline);
		}
		/* The next round after a success; the next try within this one. */
		timer_after(le->tick, le->cfg.retry_period_ns);
	}
}

static void on_tick(void *arg)
{
	struct leader_elector *le = arg;

	if (le->phase == ACQUIRING)
		attempt(le);
	else if (le->phase == LEADING && le->round_ok)
		start_round(le);
	else if (le->phase == LEADING)
		attempt(le);
}

static void on_deadline(void *arg)
{
	struct leader_elector *le = arg;

	if (le->phase != LEADING || le->round_ok)
		return;
	LOG_INFO("failed to renew lease %s: context deadline exceeded", le->desc);
	rest_cancel(le->call);
	le->call = NULL;
	le->phase = DONE;
	timer_cancel(le->tick);
	free(le->observed_holder);
	le->observed_holder = NULL;
	if (le->cfg.on_stopped)
		le->cfg.on_stopped(le->cfg.arg);
}

/* ---- the elector ------------------------------------------------------------------- */

struct leader_elector *leader_elector_start(struct loop *loop, struct rest_client *c,
                                            const struct leader_election_config *cfg)
{
	struct leader_elector *le = calloc(1, sizeof(*le));

	if (!le)
		abort();
	le->loop = loop;
	le->c = c;
	le->cfg = *cfg;
	if (le->cfg.lease_duration_ns <= 0)
		le->cfg.lease_duration_ns = LEADER_ELECTION_LEASE_DURATION_NS;
	if (le->cfg.renew_deadline_ns <= 0)
		le->cfg.renew_deadline_ns = LEADER_ELECTION_RENEW_DEADLINE_NS;
	if (le->cfg.retry_period_ns <= 0)
		le->cfg.retry_period_ns = LEADER_ELECTION_RETRY_PERIOD_NS;
	le->ns = strdup(cfg->ns && *cfg->ns ? cfg->ns : "kube-system");
	le->name = strdup(cfg->name);
	le->identity = strdup(cfg->identity);
	le->path =
	    str_printf("/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", le->ns, le->name);
	le->collection = str_printf("/apis/coordination.k8s.io/v1/namespaces/%s/leases", le->ns);
	le->desc = str_printf("%s/%s", le->ns, le->name);
	le->tick = loop_timer(loop, on_tick, le);
	le->deadline = loop_timer(loop, on_deadline, le);
	LOG_INFO("attempting to acquire leader lease %s...", le->desc);
	attempt(le);
	return le;
}

bool leader_elector_is_leader(const struct leader_elector *le)
{
	return le->phase == LEADING;
}

const char *leader_elector_leader(const struct leader_elector *le)
{
	return le->observed_holder ? le->observed_holder : "";
}

static void put_release(struct leader_elector *le);

static void release_finish(struct leader_elector *le)
{
	if (le->release_done)
		le->release_done(le->release_arg);
}

static void on_release_got(void *arg, int status, json_t *body, const char *err)
{
	struct leader_elector *le = arg;
	char buf[256];

	le->call = NULL;
	if (status != 200 || !is_leader_record(le, body)) {
		if (status != 200)
			LOG_ERROR("Failed to release lock: %s",
				  why(status, body, err, buf, sizeof(buf)));
		release_finish(le); /* not ours any more: nothing to give up */
		return;
	}
	json_decref(le->lease);
	le->lease = json_deep_copy(body);
	le->release_retried = true;
	put_release(le);
}

static void on_released(void *arg, int status, json_t *body, const char *err)
{
	struct leader_elector *le = arg;
	char buf[256];

	le->call = NULL;
	/* A renewal cancelled in flight may have landed: read, then again. */
	if (status == 409 && !le->release_retried) {
		le->call = rest_do(le->c, "GET", le->path, NULL, on_release_got, le);
		return;
	}
	if (status != 200)
		LOG_ERROR("Failed to release lock: %s", why(status, body, err, buf, sizeof(buf)));
	release_finish(le);
}

/* No holder, a one-second lease: the next candidate need not wait. */
static void put_release(struct leader_elector *le)
{
	char now[TIME_BUF];
	json_t *next = json_deep_copy(le->lease);

	time_format_rfc3339_micro(clock_now(), now);
	json_object_set_new(next, "spec",
			    json_pack("{s:s,s:I,s:s,s:s,s:I}", "holderIdentity", "",
				      "leaseDurationSeconds", (json_int_t)1, "acquireTime", now,
				      "renewTime", now, "leaseTransitions",
				      (json_int_t)le->observed_transitions));
	le->call = rest_do(le->c, "PUT", le->path, next, on_released, le);
	json_decref(next);
}

void leader_elector_release(struct leader_elector *le, void (*done)(void *arg), void *arg)
{
	bool leading = le->phase == LEADING && le->lease;

	le->phase = DONE;
	timer_cancel(le->tick);
	timer_cancel(le->deadline);
	rest_cancel(le->call);
	le->call = NULL;
	if (!leading) {
		if (done)
			done(arg);
		return;
	}
	le->release_done = done;
	le->release_arg = arg;
	put_release(le);
}

void leader_elector_free(struct leader_elector *le)
{
	if (!le)
		return;
	rest_cancel(le->call);
	timer_free(le->tick);
	timer_free(le->deadline);
	json_decref(le->lease);
	free(le->observed_raw);
	free(le->observed_holder);
	free(le->ns);
	free(le->name);
	free(le->identity);
	free(le->path);
	free(le->collection);
	free(le->desc);
	free(le);
}

char *leader_election_identity(void)
{
	char host[256] = "", uuid[RAND_UUID_LEN + 1];

	gethostname(host, sizeof(host) - 1);
	return str_printf("%s_%s", host, rand_uuid(uuid));
}
