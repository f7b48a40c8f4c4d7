/*
 * leaderelection — one active instance among several (the controller
 * manager's, the scheduler's), by a coordination.k8s.io/v1 Lease, as
 * client-go's tools/leaderelection with a LeaseLock does:
 *
 *   acquiring: every retry period (jittered by up to 1.2 of it) read the
 *     Lease; take it when it is absent (create), ours, or not renewed for
 *     lease_duration as this process has observed it (the holder's clock
 *     is never trusted: a record counts from when it was seen to change);
 *     a takeover adds one to leaseTransitions;
 *   leading: renew every retry period (an update of the Lease as last read,
 *     so a concurrent writer makes it fail, not both succeed); a renewal
 *     round that has not succeeded within renew_deadline loses the lease —
 *     "failed to renew lease kube-system/NAME: context deadline exceeded" —
 *     and on_stopped runs (upstream's components then exit 1).
 *
 * Upstream's defaults: lease 15 s, renew deadline 10 s, retry 2 s. The log
 * lines are client-go's ("attempting to acquire leader lease ...",
 * "successfully acquired lease ...", "failed to renew lease ...: ...");
 * becoming leader records the Event "<identity> became leader" (reason
 * LeaderElection) on the Lease. Timers run on the loop's clock (virtual in
 * tests).
 *
 * Ownership: the elector borrows the loop, the rest client and the event
 * recorder (may be NULL), which outlive it. Threads: the loop's.
 */
#ifndef CUBE_CLIENT_LEADERELECTION_H
#define CUBE_CLIENT_LEADERELECTION_H

#include "client/events.h"
#include "client/rest.h"

#include "base/loop.h"

#include <stdbool.h>
#include <stdint.h>

struct leader_election_config {
	const char *ns;       /* --leader-elect-resource-namespace, kube-system */
	const char *name;     /* --leader-elect-resource-name: kube-controller-manager, ... */
	const char *identity; /* "<hostname>_<uuid>" (leader_election_identity) */
	int64_t lease_duration_ns, renew_deadline_ns, retry_period_ns; /* 0: 15 s, 10 s, 2 s */
	/* on_started once the lease is ours; on_stopped once it is lost or
	 * released (never before on_started). */
	void (*on_started)(void *arg);
	void (*on_stopped)(void *arg);
	void *arg;
	struct event_recorder *events; /* "became leader" (NULL: none) */
};

#define LEADER_ELECTION_LEASE_DURATION_NS (15 * NS_PER_SEC)
#define LEADER_ELECTION_RENEW_DEADLINE_NS (10 * NS_PER_SEC)
#define LEADER_ELECTION_RETRY_PERIOD_NS (2 * NS_PER_SEC)

struct leader_elector;

/* Starts acquiring at once. Strings are copied. */
struct leader_elector *leader_elector_start(struct loop *loop, struct rest_client *c,
                                            const struct leader_election_config *cfg);
bool leader_elector_is_leader(const struct leader_elector *le);
/* The holder last observed ("" when none yet). */
const char *leader_elector_leader(const struct leader_elector *le);
/*
 * Give the lease up (upstream's ReleaseOnCancel: leaseDurationSeconds 1, no
 * holder), then call done (once the update is answered, or at once when
 * not leading). on_stopped is not called.
 */
void leader_elector_release(struct leader_elector *le, void (*done)(void *arg), void *arg);
void leader_elector_free(struct leader_elector *le);

/* "<hostname>_<uuid>", as kube-controller-manager and kube-scheduler name themselves. */
char *leader_election_identity(void);

#endif
