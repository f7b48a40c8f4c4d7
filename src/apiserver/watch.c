/*
 * Watch streams (kubectl-wire.md §4): a chunked 200 reply carrying one JSON
 * event per line. No resourceVersion (or "0", or sendInitialEvents=true)
 * starts with a synthetic ADDED for every matching committed object, and —
 * with allowWatchBookmarks, as 1.32's watch-list — a bookmark annotated
 * k8s.io/initial-events-end; a resourceVersion resumes from the cache's
 * window, or ends with an ERROR event carrying 410 Expired when it is too
 * old; a malformed one is 400 (read.c's rv_parse). Objects moving in or out
 * of the selectors arrive as ADDED or DELETED. Tables are honoured per
 * event. Bookmarks, only when asked for, carry the committed revision —
 * every event up to it already sent — every minute, or 2 s before
 * timeoutSeconds ends the stream.
 *
 * A watcher that stops reading is closed, not buffered without bound: when
 * a live event finds more than WATCH_MAX_UNSENT bytes still unsent (or, for
 * a stream that began with a larger replay of the list, more than that
 * replay), the stream ends — cleanly, as upstream's cacheWatcher ends a
 * watcher that blocks its dispatch ("Forcing ... watcher close due to
 * unresponsiveness"), and the client's informer relists and watches again.
 */
#include "apiserver/objects.h"

#include "api/printers.h"
#include "api/selector.h"
#include "api/status.h"

#include "base/blob.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Upstream's watchers hold 10 to 1000 events and get 100 ms of grace; bytes
 * are what cost memory here: a few hundred ordinary events, or five of the
 * largest objects. */
#define WATCH_MAX_UNSENT ((size_t)8 << 20)
/* Upstream's defaultBookmarkFrequency, and the annotation of the bookmark
 * that ends a watch-list's initial events. */
#define BOOKMARK_EVERY_NS (60 * NS_PER_SEC)
#define INITIAL_EVENTS_END "k8s.io/initial-events-end"
/* How long the end of a closed stream may wait for a reader that is gone. */
#define WATCH_DRAIN_TIMEOUT_S 60

struct watch_stream {
	struct apiserver *s;
	struct req *r;
	struct cache_watch *cw;
	struct selectors sel;
	size_t replayed; /* bytes of the initial replay, allowed to be unsent */
	bool starting;   /* replaying the list or the window: never too slow */
	struct timer *timeout, *bookmark;
	int64_t deadline; /* clock_mono() when timeoutSeconds ends it; 0: none */
	bool columns_sent, bookmarks, closed;
	struct watch_stream *prev, *next;
};

static void stream_unlink(struct watch_stream *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		w->s->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
}

static void stream_free(struct watch_stream *w)
{
	cache_unwatch(w->cw);
	timer_free(w->timeout);
	timer_free(w->bookmark);
	free_selectors(&w->sel);
	stream_unlink(w);
	w->r->code = 200;
	req_reply(w->r, 200, NULL); /* counts the request; the reply already went */
	free(w);
}

static void send_event(struct watch_stream *w, const char *type, json_t *obj)
{
	json_t *ev = json_pack("{s:s,s:o}", "type", type, "object", obj);
	char *text = json_dumps(ev, JSON_COMPACT);
	size_t n = strlen(text);

	text[n] = '\n'; /* the terminator goes: the event is its line */
	req_stream_send(w->r, text, n + 1);
	free(text);
	json_decref(ev);
}

/* An event of the cache as JSON: its object is the text the cache made
 * of it once, shared by every watcher. */
static void send_cached(struct watch_stream *w, const char *type, const struct cache_event *ev)
{
	struct blob *json = ev->json ? blob_ref(ev->json) : cache_json(w->s->cache, ev->key, ev->obj);
	struct evbuffer *line = evbuffer_new();

	evbuffer_add_printf(line, "{\"type\":\"%s\",\"object\":", type);
	blob_to_evbuffer(json, line);
	evbuffer_add(line, "}\n", 2);
	req_stream_send_buffer(w->r, line);
	evbuffer_free(line);
	blob_unref(json);
}

