/* cube scheduler — kube-scheduler as its own process, with its flag names. */
#include "cube/cli.h"

#include "scheduler/scheduler.h"

#include "base/err.h"
#include "base/log.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static const char usage[] =
	"Usage: cube scheduler --kubeconfig FILE [--config FILE] [flags]\n"
	"\n"
	"kube-scheduler: watches for pods that have no node and whose spec.schedulerName is\n"
	"one of its profiles' (default-scheduler), finds the nodes that fit them\n"
	"(NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,\n"
	"NodeResourcesFit), scores them (TaintToleration, NodeAffinity, LeastAllocated,\n"
	"BalancedAllocation), binds each pod to the best one, and otherwise reports why\n"
	"in a FailedScheduling event and the pod's PodScheduled condition, preempting\n"
	"lower-priority pods when that would help. Unschedulable pods wait in the queue\n"
	"with backoff (1s doubling to 10s) until a cluster change may help them.\n"
	"\n"
	"Flags (upstream's names):\n"
	"      --kubeconfig FILE      kubeconfig with the API server's location and the\n"
	"                             scheduler's credentials ('cube pki init' writes\n"
	"                             DIR/scheduler.conf)\n"
	"      --config FILE          a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1):\n"
	"                             podInitialBackoffSeconds, podMaxBackoffSeconds,\n"
	"                             percentageOfNodesToScore, profiles (schedulerName,\n"
	"                             percentageOfNodesToScore, plugins.{multiPoint,filter,\n"
	"                             score,postFilter}.{enabled,disabled} with weights)\n"
	"      --pod-max-in-unschedulable-pods-duration D\n"
	"                             how long an unschedulable pod waits before it is tried\n"
	"                             again anyway (default 5m0s)\n"
	CLI_SERVING_HELP("10259")
	CLI_LEADER_HELP("kube-scheduler")
	"  -v, --v N                  log verbosity (2: bindings and why pods do not fit;\n"
	"                             3: every attempt)\n"
	"  -h, --help                 this help\n"
	"\n"
	"SIGTERM or SIGINT stops the scheduler.\n";

/* The scheduler, started once this instance leads (cli_run_elected). */
struct sched_run {
	struct scheduler_opts *o;
	struct loop *loop;
	struct scheduler *s;
};

static int sched_start(void *arg)
{
	struct sched_run *r = arg;
	return (r->s = scheduler_new(r->loop, r->o)) ? 0 : -1;
}

static void sched_stop(void *arg)
{
	struct sched_run *r = arg;
	scheduler_free(r->s);
	r->s = NULL;
}

int cmd_scheduler(int argc, char **argv)
{
	static const struct option opts[] = {
		{"kubeconfig", required_argument, NULL, 'k'},
		{"config", required_argument, NULL, 'c'},
		{"pod-max-in-unschedulable-pods-duration", required_argument, NULL, 'u'},
		CLI_SERVING_OPTIONS,
		CLI_LEADER_OPTIONS,
		{"v", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct scheduler_opts o;
	struct cli_leader_opts leader;
	struct sched_run run = {.o = &o};
	/* Upstream records its leader election under the first profile's
	 * scheduler name, and gives the lease up when it is told to stop. */
	struct cli_elected elected = {.cmd = "scheduler",
				      .user_agent = "kube-scheduler/leader-election",
				      .events_component = "default-scheduler",
				      .lost_msg = "\"Leaderelection lost\"",
				      .release = true,
				      .start = sched_start,
				      .stop = sched_stop,
				      .arg = &run};
	int c, rc;

	scheduler_opts_default(&o);
	cli_leader_defaults(&leader, "kube-scheduler");
	while ((c = getopt_long(argc, argv, "hv:", opts, NULL)) != -1) {
		switch (c) {
		case 'k': o.kubeconfig = optarg; break;
		case 'c': o.config = optarg; break;
		case 'u':
			err_clear();
			if (duration_parse(optarg, &o.pod_max_in_unschedulable_ns) < 0 ||
			    o.pod_max_in_unschedulable_ns <= 0)
				return cli_usage_error("scheduler",
						       "invalid argument \"%s\" for "
						       "\"--pod-max-in-unschedulable-pods-duration\" "
						       "flag: %s",
						       optarg, *err_msg() ? err_msg() : "must be > 0");
			break;
		case 'v': log_set_verbosity(atoi(optarg)); break;
		case 'h': return cli_help(usage);
		default: {
			int r = cli_serving_flag("scheduler", c, optarg, &o.serving);
			if (r == 0)
				r = cli_leader_flag("scheduler", c, optarg, &leader);
			if (r == 1)
				break;
			return r ? r : cli_bad_flag("scheduler", argv);
		}
		}
	}
	if (optind < argc)
		return cli_usage_error("scheduler", "unexpected argument %s", argv[optind]);
	if (!o.kubeconfig || !*o.kubeconfig)
		return cli_usage_error("scheduler", "--kubeconfig is required");
	if ((rc = cli_leader_check("scheduler", &leader)))
		return rc;
	elected.kubeconfig = o.kubeconfig;
	run.loop = loop_new();
	LOG_INFO("\"Starting Kubernetes Scheduler\" version=\"v1.32.0\"");
	rc = cli_run_elected(run.loop, &leader, &elected);
	loop_free(run.loop);
	return rc;
}
