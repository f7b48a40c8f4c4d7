/*
 * Deletion: graceful for pods bound to a node (deletionTimestamp, then the
 * kubelet's confirmation), finalizers, namespaces, eviction, and the garbage
 * collector's propagation to dependents (Background, Foreground, Orphan).
 */
#include "apiserver/objects.h"

#include "api/protobuf.h"
#include "api/status.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

struct delete_opts {
	int64_t grace; /* -1: not given */
	const char *policy;
	const char *uid, *rv; /* preconditions */
	json_t *doc;          /* owns the strings above */
};

/* Options from a DeleteOptions body (JSON or protobuf) and the query. */
static int read_opts(struct req *r, const json_t *body_opts, struct delete_opts *o)
{
	const char *g = req_query(r, "gracePeriodSeconds"), *p = req_query(r, "propagationPolicy");

	memset(o, 0, sizeof(*o));
	o->grace = -1;
	if (body_opts) {
		o->doc = json_incref((json_t *)body_opts);
		if (json_is_integer(json_object_get(body_opts, "gracePeriodSeconds")))
			o->grace = json_integer_value(json_object_get(body_opts,
								      "gracePeriodSeconds"));
		o->policy = jx_str(body_opts, "propagationPolicy");
		o->uid = jx_str(body_opts, "preconditions.uid");
		o->rv = jx_str(body_opts, "preconditions.resourceVersion");
		if (json_is_true(json_object_get(body_opts, "orphanDependents")))
			o->policy = "Orphan";
		/* kubectl --dry-run=server says it in the body ("dryRun": ["All"]). */
		if (json_array_size(json_object_get(body_opts, "dryRun")))
			r->dry_run = true;
	}
	if (g)
		o->grace = strtoll(g, NULL, 10);
	if (p)
		o->policy = p;
	if (o->policy && !is(o->policy, "Background") && !is(o->policy, "Foreground") &&
	    !is(o->policy, "Orphan")) {
		char msg[256];
		snprintf(msg, sizeof(msg),
			 "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported "
			 "value: \"%s\": supported values: \"Foreground\", \"Background\", "
			 "\"Orphan\", \"nil\"",
			 o->policy);
		req_fail(r, ERR_UNPROCESSABLE, msg);
		return ERR_UNPROCESSABLE;
	}
	return 0;
}

static json_t *read_body_opts(struct req *r, bool *failed)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->ev);
	json_t *body;

	*failed = false;
	if (evbuffer_get_length(in) == 0)
		return NULL;
	if (!(body = body_object(r)))
		*failed = true;
	return body;
}

/* ---- the garbage collector ------------------------------------------------- */

static bool owned_by(const json_t *obj, const char *uid)
{
	json_t *ref;
	size_t i;
	json_array_foreach(jx_get(obj, "metadata.ownerReferences"), i, ref)
		if (is(jx_str(ref, "uid"), uid))
			return true;
	return false;
}

static const struct resource *res_of(const json_t *obj);

/* Keys of every object owning a reference to uid (malloc'd strv). */
static void dependents(struct apiserver *s, const char *uid, struct strv *out)
{
	json_t **objs;
	size_t n = cache_list(s->cache, "/registry/", NULL, 0, &objs, NULL);

	for (size_t i = 0; i < n; i++) {
		const struct resource *res = owned_by(objs[i], uid) ? res_of(objs[i]) : NULL;
		if (!res)
			continue;
		char *key = object_key(res, jx_str(objs[i], "metadata.namespace"),
				       jx_str(objs[i], "metadata.name"));
		strv_push(out, key);
		free(key);
	}
	free(objs);
}