/* What the connection has not managed to send yet. */
static size_t unsent(const struct watch_stream *w)
{
	return req_stream_unsent(w->r);
}

static void end_stream(struct watch_stream *w, int drain_s);

/* A reader too slow for its events: end the stream (see the top). */
static bool too_slow(struct watch_stream *w)
{
	size_t n = unsent(w),
	       limit = w->replayed > WATCH_MAX_UNSENT ? w->replayed : WATCH_MAX_UNSENT;
	char *prefix;
	if (w->starting || n <= limit)
		return false;
	prefix = prefix_key(w->r->res, w->r->ns);
	LOG_V(1,
	      "Forcing %s watcher close due to unresponsiveness: key: \"%s\", labels: \"%s\", "
	      "fields: \"%s\". unsent = %zu bytes, limit = %zu bytes, graceful = false",
	      w->r->res->plural, prefix, req_query(w->r, "labelSelector") ?: "",
	      req_query(w->r, "fieldSelector") ?: "", n, limit);
	free(prefix);
	end_stream(w, WATCH_DRAIN_TIMEOUT_S);
	return true;
}

static json_t *as_wire(struct watch_stream *w, const json_t *obj)
{
	json_t *items, *t;
	if (!w->r->want_table)
		return json_incref((json_t *)obj);
	items = json_pack("[O]", obj);
	t = printers_table(w->r->res->kind, items, jx_str(obj, "metadata.resourceVersion"), NULL,
	                   w->r->include, !w->columns_sent, clock_now());
	w->columns_sent = true;
	json_decref(items);
	return t;
}

static void on_event(void *arg, const struct cache_event *ev)
{
	struct watch_stream *w = arg;
	bool now_in, was_in;
	const char *type;

	if (w->closed)
		return;
	if (ev->type == CACHE_DELETED) {
		now_in = false;
		was_in = selectors_match(&w->sel, ev->prev ? ev->prev : ev->obj);
	} else {
		now_in = selectors_match(&w->sel, ev->obj);
		was_in = ev->prev && selectors_match(&w->sel, ev->prev);
	}
	if (now_in && was_in)
		type = "MODIFIED";
	else if (now_in)
		type = "ADDED";
	else if (was_in)
		type = "DELETED";
	else
		return;
	if (too_slow(w))
		return;
	if (w->r->want_table)
		send_event(w, type, as_wire(w, ev->obj));
	else
		send_cached(w, type, ev);
}

/* The client went away (the transport has ended its side). */
static void on_gone(void *arg)
{
	struct watch_stream *w = arg;
	w->closed = true;
	stream_free(w);
}

static void end_stream(struct watch_stream *w, int drain_s)
{
	req_stream_end(w->r, drain_s);
	w->closed = true;
	stream_free(w);
}

static void on_timeout(void *arg)
{
	end_stream(arg, 0);
}

/*
 * A bookmark carries the committed revision: every event up to it has been
 * dispatched to this stream already, so none still to come is older.
 */
static void send_bookmark(struct watch_stream *w, bool initial_events_end)
{
	char rv[24], api[96];
	json_t *obj;

	snprintf(rv, sizeof(rv), "%" PRId64, cache_committed_rev(w->s->cache));
	obj = json_pack("{s:s,s:s,s:{s:s}}", "kind", w->r->res->kind, "apiVersion",
	                resource_api_version(w->r->res, api, sizeof(api)), "metadata",
	                "resourceVersion", rv);
	if (initial_events_end)
		jx_set(obj, "metadata.annotations", json_pack("{s:s}", INITIAL_EVENTS_END, "true"));
	send_event(w, "BOOKMARK", obj);
}

/* Every minute, and 2 s before the stream's deadline if that is sooner, as
 * upstream's cacheWatcher.nextBookmarkTime. */
static void schedule_bookmark(struct watch_stream *w)
{
	int64_t now = clock_mono(), next = now + BOOKMARK_EVERY_NS;

	if (w->deadline && w->deadline - 2 * NS_PER_SEC < next)
		next = w->deadline - 2 * NS_PER_SEC;
	if (next > now)
		timer_after(w->bookmark, next - now);
}

