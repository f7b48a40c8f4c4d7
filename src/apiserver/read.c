/*
 * read — GET and LIST with upstream's resourceVersion semantics, served from
 * the cache's committed view (storage/cache.h): nothing a client reads is
 * not yet durable.
 *
 *   resourceVersion unset or "0": the latest committed state ("0" ignores
 *     limit, as the watch cache does).
 *   resourceVersion=N (NotOlderThan): the latest, once it is at least N;
 *     the request waits up to 3 s for N to commit, then 504 `Timeout: Too
 *     large resource version: N, current: M` with the ResourceVersionTooLarge
 *     cause and Retry-After: 1 (the watch cache's waitUntilFreshAndBlock).
 *   resourceVersionMatch=Exact, or N with a limit (the legacy exact read):
 *     the state at N, from the cache's event window; older than the window
 *     410 Expired "The resourceVersion for the provided list is too old.".
 *   continue: upstream's token, base64url (no padding) of
 *     {"v":"meta.k8s.io/v1","rv":R,"start":"<last key after the prefix>\u0000"}:
 *     every page is read at the first page's revision R, one snapshot; when
 *     R has left the window, 410 Expired with the long "inconsistent list"
 *     text and a token with rv -1 in metadata.continue, which continues at
 *     the latest revision.
 *   A resourceVersion that is not a decimal revision: 400 `invalid resource
 *     version: resourceVersion: Invalid value: "x": strconv.ParseUint: ...`
 *     — the text upstream's etcd path answers (its watch-cache path answers
 *     the same text as a 500, which upstream reports as a bug).
 *   ListOptions validation: 422 `ListOptions.meta.k8s.io "" is invalid: ...`.
 *
 * Threads: the API server's loop thread.
 */
#include "apiserver/objects.h"

#include "base/alloc.h"

#include "api/printers.h"
#include "api/status.h"
#include "base/blob.h"
#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/sbuf.h"

#include <event2/buffer.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The watch cache's blockTimeout and resourceVersionTooHighRetrySeconds. */
#define RV_WAIT_S 3
#define RV_RETRY_AFTER_S 1

/* ---- resourceVersion ------------------------------------------------------ */

int rv_parse(struct req *r, const char *s, int64_t *out)
{
	const char *why = NULL;
	char msg[512];
	uint64_t v = 0;

	*out = 0;
	if (!s || !*s)
		return 0;
	for (const char *p = s; *p && !why; p++) {
		if (*p < '0' || *p > '9')
			why = "invalid syntax";
		else if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			why = "value out of range";
		else
			v = v * 10 + (uint64_t)(*p - '0');
	}
	if (!why && v > INT64_MAX)
		v = INT64_MAX; /* no revision gets there: "too large" */
	if (why) {
		snprintf(msg, sizeof(msg),
		         "invalid resource version: resourceVersion: Invalid value: \"%s\": "
		         "strconv.ParseUint: parsing \"%s\": %s",
		         s, s, why);
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	}
	*out = (int64_t)v;
	return 0;
}

void reply_too_large(struct req *r, int64_t rv, int64_t current, int retry_s)
{
	char msg[160];
	json_t *st;

	snprintf(msg, sizeof(msg),
	         "Timeout: Too large resource version: %" PRId64 ", current: %" PRId64, rv,
	         current);
	st = status_failure(ERR_TIMEOUT, msg, NULL, NULL, NULL);
	status_add_cause(st, "ResourceVersionTooLarge", "Too large resource version", NULL);
	if (retry_s) {
		jx_set(st, "details.retryAfterSeconds", json_integer(retry_s));
		char v[16];
		snprintf(v, sizeof(v), "%d", retry_s);
		req_set_header(r, "Retry-After", v);
	}
	req_fail_status(r, st);
}

/* ---- waiting for a revision to commit -------------------------------------- */

struct rv_wait {
	struct apiserver *s;
	struct req *r;
	int64_t rv;
	void (*resume)(struct req *r);
	struct timer *timer;
	struct rv_wait *prev, *next;
};

static void wait_unlink(struct rv_wait *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		w->s->rv_waits = w->next;
	if (w->next)
		w->next->prev = w->prev;
	timer_free(w->timer);
}

static void on_wait_timeout(void *arg)
{
	struct rv_wait *w = arg;
	int64_t now = cache_committed_rev(w->s->cache);

	wait_unlink(w);
	/* A commit the wait was not told of still counts. */
	if (w->rv <= now)
		w->resume(w->r);
	else
		reply_too_large(w->r, w->rv, now, RV_RETRY_AFTER_S);
	free(w);
}

