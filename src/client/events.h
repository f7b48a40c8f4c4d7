/*
 * events — core/v1 Events about API objects, written as client-go's
 * record.EventRecorder writes them (tools/record), so that `kubectl describe`
 * and `kubectl get events` show what they show upstream:
 *
 *   name "<object>.<hex unix nanoseconds>", in the object's namespace
 *   ("default" for cluster-scoped objects); source {component, host} and
 *   reportingController/reportingInstance from the recorder; count 1,
 *   firstTimestamp = lastTimestamp = now.
 *
 * The correlator in front of the API (record.EventCorrelator, its defaults):
 *   spam filter — per source, object and type, a token bucket of 25 events
 *     refilled one per 5 minutes; events beyond it are not sent (they are
 *     counted, and the next one sent carries the count);
 *   aggregator — from the 10th event with the same source, object, type and
 *     reason but a different message within 10 minutes, the message becomes
 *     "(combined from similar events): <message>" and they count as one;
 *   logger — an event identical to one already sent (same object, type,
 *     reason, message and source) is not created again: the existing Event
 *     is patched with count+1 and the new lastTimestamp ("x3 over 2m" in
 *     kubectl describe). A patch answered 404 (the Event expired) creates it
 *     afresh. The cache holds 4,096 keys; the least recently used goes.
 *
 * Each recorded event is also logged at the recorder's verbosity as
 * StartStructuredLogging does ("Event occurred" object=... reason=...).
 * A write the server answers with an error is logged and dropped
 * ("Server rejected event (will not retry!)"); one that gets no answer is
 * sent again, up to 12 tries 10 s apart (the first pause a random part of
 * that), as recordToSink does.
 *
 * Ownership: the recorder is the caller's and borrows the loop and the rest
 * client, which must outlive it; writes in flight are cancelled by event_recorder_free.
 * Threads: the loop's.
 */
#ifndef CUBE_CLIENT_EVENTS_H
#define CUBE_CLIENT_EVENTS_H

#include "client/rest.h"

#include <jansson.h>

/* The involvedObject of an event. Strings are borrowed for the call. */
struct event_ref {
	const char *api_version, *kind, *ns, *name, *uid; /* ns/uid may be NULL */
};

/* A reference to obj (its namespace, name and uid). */
struct event_ref event_ref_of(const json_t *obj, const char *api_version, const char *kind);

struct event_recorder;

/* component: source.component ("node-controller", "default-scheduler");
 * host: source.host / reportingInstance (may be NULL or ""). log_v: the
 * verbosity of the "Event occurred" line. */
struct event_recorder *event_recorder_new(struct loop *loop, struct rest_client *c,
					  const char *component, const char *host, int log_v);
void event_recorder_free(struct event_recorder *r);

/* type "Normal" or "Warning". */
void event_record(struct event_recorder *r, const struct event_ref *ref, const char *type,
		  const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