static void orphan(struct apiserver *s, const char *key, const char *uid)
{
	json_t *obj = cache_get(s->cache, key), *copy, *refs, *ref;
	size_t i;

	if (!obj)
		return;
	copy = json_deep_copy(obj);
	refs = jx_get(copy, "metadata.ownerReferences");
	json_array_foreach(refs, i, ref)
	{
		if (is(jx_str(ref, "uid"), uid)) {
			json_array_remove(refs, i);
			break;
		}
	}
	if (json_array_size(refs) == 0)
		json_object_del(json_object_get(copy, "metadata"), "ownerReferences");
	if (cache_update(s->cache, key, copy, NULL, NULL) < 0)
		LOG_ERROR("garbage collector: orphan %s: %s", key, err_msg());
}

static void collect_garbage(struct apiserver *s, const char *uid, const char *policy)
{
	struct strv deps = STRV_INIT;

	if (!uid)
		return;
	dependents(s, uid, &deps);
	for (size_t i = 0; i < deps.n; i++) {
		if (is(policy, "Orphan"))
			orphan(s, deps.v[i], uid);
		else
			delete_internal(s, deps.v[i], -1, "Background");
	}
	strv_free(&deps);
}

/* ---- deciding how an object goes ----------------------------------------------------- */

enum plan { PLAN_NOW, PLAN_MARK, PLAN_ALREADY };

static const struct resource *res_of(const json_t *obj)
{
	const char *kind = jx_str(obj, "kind"), *av = jx_str(obj, "apiVersion");
	const char *slash = av ? strchr(av, '/') : NULL;
	char group[96] = "";
	if (slash)
		snprintf(group, sizeof(group), "%.*s", (int)(slash - av), av);
	return kind ? resource_by_kind(group, kind) : NULL;
}

/*
 * What deleting obj means now. For PLAN_MARK *marked is the object to store
 * (deletionTimestamp set); the object stays until its kubelet or its
 * finalizers let it go.
 */
static enum plan plan_delete(const json_t *obj, int64_t grace, const char *policy,
			     json_t **marked)
{
	const struct resource *res = res_of(obj);
	bool pod = res && is(res->plural, "pods");
	bool bound = pod && json_string_length(jx_get(obj, "spec.nodeName")) > 0;
	const char *phase = jx_str(obj, "status.phase");
	json_t *fins = jx_get(obj, "metadata.finalizers");
	json_t *dts = jx_get(obj, "metadata.deletionTimestamp");
	char when[TIME_BUF];

	*marked = NULL;
	if (pod && grace < 0) {
		json_t *had = jx_get(obj, "metadata.deletionGracePeriodSeconds");
		grace = had ? json_integer_value(had)
			    : jx_int(obj, "spec.terminationGracePeriodSeconds", 30);
	}
	if (pod && (!bound || is(phase, "Succeeded") || is(phase, "Failed")))
		grace = 0;
	bool graceful = pod && grace > 0;
	bool foreground = is(policy, "Foreground");

	if (!graceful && !foreground && json_array_size(fins) == 0)
		return PLAN_NOW;
	/* Already going, and not sooner than asked: nothing changes. Sooner
	 * (a kubelet's confirmation of a pod still held by a finalizer) moves
	 * the grace period down, so the finalizer's removal deletes it. */
	int64_t asked = graceful ? grace : 0;
	bool sooner = dts && jx_int(obj, "metadata.deletionGracePeriodSeconds", 0) > asked;
	if (dts && !sooner && !foreground)
		return json_array_size(fins) || graceful ? PLAN_ALREADY : PLAN_NOW;
	*marked = json_deep_copy(obj);
	if (!dts || graceful || sooner)
		jx_set_str(*marked, "metadata.deletionTimestamp",
			   time_format_rfc3339(clock_now() + (graceful ? grace : 0) * NS_PER_SEC,
					       when));
	jx_set(*marked, "metadata.deletionGracePeriodSeconds", json_integer(graceful ? grace : 0));
	if (foreground) {
		json_t *f = jx_get(*marked, "metadata.finalizers");
		if (!json_is_array(f)) {
			f = json_array();
			jx_set(*marked, "metadata.finalizers", f);
		}
		json_array_append_new(f, json_string("foregroundDeletion"));
	}
	return PLAN_MARK;
}