/* Hold r until revision rv is committed (resume then runs it again), or
 * answer 504 after RV_WAIT_S. */
static void wait_for_rv(struct req *r, int64_t rv, void (*resume)(struct req *r))
{
	struct rv_wait *w = calloc(1, sizeof(*w));

	if (!w)
		abort();
	w->s = r->s;
	w->r = r;
	w->rv = rv;
	w->resume = resume;
	w->timer = loop_timer(r->s->loop, on_wait_timeout, w);
	timer_after(w->timer, (int64_t)RV_WAIT_S * NS_PER_SEC);
	w->next = r->s->rv_waits;
	if (w->next)
		w->next->prev = w;
	r->s->rv_waits = w;
}

void rv_waits_committed(struct apiserver *s)
{
	int64_t now = cache_committed_rev(s->cache);
	struct rv_wait *w = s->rv_waits, *next;

	for (; w; w = next) {
		next = w->next;
		if (w->rv > now)
			continue;
		wait_unlink(w);
		w->resume(w->r);
		free(w);
		next = s->rv_waits; /* resume may have changed the list: start over */
	}
}

void rv_waits_cancel(struct apiserver *s)
{
	while (s->rv_waits) {
		struct rv_wait *w = s->rv_waits;
		wait_unlink(w);
		req_fail(w->r, ERR_UNAVAILABLE, "apiserver is shutting down");
		free(w);
	}
}

/* ---- consistent reads on a shared store ------------------------------------------ */

struct fresh_read {
	struct req *r;
	void (*resume)(struct req *r);
};

static void on_current_rev(void *arg, int err, int64_t rev)
{
	struct fresh_read *f = arg;
	struct req *r = f->r;
	void (*resume)(struct req *r) = f->resume;

	free(f);
	if (r->s->closing)
		req_fail(r, ERR_UNAVAILABLE, "apiserver is shutting down");
	else if (err)
		reply_storage_error(r, err_msg());
	else if (rev > cache_committed_rev(r->s->cache))
		wait_for_rv(r, rev, resume);
	else
		resume(r);
}

/*
 * A read with no resourceVersion is the latest state. On a shared store
 * another API server may have written since this cache last heard: learn
 * the store's revision (a quorum read) and serve once the cache has it, as
 * upstream's consistent reads from the watch cache do. true when it took r
 * over (resume serves it).
 */
/* Ask the store its revision; resume(r) once the cache has it. */
static void catch_up(struct req *r, void (*resume)(struct req *r))
{
	struct fresh_read *f = calloc(1, sizeof(*f));

	if (!f)
		abort();
	f->r = r;
	f->resume = resume;
	store_current_rev(cache_store(r->s->cache), on_current_rev, f);
}

static bool read_fresh(struct req *r, const char *rv, void (*resume)(struct req *r))
{
	if ((rv && *rv) || !cache_remote(r->s->cache))
		return false;
	catch_up(r, resume);
	return true;
}

/*
 * A write refused on what this cache holds (not found, already exists, a
 * stale resourceVersion) may be refused on a cache behind the store: another
 * server wrote since. Bring the cache up to the store's revision and serve r
 * again, once, as upstream's GuaranteedUpdate reads the current state from
 * etcd before it gives such an answer. true when it took r over.
 */
static void serve_again(struct req *r)
{
	handle_resource_again(r);
}

bool refresh_and_retry(struct req *r)
{
	if (!cache_remote(r->s->cache) || r->refreshed || r->gone || r->s->closing ||
	    is(r->verb, "get") || is(r->verb, "list") || is(r->verb, "watch"))
		return false;
	r->refreshed = true;
	catch_up(r, serve_again);
	return true;
}

/* ---- GET ------------------------------------------------------------------- */

/* What authorizing a read of key needs of the object: itself where the
 * authorizer looks into it, else nothing (a cold object stays text). */
static const json_t *object_for_authz(struct req *r, const char *key)
{
	return authz_reads_object(r) ? cache_get_committed(r->s->cache, key) : NULL;
}

/* The committed object, authorized (again, after a wait: it may not be
 * the one seen before) unless the caller just did. A plain JSON reply is
 * the stored text, sent without parsing the object. */