static void on_bookmark(void *arg)
{
	struct watch_stream *w = arg;
	send_bookmark(w, false);
	schedule_bookmark(w);
}

void watch_serve(struct req *r)
{
	const char *rv_s = req_query(r, "resourceVersion"), *to = req_query(r, "timeoutSeconds");
	const char *initial = req_query(r, "sendInitialEvents");
	struct watch_stream *w;
	int64_t from, rv;
	char *prefix, *key;

	if (authz_request(r, NULL) < 0 || check_list_watch_options(r, true) < 0 ||
	    rv_parse(r, rv_s, &rv) < 0)
		return;
	w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	if (parse_selectors(r, &w->sel) < 0) {
		free(w);
		return;
	}
	w->s = r->s;
	w->r = r;
	w->bookmarks = query_bool(r, "allowWatchBookmarks");
	w->next = r->s->watches;
	if (w->next)
		w->next->prev = w;
	r->s->watches = w;

	r->on_gone = on_gone;
	r->on_gone_arg = w;
	req_stream_start(r, "application/json");

	prefix = prefix_key(r->res, r->ns);
	key = selectors_key(r, &w->sel); /* the watcher is indexed by it */
	w->starting = true;
	if (initial && !strcmp(initial, "false")) {
		/* No initial events asked for: from now on. */
		from = rv ? rv : cache_committed_rev(r->s->cache);
	} else if (rv == 0 || (initial && !strcmp(initial, "true"))) {
		/* The synthetic ADDED events kubectl's get -w expects first: the
		 * committed state, then what commits after it. */
		/* One object's watcher (a kubelet's Node, its CSR) looks it up. */
		json_t *one = key ? cache_get_committed(r->s->cache, key) : NULL, **listed = NULL;
		size_t n = key ? one != NULL
		               : cache_list_committed(r->s->cache, prefix, NULL, 0, &listed, NULL);
		json_t **objs = key ? &one : listed;

		for (size_t i = 0; i < n; i++) {
			struct cache_event ev = {.type = CACHE_ADDED, .obj = objs[i]};
			if (!selectors_match(&w->sel, objs[i]))
				continue;
			if (r->want_table) {
				send_event(w, "ADDED", as_wire(w, objs[i]));
				continue;
			}
			ev.key = object_key(r->res, jx_str(objs[i], "metadata.namespace"),
			                    jx_str(objs[i], "metadata.name"));
			send_cached(w, "ADDED", &ev);
			free((char *)ev.key);
		}
		free(listed);
		from = cache_committed_rev(r->s->cache);
		/* A watch-list (1.32 makes every watch from "" or "0" one) marks
		 * the end of its initial events for clients that take bookmarks. */
		if (w->bookmarks && (!initial || !strcmp(initial, "true")))
			send_bookmark(w, true);
	} else {
		from = rv;
	}
	{
		const char *node =
		    w->sel.fields ? field_selector_exact(w->sel.fields, "spec.nodeName") : NULL;
		w->cw = key    ? cache_watch_key(r->s->cache, prefix, from, key, on_event, w)
		        : node ? cache_watch_node(r->s->cache, prefix, from, node, on_event, w)
		               : cache_watch(r->s->cache, prefix, from, on_event, w);
	}
	free(prefix);
	free(key);
	w->starting = false;
	w->replayed = unsent(w);
	if (!w->cw) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", err_msg());
		send_event(w, "ERROR", status_failure(ERR_GONE, msg, NULL, NULL, NULL));
		end_stream(w, 0);
		return;
	}
	if (to && strtoll(to, NULL, 10) > 0) {
		w->timeout = loop_timer(r->s->loop, on_timeout, w);
		timer_after(w->timeout, strtoll(to, NULL, 10) * NS_PER_SEC);
		w->deadline = clock_mono() + strtoll(to, NULL, 10) * NS_PER_SEC;
	}
	if (w->bookmarks) {
		w->bookmark = loop_timer(r->s->loop, on_bookmark, w);
		schedule_bookmark(w);
	}
}

void watch_close_all(struct apiserver *s)
{
	while (s->watches)
		end_stream(s->watches, 0);
}