/* Finish a foreground deletion: dependents first, then the owner itself. */
static void finish_foreground(struct apiserver *s, const char *key, const char *uid)
{
	collect_garbage(s, uid, "Background");
	if (cache_get(s->cache, key) && cache_delete(s->cache, key, NULL, NULL) < 0)
		LOG_ERROR("garbage collector: delete %s: %s", key, err_msg());
}

void delete_internal(struct apiserver *s, const char *key, int64_t grace, const char *policy)
{
	json_t *obj = cache_get(s->cache, key), *marked;
	char *uid;

	if (!obj)
		return;
	uid = strdup(jx_str(obj, "metadata.uid") ?: "");
	switch (plan_delete(obj, grace, policy, &marked)) {
	case PLAN_NOW:
		if (cache_delete(s->cache, key, NULL, NULL) < 0)
			LOG_ERROR("delete %s: %s", key, err_msg());
		collect_garbage(s, uid, policy);
		break;
	case PLAN_MARK:
		if (cache_update(s->cache, key, marked, NULL, NULL) < 0)
			LOG_ERROR("delete %s: %s", key, err_msg());
		if (is(policy, "Foreground"))
			finish_foreground(s, key, uid);
		break;
	case PLAN_ALREADY:
		break;
	}
	free(uid);
}

/* ---- requests -------------------------------------------------------------------------------- */

struct del_ctx {
	struct req *r;
	char *uid, *policy;
	json_t *answer; /* eviction's 201 Status; else a 200 Status with details */
};

static void on_deleted(void *arg, int err, json_t *obj)
{
	struct del_ctx *d = arg;
	struct req *r = d->r;
	struct apiserver *s = r->s;

	if (d->answer)
		req_reply(r, 201, d->answer);
	else
		req_reply(r, 200,
			  status_success(200, r->res->group, r->res->plural, r->name, d->uid));
	collect_garbage(s, d->uid, d->policy);
	free(d->uid);
	free(d->policy);
	free(d);
}

/* The common path of DELETE and eviction; answer is what eviction replies. */
static void delete_with(struct req *r, const json_t *old, struct delete_opts *o, json_t *answer)
{
	char *key = object_key(r->res, r->ns, r->name), msg[512];
	json_t *marked;

	if (o->uid && *o->uid && !is(o->uid, jx_str(old, "metadata.uid"))) {
		snprintf(msg, sizeof(msg),
			 "Precondition failed: UID in precondition: %s, UID in object meta: %s",
			 o->uid, jx_str(old, "metadata.uid") ?: "");
		json_decref(answer);
		req_fail(r, ERR_CONFLICT, msg);
		goto out;
	}
	if (o->rv && *o->rv && !is(o->rv, jx_str(old, "metadata.resourceVersion"))) {
		snprintf(msg, sizeof(msg),
			 "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion "
			 "in object meta: %s",
			 o->rv, jx_str(old, "metadata.resourceVersion") ?: "");
		json_decref(answer);
		req_fail(r, ERR_CONFLICT, msg);
		goto out;
	}
	/* A namespace with finalizers is only marked: the namespace controller
	 * empties it and takes "kubernetes" off through /finalize, and the
	 * last finalizer gone deletes it (handlers.c). */
	if (is(r->res->plural, "namespaces") &&
	    (json_array_size(jx_get(old, "spec.finalizers")) ||
	     json_array_size(jx_get(old, "metadata.finalizers")))) {
		if (jx_get(old, "metadata.deletionTimestamp")) {
			json_decref(answer);
			reply_object(r, 200, json_incref((json_t *)old));
		} else {
			json_t *t = json_deep_copy(old);
			char when[TIME_BUF];
			jx_set_str(t, "status.phase", "Terminating");
			jx_set_str(t, "metadata.deletionTimestamp",
				   time_format_rfc3339(clock_now(), when));
			jx_set(t, "metadata.deletionGracePeriodSeconds", json_integer(0));
			json_decref(answer);
			write_and_reply(r, key, t, false, 200);
		}
		goto out;
	}
	switch (plan_delete(old, o->grace, o->policy, &marked)) {
	case PLAN_NOW: {
		struct del_ctx *d;
		if (req_dry_run(r)) {
			/* The answer a deletion would get; nothing deleted, nothing
			 * collected. */
			if (answer)
				req_reply(r, 201, answer);
			else
				req_reply(r, 200, status_success(200, r->res->group, r->res->plural,
								 r->name, jx_str(old, "metadata.uid")));
			break;
		}
		d = calloc(1, sizeof(*d));
		if (!d)
			abort();
		d->r = r;
		d->answer = answer;
		d->uid = strdup(jx_str(old, "metadata.uid") ?: "");
		d->policy = o->policy ? strdup(o->policy) : NULL;
		if (cache_delete(r->s->cache, key, on_deleted, d) < 0) {
			json_decref(d->answer);
			free(d->uid);
			free(d->policy);
			free(d);
			req_not_found(r);
		}
		break;
	}
	case PLAN_MARK: {
		/* The reply may end r at once (a dry run): nothing of r after it. */
		struct apiserver *s = r->s;
		bool cascade = is(o->policy, "Foreground") && !req_dry_run(r);
		char *uid = strdup(jx_str(old, "metadata.uid") ?: "");
		if (answer)
			write_and_answer(r, key, marked, false, 201, answer);
		else
			write_and_reply(r, key, marked, false, 200);
		if (cascade)
			finish_foreground(s, key, uid);
		free(uid);
		break;
	}
	case PLAN_ALREADY:
		if (answer)
			req_reply(r, 201, answer);
		else
			reply_object(r, 200, json_incref((json_t *)old));
		break;
	}
out:
	free(key);
}

