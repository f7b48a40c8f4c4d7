#include "client/events.h"

#include "base/clock.h"
#include "base/hmap.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/strv.h"
#include "base/timeutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* record.EventCorrelator's defaults (tools/record/events_cache.go). */
#define CACHE_SIZE 4096
#define SPAM_BURST 25
#define SPAM_REFILL_NS (300 * NS_PER_SEC) /* qps 1/300 */
#define AGGREGATE_MAX 10
#define AGGREGATE_WINDOW_NS (600 * NS_PER_SEC)
#define AGGREGATE_PREFIX "(combined from similar events): "

/* An Event already sent: what a repeat patches. */
struct logged {
	char *ns, *name;
	char first[TIME_BUF];
	long count;
	int64_t used;    /* mono, for least-recently-used eviction */
	bool in_flight;  /* a write for it is under way: repeats wait for it */
	json_t *pending; /* the latest repeat not yet sent */
};

/* Similar events (same object, type, reason) inside the window. */
struct similar {
	struct strv messages;
	int64_t last; /* mono */
};

struct bucket {
	double tokens;
	int64_t refilled; /* mono */
};

struct write {
	struct write *prev, *next;
	struct event_recorder *r;
	struct rest_call *call;
	json_t *event; /* to create if a patch finds nothing */
	char *key;     /* the correlator's */
	char *what;    /* "namespace/name" of the Event, for the log */
	/* what to send again after a transport error (recordToSink's retries) */
	const char *method, *ct;
	char *path;
	json_t *body;
	int tries;
	struct timer *retry;
};

#define MAX_TRIES 12                  /* maxTriesPerEvent */
#define RETRY_NS (10 * NS_PER_SEC)    /* sleepDuration */

struct event_recorder {
	struct loop *loop;
	struct rest_client *c;
	char *component, *host;
	int log_v;
	struct hmap logged;  /* dedupe key -> struct logged */
	struct hmap similar; /* aggregate key -> struct similar */
	struct hmap spam;    /* source+object -> struct bucket */
	struct write *writes;
	int64_t last_stamp; /* names stay unique on a clock that stands still */
};

struct event_ref event_ref_of(const json_t *obj, const char *api_version, const char *kind)
{
	const json_t *md = json_object_get(obj, "metadata");
	return (struct event_ref){api_version, kind,
				  json_string_value(json_object_get(md, "namespace")),
				  json_string_value(json_object_get(md, "name")),
				  json_string_value(json_object_get(md, "uid"))};
}

struct event_recorder *event_recorder_new(struct loop *loop, struct rest_client *c,
					  const char *component, const char *host, int log_v)
{
	struct event_recorder *r = calloc(1, sizeof(*r));
	if (!r)
		abort();
	r->loop = loop;
	r->c = c;
	r->component = str_dup(component);
	r->host = str_dup(host ? host : "");
	r->log_v = log_v;
	return r;
}

static void logged_free(struct logged *l)
{
	json_decref(l->pending);
	free(l->ns);
	free(l->name);
	free(l);
}

static void write_free(struct write *w)
{
	struct event_recorder *r = w->r;
	if (w->prev)
		w->prev->next = w->next;
	else
		r->writes = w->next;
	if (w->next)
		w->next->prev = w->prev;
	json_decref(w->event);
	json_decref(w->body);
	timer_free(w->retry);
	free(w->key);
	free(w->what);
	free(w->path);
	free(w);
}

void event_recorder_free(struct event_recorder *r)
{
	const char *k;
	void *v;

	if (!r)
		return;
	while (r->writes) {
		rest_cancel(r->writes->call);
		write_free(r->writes);
	}
	for (size_t it = 0; hmap_next(&r->logged, &it, &k, &v);)
		logged_free(v);
	for (size_t it = 0; hmap_next(&r->similar, &it, &k, &v);) {
		strv_free(&((struct similar *)v)->messages);
		free(v);
	}
	for (size_t it = 0; hmap_next(&r->spam, &it, &k, &v);)
		free(v);
	hmap_free(&r->logged);
	hmap_free(&r->similar);
	hmap_free(&r->spam);
	free(r->component);
	free(r->host);
	free(r);
}

/* ---- the correlator ------------------------------------------------------------ */

static const char *s(const char *v)
{
	return v ? v : "";
}

/* EventSourceObjectSpamFilter: false when this object has used its burst. */
static bool spam_allows(struct event_recorder *r, const char *object_key)
{
	struct bucket *b = hmap_get(&r->spam, object_key);
	int64_t now = clock_mono();

	if (!b) {
		if (hmap_len(&r->spam) >= CACHE_SIZE) {
			const char *k;
			void *v;
			for (size_t it = 0; hmap_next(&r->spam, &it, &k, &v);)
				free(v);
			hmap_free(&r->spam);
		}
		if (!(b = calloc(1, sizeof(*b))))
			abort();
		b->tokens = SPAM_BURST;
		b->refilled = now;
		hmap_put(&r->spam, object_key, b);
	}
	b->tokens += (double)(now - b->refilled) / (double)SPAM_REFILL_NS;
	if (b->tokens > SPAM_BURST)
		b->tokens = SPAM_BURST;
	b->refilled = now;
	if (b->tokens < 1)
		return false;
	b->tokens -= 1;
	return true;
}

