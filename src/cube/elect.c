/* The leader election flags of the controller manager and the scheduler,
 * and running a component only while it holds its Lease (cli.h). */
#include "cube/cli.h"

#include "client/events.h"
#include "client/leaderelection.h"
#include "client/rest.h"

#include "base/err.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_leader_defaults(struct cli_leader_opts *o, const char *name)
{
	memset(o, 0, sizeof(*o));
	o->elect = true;
	o->lease_ns = LEADER_ELECTION_LEASE_DURATION_NS;
	o->renew_ns = LEADER_ELECTION_RENEW_DEADLINE_NS;
	o->retry_ns = LEADER_ELECTION_RETRY_PERIOD_NS;
	o->lock = "leases";
	o->name = name;
	o->ns = "kube-system";
}

static int duration_flag(const char *cmd, const char *flag, const char *arg, int64_t *out)
{
	if (duration_parse(arg, out) < 0 || *out <= 0)
		return cli_usage_error(cmd, "invalid argument \"%s\" for \"--%s\" flag", arg, flag);
	return 1;
}

int cli_leader_flag(const char *cmd, int c, const char *arg, struct cli_leader_opts *o)
{
	switch (c - CLI_LEADER_BASE) {
	case 0:
		if (cli_parse_bool(arg, &o->elect) < 0)
			return cli_usage_error(
			    cmd, "invalid argument \"%s\" for \"--leader-elect\" flag", arg);
		return 1;
	case 1:
		return duration_flag(cmd, "leader-elect-lease-duration", arg, &o->lease_ns);
	case 2:
		return duration_flag(cmd, "leader-elect-renew-deadline", arg, &o->renew_ns);
	case 3:
		return duration_flag(cmd, "leader-elect-retry-period", arg, &o->retry_ns);
	case 4:
		/* Upstream's other locks (endpointsleases, configmapsleases) are gone. */
		if (strcmp(arg, "leases"))
			return cli_usage_error(
			    cmd,
			    "leaderElection.resourceLock: Invalid value: \"%s\": "
			    "resourceLock value must be \"leases\"",
			    arg);
		o->lock = arg;
		return 1;
	case 5:
		o->name = arg;
		return 1;
	case 6:
		o->ns = arg;
		return 1;
	default:
		return 0;
	}
}

int cli_leader_check(const char *cmd, const struct cli_leader_opts *o)
{
	if (!o->elect)
		return 0;
	if (o->lease_ns <= o->renew_ns)
		return cli_usage_error(cmd, "leaseDuration must be greater than renewDeadline");
	if ((double)o->renew_ns <= 1.2 * (double)o->retry_ns)
		return cli_usage_error(
		    cmd, "renewDeadline must be greater than retryPeriod*JitterFactor");
	return 0;
}

/* ---- running under the lease ------------------------------------------------------ */

struct run {
	const struct cli_elected *e;
	struct loop *loop;
	bool started, lost;
	int rc;
};

static void on_started(void *arg)
{
	struct run *r = arg;

	if (r->e->start(r->e->arg) < 0) {
		r->rc = cli_fail("%s", err_msg());
		loop_stop(r->loop);
		return;
	}
	r->started = true;
}

static void on_stopped(void *arg)
{
	struct run *r = arg;

	LOG_ERROR("%s", r->e->lost_msg);
	r->lost = true;
	loop_stop(r->loop);
}

static void stop_loop(void *arg)
{
	loop_stop(arg);
}

int cli_run_elected(struct loop *loop, const struct cli_leader_opts *o, const struct cli_elected *e)
{
	struct run r = {.e = e, .loop = loop};
	struct leader_election_config cfg = {.ns = o->ns,
	                                     .name = o->name,
	                                     .lease_duration_ns = o->lease_ns,
	                                     .renew_deadline_ns = o->renew_ns,
	                                     .retry_period_ns = o->retry_ns,
	                                     .on_started = on_started,
	                                     .on_stopped = on_stopped,
	                                     .arg = &r};
	struct rest_client *client;
	struct event_recorder *events;
	struct leader_elector *le;
	char host[256] = "", *identity;

	if (!o->elect) {
		if (e->start(e->arg) < 0)
			return cli_fail("%s", err_msg());
		cli_run_until_signal(loop);
		e->stop(e->arg);
		return 0;
	}
	/* A client of its own, as upstream's "leader-election" one. */
	if (!(client = rest_client_for_component(loop, e->kubeconfig, NULL, NULL, e->user_agent)))
		return cli_fail("%s", err_msg());
	gethostname(host, sizeof(host) - 1);
	events = event_recorder_new(loop, client, e->events_component, host, 2);
	identity = leader_election_identity();
	cfg.identity = identity;
	cfg.events = events;
	le = leader_elector_start(loop, client, &cfg);
	cli_run_until_signal(loop);
	/* The component stops before the lease goes: never two leaders. */
	if (r.started)
		e->stop(e->arg);
	r.started = false;
	if (!r.lost && e->release && leader_elector_is_leader(le)) {
		/* Give the lease up, within the renew deadline at most. */
		struct timer *t = loop_timer(loop, stop_loop, loop);
		timer_after(t, o->renew_ns);
		leader_elector_release(le, stop_loop, loop);
		loop_run(loop);
		timer_free(t);
		LOG_INFO("\"Requested to terminate, exiting\"");
	}
	if (r.started)
		e->stop(e->arg);
	leader_elector_free(le);
	event_recorder_free(events);
	rest_client_free(client);
	free(identity);
	return r.lost ? 1 : r.rc;
}
