/*
 * cli — what every cube subcommand shares: the command table, usage and
 * error reporting, and the exit codes (0 fine, 1 the thing checked is not
 * fine or the operation failed, 2 the command line is wrong).
 *
 * Main thread only.
 */
#ifndef CUBE_CLI_H
#define CUBE_CLI_H

#include "base/strv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct event;
struct loop;

#define EXIT_USAGE 2

struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
	const char *usage; /* full --help text */
};

/* Find and run argv[1] among cmds; prints the group's help otherwise. */
int cli_dispatch(const char *group, const struct cli_command *cmds, int argc, char **argv);
/* "cube <cmd>: <message>\nRun 'cube <cmd> --help' for usage." → EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* After getopt_long returned '?' or ':': name the offending argument. */
int cli_bad_flag(const char *cmd, char **argv);
/* "error: <message>" on stderr → 1. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * The file-descriptor budget of a command that runs hollow kubelets:
 * CLI_FD_RESERVE for everything but the kubelets' own (the control plane
 * of `cube up`, about 85 at rest: its store, logs, loops, listeners and
 * the controller manager's and scheduler's connections, both ends; kubectl
 * and the API server's proxy connections; files open for a moment; the
 * bootstrap storm's few above KUBELET_HOLLOW_CONNS), plus per_node for
 * each of `nodes` (kubelet.h). 0 when this process may have them (its
 * limit raised if need be, base/fdlimit.h); else 1, after printing what
 * is needed, the limit, how to raise it, and how many nodes fit (flag:
 * "--nodes").
 */
#define CLI_FD_RESERVE 256
int cli_need_fds(const char *cmd, const char *flag, int nodes, long per_node);
/* Run loop until SIGTERM or SIGINT (logged as upstream components do). */
void cli_run_until_signal(struct loop *loop);
/*
 * Every 30 s (real time), hand the heap's whole free pages back
 * (heap_trim): for processes whose bursts leave garbage behind (hollow
 * kubelets after their bootstrap), not for an API server's loop, which
 * glibc's malloc_trim would stall. NULL when the allocator does this by
 * itself (jemalloc, base/heap.h); else event_free the result.
 */
struct event *cli_heap_trimmer(struct loop *loop);
/* A flag's boolean: "true"/"1" (or no value), "false"/"0"; -1 otherwise. */
int cli_parse_bool(const char *s, bool *out);
/* ---- the serving flags of the controller manager and the scheduler ---- */

struct secure_serving_opts;
/* getopt_long entries, values CLI_SERVING_BASE.. (append to a table). */
#define CLI_SERVING_BASE 0x200
#define CLI_SERVING_OPTIONS                                                                        \
	{"secure-port", required_argument, NULL, CLI_SERVING_BASE},                                \
	{"bind-address", required_argument, NULL, CLI_SERVING_BASE + 1},                           \
	{"cert-dir", required_argument, NULL, CLI_SERVING_BASE + 2},                               \
	{"tls-cert-file", required_argument, NULL, CLI_SERVING_BASE + 3},                          \
	{"tls-private-key-file", required_argument, NULL, CLI_SERVING_BASE + 4},                   \
	{"client-ca-file", required_argument, NULL, CLI_SERVING_BASE + 5}
/* The help lines for them (default port given). */
#define CLI_SERVING_HELP(port)                                                                     \
	"      --secure-port N                 the HTTPS port for /healthz, /livez, /readyz and\n"  \
	"                                      /metrics; 0: do not serve (default " port ")\n"      \
	"      --bind-address IP               (default 0.0.0.0)\n"                                  \
	"      --cert-dir DIR                  where the self-signed serving certificate is kept\n"  \
	"                                      (default: in memory)\n"                               \
	"      --tls-cert-file F, --tls-private-key-file F  the serving certificate instead\n"      \
	"      --client-ca-file F              clients with a certificate this CA signed may read\n" \
	"                                      /metrics (the cluster's pki/ca.crt); others get 403\n"
/* 1: c was one of them (stored), 0: not, EXIT_USAGE: a bad value (printed). */
int cli_serving_flag(const char *cmd, int c, const char *arg, struct secure_serving_opts *o);

/* ---- leader election (the controller manager and the scheduler) ---- */