static void get_reply(struct req *r, bool authorize)
{
	char *key = object_key(r->res, r->ns, r->name);
	bool as_text = !is_scale(r) && !(r->want_table && !r->sub);
	struct blob *text = NULL;
	json_t *obj = NULL;

	if (authorize && authz_request(r, object_for_authz(r, key)) < 0)
		goto out;
	if (as_text)
		text = cache_text(r->s->cache, key);
	else
		obj = cache_get_committed(r->s->cache, key);
	if (!text && !obj)
		req_not_found(r);
	else if (text)
		req_reply_json(r, 200, text);
	else if (is_scale(r))
		req_reply(r, 200, scale_of(obj));
	else
		reply_cached(r, 200, obj);
out:
	blob_unref(text);
	free(key);
}

static void get_after_wait(struct req *r)
{
	get_reply(r, true);
}

void handle_get(struct req *r)
{
	char *key = object_key(r->res, r->ns, r->name);
	const json_t *obj = object_for_authz(r, key);
	int64_t rv;

	free(key);
	/* Authorize first: a 404 must not tell the forbidden what exists. */
	if (authz_request(r, obj) < 0 || rv_parse(r, req_query(r, "resourceVersion"), &rv) < 0)
		return;
	if (rv > cache_committed_rev(r->s->cache)) {
		wait_for_rv(r, rv, get_after_wait);
		return;
	}
	if (read_fresh(r, req_query(r, "resourceVersion"), get_after_wait))
		return;
	get_reply(r, false);
}

/* ---- continue tokens --------------------------------------------------------- */

#define CONTINUE_INVALID "continue key is not valid"

static char *encode_continue(int64_t rv, const char *key, const char *prefix)
{
	size_t plen = strlen(prefix);
	struct sbuf start = SBUF_INIT;
	json_t *tok;
	char *text, *out;

	/* The last key returned, after the prefix, and a NUL: the next page
	 * starts at the first key after it. */
	sbuf_add(&start, strncmp(key, prefix, plen) ? key : key + plen);
	tok = json_pack("{s:s,s:I,s:s%}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv, "start",
	                start.s, start.len + 1);
	text = json_dumps(tok, JSON_COMPACT);
	out = b64url_encode(text, strlen(text));
	free(text);
	json_decref(tok);
	sbuf_free(&start);
	return out;
}

/* Go's base64.RawURLEncoding: where the first bad byte is. */
static size_t b64url_bad_at(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return i;
	}
	return n - 1; /* a length no quantum ends at */
}

/* path.Clean(p) == p, for p starting with '/'. */
static bool path_clean(const char *p)
{
	size_t n = strlen(p);

	if (n > 1 && p[n - 1] == '/')
		return false;
	for (const char *s = p; *s; s++) {
		if (*s != '/')
			continue;
		const char *e = s + 1;
		if (*e == '/')
			return false;
		if (e[0] == '.' && (e[1] == '/' || !e[1]))
			return false;
		if (e[0] == '.' && e[1] == '.' && (e[2] == '/' || !e[2]))
			return false;
	}
	return true;
}

struct continuation {
	int64_t rv;     /* -1: at the latest revision */
	char *start;    /* the first key to consider */
	bool inclusive; /* the start key itself too (a token without the NUL) */
};

/* 0, or a 400 has been sent. */
static int decode_continue(struct req *r, const char *tok, const char *prefix,
                           struct continuation *c)
{
	char why[512] = "";
	unsigned char *raw;
	json_t *doc = NULL;
	json_error_t e;
	size_t len;