/* The object r names, authorized and admitted for deletion; NULL once answered. */
static json_t *deletion_target(struct req *r)
{
	char *key = object_key(r->res, r->ns, r->name);
	json_t *old = cache_get(r->s->cache, key);

	free(key);
	/* Authorize first: a 404 must not tell the forbidden what exists. */
	if (authz_request(r, old) < 0)
		return NULL;
	if (!old) {
		req_not_found(r);
		return NULL;
	}
	if (admit(r, NULL, old) < 0)
		return NULL;
	return old;
}

void handle_delete(struct req *r)
{
	json_t *old = deletion_target(r), *body;
	struct delete_opts o;
	bool failed;

	if (!old)
		return;
	body = read_body_opts(r, &failed);
	if (failed)
		return;
	if (read_opts(r, body, &o) == 0)
		delete_with(r, old, &o, NULL);
	json_decref(body);
	json_decref(o.doc);
}

void handle_eviction(struct req *r)
{
	json_t *old = deletion_target(r), *body;
	struct delete_opts o;

	if (!old || !(body = body_object(r)))
		return;
	if (read_opts(r, json_object_get(body, "deleteOptions"), &o) == 0)
		delete_with(r, old, &o,
			    status_success(201, NULL, NULL, NULL, NULL));
	json_decref(body);
	json_decref(o.doc);
}

void handle_deletecollection(struct req *r)
{
	struct selectors sel;
	char *prefix;
	json_t **objs = NULL;
	size_t n;

	if (authz_request(r, NULL) < 0 || parse_selectors(r, &sel) < 0)
		return;
	prefix = prefix_key(r->res, r->ns);
	n = req_dry_run(r) ? 0 : cache_list(r->s->cache, prefix, NULL, 0, &objs, NULL);
	for (size_t i = 0; i < n; i++) {
		if (!selectors_match(&sel, objs[i]))
			continue;
		char *key = object_key(r->res, jx_str(objs[i], "metadata.namespace"),
				       jx_str(objs[i], "metadata.name"));
		delete_internal(r->s, key, -1, req_query(r, "propagationPolicy"));
		free(key);
	}
	free(objs);
	free(prefix);
	free_selectors(&sel);
	req_reply(r, 200, status_success(200, r->res->group, r->res->plural, NULL, NULL));
}
