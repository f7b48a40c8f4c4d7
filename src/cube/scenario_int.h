/*
 * What scenario.c (the engine) and scenario_report.c (the HTML page) share:
 * the run's record. Not a contract outside them.
 */
#ifndef CUBE_SCENARIO_INT_H
#define CUBE_SCENARIO_INT_H

#include "cube/scenario.h"

#include <stddef.h>
#include <sys/types.h>

/* Taints the timeline follows, one bit each. */
enum {
	TAINT_UNREACHABLE_NOSCHEDULE = 1 << 0,
	TAINT_UNREACHABLE_NOEXECUTE = 1 << 1,
	TAINT_NOT_READY_NOSCHEDULE = 1 << 2,
	TAINT_NOT_READY_NOEXECUTE = 1 << 3,
	TAINT_UNSCHEDULABLE = 1 << 4,
	TAINT_KINDS = 5,
};
extern const struct scen_taint {
	const char *key, *effect;
} scen_taints[TAINT_KINDS];

/* One node's state from t on. */
struct sample {
	double t;
	char ready[8]; /* True, False, Unknown, or "-" before the node exists */
	unsigned taints;
	int pods; /* active pods bound to it */
};

struct lane {
	char *node;
	struct sample *v;
	size_t n, cap;
	double last_renew;
	char *renew_time; /* the Lease's spec.renewTime last seen */
};

enum entry_kind { E_NODE, E_TAINT, E_POD, E_CSR, E_EVENT, E_ACTION, E_SAY };

struct entry {
	double t;
	enum entry_kind kind;
	char *who, *text;
};

struct diag {
	double t;
	bool action; /* something done to the cluster, not a look at it */
	int rc;
	char *cmd, *out;
};

struct expect {
	bool ok;
	char *what, *detail;
};

#define SCEN_VEC(type, name)                                                                       \
	struct {                                                                                   \
		type *v;                                                                           \
		size_t n, cap;                                                                     \
	} name

struct scen_record {
	const char *name, *title;
	const struct scen_timings *timings;
	int nodes;
	char *dir;
	char started[40]; /* RFC 3339 */
	double end;
	SCEN_VEC(struct lane, lanes);
	SCEN_VEC(struct entry, entries);
	SCEN_VEC(struct diag, diags);
	SCEN_VEC(struct expect, expects);
};

/* Write the self-contained HTML page (inline CSS and SVG, no scripts, no
 * network) for r at path: 0 or an error. */
int scen_report_write(const struct scen_record *r, const char *path);

#endif