/* EventAggregator: true when the message is to be combined under the
 * aggregate key (the 10th distinct message within the window, and after). */
static bool aggregate(struct event_recorder *r, const char *agg_key, const char *msg)
{
	struct similar *sm = hmap_get(&r->similar, agg_key);
	int64_t now = clock_mono();

	if (sm && now - sm->last > AGGREGATE_WINDOW_NS) {
		strv_free(&sm->messages);
		sm->messages = (struct strv){0};
	}
	if (!sm) {
		if (hmap_len(&r->similar) >= CACHE_SIZE) {
			const char *k;
			void *v;
			for (size_t it = 0; hmap_next(&r->similar, &it, &k, &v);) {
				strv_free(&((struct similar *)v)->messages);
				free(v);
			}
			hmap_free(&r->similar);
		}
		if (!(sm = calloc(1, sizeof(*sm))))
			abort();
		hmap_put(&r->similar, agg_key, sm);
	}
	sm->last = now;
	strv_push_unique(&sm->messages, msg);
	return sm->messages.n >= AGGREGATE_MAX;
}

static void forget_oldest(struct event_recorder *r)
{
	const char *k, *oldest = NULL;
	void *v;
	int64_t best = 0;

	for (size_t it = 0; hmap_next(&r->logged, &it, &k, &v);)
		if (!oldest || ((struct logged *)v)->used < best)
			oldest = k, best = ((struct logged *)v)->used;
	if (oldest) {
		char *key = str_dup(oldest);
		logged_free(hmap_del(&r->logged, key));
		free(key);
	}
}

/* ---- writes ---------------------------------------------------------------------- */

static void create(struct event_recorder *r, json_t *event, const char *key);
static void bump(struct event_recorder *r, struct logged *l, json_t *event, const char *key);

/* The write for key is over: send the repeat that waited for it, if any. */
static void next_for(struct event_recorder *r, const char *key)
{
	struct logged *l = hmap_get(&r->logged, key);
	json_t *ev;

	if (!l)
		return;
	l->in_flight = false;
	if ((ev = l->pending)) {
		l->pending = NULL;
		bump(r, l, ev, key);
		json_decref(ev);
	}
}

static void on_written(void *arg, int status, json_t *body, const char *err);

static void send_write(struct write *w)
{
	w->call = rest_do_ct(w->r->c, w->method, w->path, w->ct, w->body, on_written, w);
}

static void on_retry(void *arg)
{
	send_write(arg);
}

static void on_written(void *arg, int status, json_t *body, const char *err)
{
	struct write *w = arg;
	struct event_recorder *r = w->r;

	w->call = NULL;
	if (status == 0) {
		/* Not an answer (the server is away): try again, the first time
		 * after a random part of the pause so that clients do not come
		 * back together. */
		if (++w->tries < MAX_TRIES) {
			if (!w->retry)
				w->retry = loop_timer(r->loop, on_retry, w);
			timer_after(w->retry, w->tries == 1
						      ? (int64_t)(rand_double() * (double)RETRY_NS)
						      : RETRY_NS);
			return;
		}
		LOG_ERROR("\"Unable to write event (retry limit exceeded!)\" event=\"%s\"",
			  s(w->what));
		status = -1; /* fall through to the end of this write */
	}
	if (status == 404 && w->event) {
		/* The Event we meant to bump is gone (its TTL): create it anew. */
		json_t *ev = json_incref(w->event);
		char *key = str_dup(w->key);
		write_free(w);
		json_object_del(json_object_get(ev, "metadata"), "resourceVersion");
		create(r, ev, key);
		json_decref(ev);
		free(key);
		return;
	}
	if (status > 0 && status != 200 && status != 201) {
		char q[1024];
		log_quote(q, sizeof(q), status ? s(json_string_value(json_object_get(body,
										 "message")))
					       : s(err));
		LOG_ERROR("\"Server rejected event (will not retry!)\" err=\"%s\" event=\"%s\"", q,
			  s(w->what));
	}
	{
		char *key = str_dup(w->key);
		write_free(w);
		next_for(r, key);
		free(key);
	}
}

static struct write *start(struct event_recorder *r, const char *key, const char *ns,
			   const char *name)
{
	struct write *w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->r = r;
	w->key = str_dup(key);
	w->what = str_printf("%s/%s", s(ns), s(name));
	w->next = r->writes;
	if (r->writes)
		r->writes->prev = w;
	r->writes = w;
	return w;
}

static void create(struct event_recorder *r, json_t *event, const char *key)
{
	const char *ns = json_string_value(json_object_get(json_object_get(event, "metadata"),
							   "namespace"));
	char path[512];
	struct write *w = start(r, key, ns,
				json_string_value(json_object_get(json_object_get(event, "metadata"),
								  "name")));

	struct logged *l = hmap_get(&r->logged, key);

	if (l)
		l->in_flight = true;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", s(ns));
	w->method = "POST";
	w->path = str_dup(path);
	w->body = json_incref(event);
	send_write(w);
}