	memset(c, 0, sizeof(*c));
	if (!(raw = b64url_decode(tok, strlen(tok), &len))) {
		snprintf(why, sizeof(why), "illegal base64 data at input byte %zu",
		         b64url_bad_at(tok));
		goto bad;
	}
	doc = json_loadb((const char *)raw, len, JSON_ALLOW_NUL, &e);
	free(raw);
	if (!doc || !json_is_object(doc)) {
		snprintf(why, sizeof(why), "%s",
		         doc ? "json: cannot unmarshal into continueToken" : e.text);
		goto bad;
	}
	const char *v = json_string_value(json_object_get(doc, "v"));
	json_t *start = json_object_get(doc, "start");
	if (!v || strcmp(v, "meta.k8s.io/v1")) {
		snprintf(why, sizeof(why), "server does not recognize this encoded version %s",
		         v ? v : "");
		goto bad;
	}
	c->rv = json_integer_value(json_object_get(doc, "rv"));
	if (!c->rv) {
		snprintf(why, sizeof(why),
		         "incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
		goto bad;
	}
	if (!json_string_length(start)) {
		snprintf(why, sizeof(why), "encoded start key empty (version meta.k8s.io/v1)");
		goto bad;
	}
	{
		struct sbuf k = SBUF_INIT;
		const char *s = json_string_value(start);
		size_t n = json_string_length(start);
		/* A start ending in NUL: the keys after the rest. */
		c->inclusive = s[n - 1] != '\0';
		if (!c->inclusive)
			n--;
		if (memchr(s, '\0', n)) {
			snprintf(why, sizeof(why), "%.*s", (int)n, s);
			goto bad;
		}
		if (s[0] != '/')
			sbuf_addc(&k, '/');
		sbuf_addn(&k, s, n);
		if (!path_clean(k.s)) {
			snprintf(why, sizeof(why), "%s", s);
			sbuf_free(&k);
			goto bad;
		}
		c->start = str_printf("%s%s", prefix, k.s + 1);
		sbuf_free(&k);
	}
	json_decref(doc);
	return 0;
bad:
	json_decref(doc);
	{
		char msg[700];
		snprintf(msg, sizeof(msg), "invalid continue token: " CONTINUE_INVALID ": %s", why);
		req_fail(r, ERR_INVALID, msg);
	}
	return ERR_INVALID;
}

/* The 410 of a continuation whose snapshot has left the window. */
static void reply_continue_expired(struct req *r, const char *start, const char *prefix)
{
	json_t *st = status_failure(
	    ERR_GONE,
	    "The provided continue parameter is too old to display a consistent list result. "
	    "You can start a new list without the continue parameter, or use the continue "
	    "token in this response to retrieve the remainder of the results. Continuing with "
	    "the provided token results in an inconsistent list - objects that were created, "
	    "modified, or deleted between the time the first chunk was returned and now may "
	    "show up in the list.",
	    NULL, NULL, NULL);
	char *tok = encode_continue(-1, start, prefix);

	/* The same start, as a next-page token writes it (the key and a NUL). */
	json_object_set_new(json_object_get(st, "metadata"), "continue", json_string(tok));
	free(tok);
	req_fail_status(r, st);
}

/* ---- LIST ------------------------------------------------------------------ */

/* A watch's ListOptions (upstream's validateWatchOptions; the WatchList
 * feature is on, as in 1.32). */
static void check_watch_options(struct validation *v, const char *rvm, const char *cont,
                                const char *initial)
{
	static const char *const matches[] = {"NotOlderThan", NULL};

	if (initial && !is(rvm, "NotOlderThan"))
		val_forbidden(v, "resourceVersionMatch",
		              "sendInitialEvents requires setting resourceVersionMatch to "
		              "NotOlderThan");
	if (!rvm || !*rvm)
		return;
	if (!initial)
		val_forbidden(v, "resourceVersionMatch",
		              "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
		              "is provided");
	if (!is(rvm, "NotOlderThan"))
		val_unsupported(v, "resourceVersionMatch", rvm, matches);
	if (cont && *cont)
		val_forbidden(v, "resourceVersionMatch",
		              "resourceVersionMatch is forbidden when continue is provided");
}

/* A list's ListOptions (upstream's ValidateListOptions). */
static void check_list_options(struct validation *v, const char *rv, const char *rvm,
                               const char *cont, const char *initial)
{
	static const char *const matches[] = {"Exact", "NotOlderThan", "", NULL};

	if (rvm && *rvm) {
		if (!rv || !*rv)
			val_forbidden(v, "resourceVersionMatch",
			              "resourceVersionMatch is forbidden unless resourceVersion is "
			              "provided");
		if (cont && *cont)
			val_forbidden(v, "resourceVersionMatch",
			              "resourceVersionMatch is forbidden when continue is provided");
		if (strcmp(rvm, "Exact") && strcmp(rvm, "NotOlderThan"))
			val_unsupported(v, "resourceVersionMatch", rvm, matches);
		if (!strcmp(rvm, "Exact") && rv && !strcmp(rv, "0"))
			val_forbidden(v, "resourceVersionMatch",
			              "resourceVersionMatch \"exact\" is forbidden for resourceVersion "
			              "\"0\"");
	}
	if (initial)
		val_forbidden(v, "sendInitialEvents", "sendInitialEvents is forbidden for list");
}

int check_list_watch_options(struct req *r, bool watch)
{
	const char *rv = req_query(r, "resourceVersion"), *rvm = req_query(r, "resourceVersionMatch");
	const char *cont = req_query(r, "continue"), *initial = req_query(r, "sendInitialEvents");
	struct validation v;
	json_t *st;
	char *msg;

	val_init(&v);
	if (watch)
		check_watch_options(&v, rvm, cont, initial);
	else
		check_list_options(&v, rv, rvm, cont, initial);
	if (val_ok(&v)) {
		val_free(&v);
		return 0;
	}
	msg = val_message(&v, "ListOptions.meta.k8s.io", "");
	st = status_failure(ERR_UNPROCESSABLE, msg, "meta.k8s.io", "ListOptions", "");
	json_object_set(json_object_get(st, "details"), "causes", v.causes);
	free(msg);
	val_free(&v);
	req_fail_status(r, st);
	return ERR_UNPROCESSABLE;
}

/*
 * A list as JSON from the objects' stored text: only the envelope is
 * written here, each item is the cache's bytes. The same fields, in the
 * same order, as the object the Table path builds. list_head starts it,
 * list_reply ends and sends it.
 */
static struct evbuffer *list_head(struct req *r, const char *rv, const char *tok, bool count,
                                  size_t remaining)
{
	struct evbuffer *out = evbuffer_new();
	char api[96];

	evbuffer_add_printf(out,
	                    "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":{"
	                    "\"resourceVersion\":\"%s\"",
	                    r->res->kind, resource_api_version(r->res, api, sizeof(api)), rv);
	if (tok) {
		json_t *t = json_string(tok);
		char *text = json_dumps(t, JSON_ENCODE_ANY);
		evbuffer_add_printf(out, ",\"continue\":%s", text);
		free(text);
		json_decref(t);
	}
	if (count)
		evbuffer_add_printf(out, ",\"remainingItemCount\":%zu", remaining);
	evbuffer_add_printf(out, "},\"items\":[");
	return out;
}

static void list_item(struct evbuffer *out, size_t i, struct blob *json)
{
	/* The comma by reference too: added by copy after a reference it
	 * needed a chain of its own, a malloc'd kilobyte, for every item. */
	if (i && evbuffer_add_reference(out, ",", 1, NULL, NULL) < 0)
		abort();
	blob_to_evbuffer(json, out);
}

static void list_reply(struct req *r, struct evbuffer *out)
{
	evbuffer_add(out, "]}", 2);
	req_reply_json_buffer(r, 200, out);
	evbuffer_free(out);
}

static void reply_list_json(struct req *r, const char *rv, const char *tok, bool count,
                            size_t remaining, json_t *items)
{
	struct evbuffer *out = list_head(r, rv, tok, count, remaining);
	size_t i;
	json_t *obj;

	json_array_foreach(items, i, obj) {
		char *key = object_key(r->res, jx_str(obj, "metadata.namespace"),
		                       jx_str(obj, "metadata.name"));
		struct blob *json = cache_json(r->s->cache, key, obj);
		list_item(out, i, json);
		blob_unref(json);
		free(key);
	}
	list_reply(r, out);
}

/* A list's revision could not be read (cache_list_at's rc): the reply. */
static void reply_list_failed(struct req *r, int rc, int64_t at, const char *start,
                              const char *prefix)
{
	if (rc == ERR_GONE && start)
		reply_continue_expired(r, start, prefix);
	else if (rc == ERR_GONE)
		req_fail(r, ERR_GONE, "The resourceVersion for the provided list is too old.");
	else
		reply_too_large(r, at, cache_committed_rev(r->s->cache), 0);
}

/*
 * One page of a list without selectors, as JSON: the cache's texts, no
 * object parsed (ten thousand cold Nodes stay text for an informer's list).
 */
static void list_page_text(struct req *r, const char *prefix, int64_t at, const char *start,
                           bool inclusive, size_t limit)
{
	struct blob **texts = NULL;
	const char **keys = NULL;
	size_t n = 0, taken;
	char *tok = NULL, rv[24];
	struct evbuffer *out;
	int rc = cache_list_text_at(r->s->cache, at, prefix, start, inclusive, 0, &texts, &keys,
	                            NULL, &n);

	if (rc < 0) {
		reply_list_failed(r, rc, at, start, prefix);
		return;
	}
	taken = limit && n > limit ? limit : n;
	if (taken < n)
		tok = encode_continue(at, keys[taken - 1], prefix);
	snprintf(rv, sizeof(rv), "%" PRId64, at);
	out = list_head(r, rv, tok, tok != NULL, n - taken);
	for (size_t i = 0; i < taken; i++)
		list_item(out, i, texts[i]);
	list_reply(r, out);
	free(tok);
	free(texts);
	free(keys);
}

/* One page of the list at revision at, from start: the reply. */
static void list_page(struct req *r, int64_t at, const char *start, bool inclusive, size_t limit)
{
	char *prefix = prefix_key(r->res, r->ns), rv[24], *key = NULL;
	size_t n = 0, taken = 0, i = 0, remaining = 0;
	json_t **objs = NULL, *items = json_array(), *last = NULL;
	struct selectors sel;
	char *tok = NULL;
	bool more = false;
	int rc;

	if (parse_selectors(r, &sel) < 0) {
		free(prefix);
		json_decref(items);
		return;
	}
	if (!sel.labels && !sel.fields && !r->want_table) {
		list_page_text(r, prefix, at, start, inclusive, limit);
		goto out;
	}
	if ((key = selectors_key(r, &sel)) && !start && at == cache_committed_rev(r->s->cache)) {
		/* It names one object: looked up, not found among them all (ten
		 * thousand kubelets' informers list their own Nodes). */
		objs = xmalloc(sizeof(*objs));
		n = (objs[0] = cache_get_committed(r->s->cache, key)) != NULL;
	} else if ((rc = cache_list_at(r->s->cache, at, prefix, start, inclusive, 0, &objs, NULL,
	                               &n)) < 0) {
		reply_list_failed(r, rc, at, start, prefix);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (!selectors_match(&sel, objs[i]))
			continue;
		if (limit && taken == limit) {
			more = true;
			break;
		}
		json_array_append(items, objs[i]);
		last = objs[i];
		taken++;
	}
	if (more) {
		char *k = object_key(r->res, jx_str(last, "metadata.namespace"),
		                     jx_str(last, "metadata.name"));
		tok = encode_continue(at, k, prefix);
		free(k);
		for (; i < n; i++)
			remaining += selectors_match(&sel, objs[i]);
	}
	/* Upstream counts what remains only for lists without selectors. */
	bool count = more && !sel.labels && !sel.fields;
	snprintf(rv, sizeof(rv), "%" PRId64, at);
	if (r->want_table)
		req_reply(r, 200,
		          printers_table(r->res->kind, items, rv, tok, r->include, true, clock_now()));
	else
		reply_list_json(r, rv, tok, count, remaining, items);
out:
	free(tok);
	free(objs);
	free(prefix);
	free(key);
	json_decref(items);
	free_selectors(&sel);
}

static size_t list_limit(struct req *r)
{
	const char *s = req_query(r, "limit");
	return s ? strtoull(s, NULL, 10) : 0;
}

/* A NotOlderThan list, once its revision has committed. */
static void list_latest(struct req *r)
{
	const char *rv = req_query(r, "resourceVersion");
	/* "0" is any state, served without paging, as the watch cache does. */
	list_page(r, cache_committed_rev(r->s->cache), NULL, false,
	          rv && !strcmp(rv, "0") ? 0 : list_limit(r));
}

void handle_list(struct req *r)
{
	const char *rv_s = req_query(r, "resourceVersion"), *cont = req_query(r, "continue");
	const char *rvm = req_query(r, "resourceVersionMatch");
	struct continuation c;
	int64_t rv;

	/* As upstream: authorization (a filter before the handler), the
	 * options, then the revision. */
	if (authz_request(r, NULL) < 0 || check_list_watch_options(r, false) < 0 ||
	    rv_parse(r, rv_s, &rv) < 0)
		return;
	if (cont && *cont) {
		char *prefix = prefix_key(r->res, r->ns);
		int rc = decode_continue(r, cont, prefix, &c);
		free(prefix);
		if (rc < 0)
			return;
		if (rv_s && *rv_s && strcmp(rv_s, "0")) {
			free(c.start);
			req_fail(r, ERR_INVALID,
			         "specifying resource version is not allowed when using continue");
			return;
		}
		list_page(r, c.rv < 0 ? cache_committed_rev(r->s->cache) : c.rv, c.start,
		          c.inclusive, list_limit(r));
		free(c.start);
		return;
	}
	if (rv && ((rvm && !strcmp(rvm, "Exact")) || ((!rvm || !*rvm) && list_limit(r)))) {
		/* Exact, or the legacy exact read of a paged list at N. */
		list_page(r, rv, NULL, false, list_limit(r));
		return;
	}
	if (rv > cache_committed_rev(r->s->cache)) {
		wait_for_rv(r, rv, list_latest);
		return;
	}
	if (read_fresh(r, rv_s, list_latest))
		return;
	list_latest(r);
}
