/*
 * scenario — the engine under `cube scenario run` and `cube demo`: a fresh
 * cluster (`cube up` as a child process, on timings compressed or
 * upstream's), an observer that watches it through the API and keeps a
 * timeline (nodes' Ready condition and taints, pods per node, CSRs, events,
 * Lease renewals), and what a script does to it: inject faults with `cube
 * fault`, run the runbook's diagnostic commands with their real output,
 * wait for conditions with a deadline, and check measured timings against
 * the ones the configured timers predict. The script's runner stands
 * outside the cluster, as the operator does; its clock is the observer's.
 *
 * Ownership: a scen is its creator's (scen_free). Threads: main only; the
 * loop runs inside scen_wait and scen_sh.
 */
#ifndef CUBE_SCENARIO_H
#define CUBE_SCENARIO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* The cluster's timers: what the expectations are computed from. */
struct scen_timings {
	const char *name;          /* "compressed" or "upstream" */
	int64_t monitor_period_ns; /* --node-monitor-period */
	int64_t grace_ns;          /* --node-monitor-grace-period */
	int lease_duration_s;      /* --node-lease-duration-seconds (renew at 1/4) */
	int64_t status_update_ns;  /* --node-status-update-frequency */
	int toleration_s;          /* --default-{not-ready,unreachable}-toleration-seconds */
};

extern const struct scen_timings scen_compressed, scen_upstream;

struct scen_opts {
	const char *name, *title;
	const char *dir;    /* the cluster's data dir (made afresh) */
	const char *report; /* HTML report path, or NULL */
	const struct scen_timings *timings;
	int nodes;
	bool quiet; /* no live timeline on stdout (narration still) */
};

struct scen;

/* Start the cluster and the observer; NULL with err_msg(). */
struct scen *scen_start(const struct scen_opts *o);
/* Stop the cluster, write the report, print the verdict; 0 when every
 * expectation held, else 1. Frees s. */
int scen_finish(struct scen *s);

const struct scen_timings *scen_timings(const struct scen *s);
const char *scen_dir(const struct scen *s);
int scen_nodes(const struct scen *s);
/* Seconds since the scenario started, on the observer's clock. */
double scen_now(const struct scen *s);

/* A narration line, printed and kept for the report. */
void scen_say(struct scen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A timeline mark of the script's own (an action), at now. */
void scen_mark(struct scen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Run a shell command while the observer keeps observing, with KUBECONFIG
 * set to the cluster's admin.conf, CUBE_DATA to its data dir and `cube` on
 * PATH. diagnose: its command line and output go to the report (the
 * runbook's diagnostic steps); else only failures are shown. Returns the
 * exit status (-1 when it could not run); *out (optional) gets the output.
 */
int scen_sh(struct scen *s, bool diagnose, const char *cmd, char **out);
/* `cube fault ARGS` (one shell word list) on this cluster, as a mark. */
int scen_fault(struct scen *s, const char *args);

/* Objects as the observer sees them now (borrowed; NULL when absent). */
json_t *scen_node(const struct scen *s, const char *name);
json_t *scen_pod(const struct scen *s, const char *ns_name);
/* Every pod, CSR or event the observer holds (borrowed; *out malloc'd). */
size_t scen_pods(const struct scen *s, json_t ***out);
size_t scen_csrs(const struct scen *s, json_t ***out);
size_t scen_events(const struct scen *s, json_t ***out);
/* When the observer last saw node's Lease renewed (scenario seconds; <0: never). */
double scen_last_renew(const struct scen *s, const char *node);

/* Create an object through the API (as the admin); 0 or an error. */
int scen_create(struct scen *s, const char *path, const json_t *obj);

typedef bool (*scen_cond)(struct scen *s, void *arg);
/*
 * Keep observing until cond holds (checked after every change the observer
 * sees, and every 100 ms), at most timeout_s. Returns the scenario time it
 * first held, or -1 after a timeout (recorded as a failed expectation named
 * what, with the report noting it).
 */
double scen_wait(struct scen *s, const char *what, scen_cond cond, void *arg, double timeout_s);

/* A measured timing against the expected one: held when within tol_s. */
bool scen_expect_time(struct scen *s, const char *what, double measured_s, double expected_s,
                      double tol_s);
/* A fact that must hold. */
bool scen_expect(struct scen *s, const char *what, bool held, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The node's Ready condition status ("True", "False", "Unknown"), or NULL. */
const char *scen_ready(const json_t *node);
bool scen_has_taint(const json_t *node, const char *key, const char *effect);

#endif