static void bump(struct event_recorder *r, struct logged *l, json_t *event, const char *key)
{
	char path[768];
	json_t *patch;
	struct write *w;

	if (l->in_flight) { /* one write per Event at a time, as the broadcaster */
		json_decref(l->pending);
		l->pending = json_incref(event);
		return;
	}
	l->in_flight = true;
	patch = json_pack("{s:I,s:O,s:O}", "count", (json_int_t)l->count, "lastTimestamp",
				  json_object_get(event, "lastTimestamp"), "message",
				  json_object_get(event, "message"));
	w = start(r, key, l->ns, l->name);

	json_object_set_new(event, "count", json_integer(l->count));
	json_object_set_new(event, "firstTimestamp", json_string(l->first));
	json_object_set_new(json_object_get(event, "metadata"), "name", json_string(l->name));
	w->event = json_incref(event);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events/%s", l->ns, l->name);
	w->method = "PATCH";
	w->ct = "application/strategic-merge-patch+json";
	w->path = str_dup(path);
	w->body = patch;
	send_write(w);
}

/* ---- recording -------------------------------------------------------------------- */

static json_t *make_event(struct event_recorder *r, const struct event_ref *ref, const char *ns,
			  const char *type, const char *reason, const char *msg, const char *now)
{
	char name[512];
	json_t *inv = json_pack("{s:s,s:s,s:s}", "kind", s(ref->kind), "name", s(ref->name),
				"apiVersion", s(ref->api_version));

	if (ref->ns && *ref->ns)
		json_object_set_new(inv, "namespace", json_string(ref->ns));
	if (ref->uid && *ref->uid)
		json_object_set_new(inv, "uid", json_string(ref->uid));
	r->last_stamp = clock_now() > r->last_stamp ? clock_now() : r->last_stamp + 1;
	snprintf(name, sizeof(name), "%s.%llx", s(ref->name), (unsigned long long)r->last_stamp);
	return json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:{s:s,s:s}}",
			 "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace",
			 ns, "involvedObject", inv, "reason", reason, "message", msg, "type", type,
			 "firstTimestamp", now, "lastTimestamp", now, "count", 1,
			 "reportingComponent", r->component, "reportingInstance", r->host,
			 "source", "component", r->component, "host", r->host);
}

void event_record(struct event_recorder *r, const struct event_ref *ref, const char *type,
		  const char *reason, const char *fmt, ...)
{
	const char *ns = ref->ns && *ref->ns ? ref->ns : "default";
	char msg[1100], now[TIME_BUF], object[1024], agg[1400], key[2600], spam[1100];
	struct logged *l;
	bool fresh;
	json_t *event;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!r)
		return;
	{
		/* StartStructuredLogging sees the event as recorded. */
		char q[1200];
		log_quote(q, sizeof(q), msg);
		LOG_V(r->log_v,
		      "\"Event occurred\" object=\"%s%s%s\" fieldPath=\"\" kind=\"%s\" apiVersion=\"%s\" "
		      "type=\"%s\" reason=\"%s\" message=\"%s\"",
		      s(ref->ns), ref->ns && *ref->ns ? "/" : "", s(ref->name), s(ref->kind),
		      s(ref->api_version), type, reason, q);
	}
	snprintf(object, sizeof(object), "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", r->component,
		 r->host, s(ref->kind), s(ref->ns), s(ref->name), s(ref->uid), s(ref->api_version));
	/* EventCorrelate: aggregate, observe (the cache counts every
	 * occurrence), then the spam filter decides whether anything is sent. */
	snprintf(agg, sizeof(agg), "%s\x1f%s\x1f%s", object, type, reason);
	if (aggregate(r, agg, msg)) {
		char combined[1200];
		snprintf(combined, sizeof(combined), AGGREGATE_PREFIX "%s", msg);
		snprintf(msg, sizeof(msg), "%s", combined);
		snprintf(key, sizeof(key), "%s", agg); /* one event for all of them */
	} else {
		snprintf(key, sizeof(key), "%s\x1f%s", agg, msg);
	}
	time_format_rfc3339(clock_now(), now);
	event = make_event(r, ref, ns, type, reason, msg, now);
	if ((l = hmap_get(&r->logged, key))) {
		l->count++;
		l->used = clock_mono();
		fresh = false;
	} else {
		if (hmap_len(&r->logged) >= CACHE_SIZE)
			forget_oldest(r);
		if (!(l = calloc(1, sizeof(*l))))
			abort();
		l->ns = str_dup(ns);
		l->name = str_dup(json_string_value(
			json_object_get(json_object_get(event, "metadata"), "name")));
		snprintf(l->first, sizeof(l->first), "%s", now);
		l->count = 1;
		l->used = clock_mono();
		hmap_put(&r->logged, key, l);
		fresh = true;
	}
	/* getSpamKey: source, object and type. */
	snprintf(spam, sizeof(spam), "%s\x1f%s", object, type);
	if (spam_allows(r, spam)) {
		if (fresh)
			create(r, event, key);
		else
			bump(r, l, event, key);
	}
	json_decref(event);
}