struct cli_leader_opts {
	bool elect;                            /* --leader-elect (default true) */
	int64_t lease_ns, renew_ns, retry_ns;  /* 15s, 10s, 2s */
	const char *lock, *name, *ns;          /* leases, the component's name, kube-system */
};
#define CLI_LEADER_BASE 0x300
#define CLI_LEADER_OPTIONS                                                                         \
	{"leader-elect", optional_argument, NULL, CLI_LEADER_BASE},                                \
	{"leader-elect-lease-duration", required_argument, NULL, CLI_LEADER_BASE + 1},             \
	{"leader-elect-renew-deadline", required_argument, NULL, CLI_LEADER_BASE + 2},             \
	{"leader-elect-retry-period", required_argument, NULL, CLI_LEADER_BASE + 3},               \
	{"leader-elect-resource-lock", required_argument, NULL, CLI_LEADER_BASE + 4},              \
	{"leader-elect-resource-name", required_argument, NULL, CLI_LEADER_BASE + 5},              \
	{"leader-elect-resource-namespace", required_argument, NULL, CLI_LEADER_BASE + 6}
#define CLI_LEADER_HELP(name)                                                                      \
	"      --leader-elect                  run only while holding the Lease kube-system/" name   \
	"\n"                                                                                        \
	"                                      (several instances: one active; default true)\n"    \
	"      --leader-elect-lease-duration D how long a silent holder keeps it (default 15s)\n"   \
	"      --leader-elect-renew-deadline D how long the holder tries to renew before it gives\n" \
	"                                      up (default 10s)\n"                                  \
	"      --leader-elect-retry-period D   between attempts (default 2s)\n"                     \
	"      --leader-elect-resource-lock leases, --leader-elect-resource-name N,\n"              \
	"      --leader-elect-resource-namespace NS  the lock (default leases, " name ",\n"         \
	"                                      kube-system)\n"
void cli_leader_defaults(struct cli_leader_opts *o, const char *name);
/* 1: c was one of them (stored), 0: not, EXIT_USAGE: a bad value (printed). */
int cli_leader_flag(const char *cmd, int c, const char *arg, struct cli_leader_opts *o);
/* 0, or EXIT_USAGE with client-go's complaint about the durations. */
int cli_leader_check(const char *cmd, const struct cli_leader_opts *o);

/*
 * Run a component until SIGTERM or SIGINT — with o->elect, only while it
 * holds the lease: start(arg) once leading, stop(arg) at the end. Lost
 * lease: lost_msg logged ("leaderelection lost") and exit status 1, as
 * upstream's components exit. release: give the lease up on SIGTERM (the
 * scheduler's ReleaseOnCancel; the controller manager keeps it to expire).
 * events_component: source of the "became leader" Event. Returns the exit
 * status; start's failure is printed and returned as 1.
 */
struct cli_elected {
	const char *cmd, *kubeconfig, *user_agent, *events_component, *lost_msg;
	bool release;
	int (*start)(void *arg);
	void (*stop)(void *arg);
	void *arg;
};
int cli_run_elected(struct loop *loop, const struct cli_leader_opts *o,
		    const struct cli_elected *e);

/* ---- tables as Go's tabwriter prints them (minwidth 10, padding 3) ---- */

#define CLI_TABLE_COLS 8

struct cli_table {
	struct strv cells; /* row-major, ncols per row */
	size_t ncols;      /* at most CLI_TABLE_COLS */
};
void cli_table_row(struct cli_table *t, const char *const *cells);
/* Print the rows, the last column unpadded, and free them. */
void cli_table_print(struct cli_table *t);
/* "Dec 30, 2025 23:36 UTC": Go's "Jan 02, 2006 15:04 MST", as kubeadm prints. */
char *cli_expires(int64_t ns, char *buf, size_t n);

/* Print usage text (stdout) and return 0: for --help. */
int cli_help(const char *usage);

int cmd_pki(int argc, char **argv);
int cmd_certs(int argc, char **argv);
int cmd_apiserver(int argc, char **argv);
int cmd_server(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_controller_manager(int argc, char **argv);
int cmd_kubelet(int argc, char **argv);
int cmd_scheduler(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_fault(int argc, char **argv);
int cmd_restart(int argc, char **argv);
int cmd_scenario(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
/* cube certs report (cmd_certs_report.c) */
int certs_report(int argc, char **argv);
extern const char certs_report_usage[];

#endif
