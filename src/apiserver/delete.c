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
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct delete_opts {
	int64_t grace; /* -1: not given */
	const char *policy;
	int orphan_deps;      /* the deprecated orphanDependents: -1 absent, 0, 1 */
	const char *uid, *rv; /* preconditions */
	json_t *doc;          /* owns the strings above */
};

/* 422 for DeleteOptions' propagationPolicy, as upstream words it. */
__attribute__((format(printf, 2, 3))) static int invalid_policy(struct req *r, const char *fmt,
								  ...)
{
	char why[200], msg[320];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof(msg), "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: %s",
		 why);
	req_fail(r, ERR_UNPROCESSABLE, msg);
	return ERR_UNPROCESSABLE;
}

/* Options from a DeleteOptions body (JSON or protobuf) and the query. */
static int read_opts(struct req *r, const json_t *body_opts, struct delete_opts *o)
{
	const char *g = req_query(r, "gracePeriodSeconds"), *p = req_query(r, "propagationPolicy");

	memset(o, 0, sizeof(*o));
	o->grace = -1;
	o->orphan_deps = -1;
	if (body_opts) {
		o->doc = json_incref((json_t *)body_opts);
		if (json_is_integer(json_object_get(body_opts, "gracePeriodSeconds")))
			o->grace = json_integer_value(json_object_get(body_opts,
								      "gracePeriodSeconds"));
		o->policy = jx_str(body_opts, "propagationPolicy");
		o->uid = jx_str(body_opts, "preconditions.uid");
		o->rv = jx_str(body_opts, "preconditions.resourceVersion");
		if (json_is_boolean(json_object_get(body_opts, "orphanDependents")))
			o->orphan_deps = json_is_true(json_object_get(body_opts,
								      "orphanDependents"));
		/* kubectl --dry-run=server says it in the body ("dryRun": ["All"]). */
		if (json_array_size(json_object_get(body_opts, "dryRun")))
			r->dry_run = true;
	}
	if (g)
		o->grace = strtoll(g, NULL, 10);
	if (p)
		o->policy = p;
	if (req_query(r, "orphanDependents"))
		o->orphan_deps = query_bool(r, "orphanDependents");
	if (o->policy && o->orphan_deps >= 0)
		return invalid_policy(r, "Invalid value: \"%s\": orphanDependents and "
					 "deletionPropagation cannot be both set",
				      o->policy);
	if (o->policy && !is(o->policy, "Background") && !is(o->policy, "Foreground") &&
	    !is(o->policy, "Orphan"))
		return invalid_policy(r, "Unsupported value: \"%s\": supported values: "
					 "\"Foreground\", \"Background\", \"Orphan\", \"nil\"",
				      o->policy);
	{
		struct validation v;
		val_init(&v);
		if (!dry_run_check(r, json_object_get(body_opts, "dryRun"), &v)) {
			char *msg = val_message(&v, "DeleteOptions.meta.k8s.io", "");
			json_t *st = status_failure(ERR_UNPROCESSABLE, msg, "meta.k8s.io",
						    "DeleteOptions", "");
			json_object_set(json_object_get(st, "details"), "causes", v.causes);
			free(msg);
			val_free(&v);
			req_fail_status(r, st);
			return ERR_UNPROCESSABLE;
		}
		val_free(&v);
	}
	return 0;
}

static json_t *read_body_opts(struct req *r, bool *failed)
{
	json_t *body;

	*failed = false;
	if (evbuffer_get_length(r->in_body) == 0)
		return NULL;
	if (!(body = body_object(r)))
		*failed = true;
	return body;
}

/* ---- deciding how an object goes ----------------------------------------------------- */

enum plan { PLAN_NOW, PLAN_MARK, PLAN_ALREADY };

const struct resource *resource_of(const json_t *obj)
{
	const char *kind = jx_str(obj, "kind"), *av = jx_str(obj, "apiVersion");
	const char *slash = av ? strchr(av, '/') : NULL;
	char group[96] = "";
	if (slash)
		snprintf(group, sizeof(group), "%.*s", (int)(slash - av), av);
	return kind ? resource_by_kind(group, kind) : NULL;
}

bool has_finalizer(const json_t *obj, const char *name)
{
	const json_t *fins = jx_get(obj, "metadata.finalizers");
	json_t *f;
	size_t i;
	json_array_foreach(fins, i, f)
		if (is(json_string_value(f), name))
			return true;
	return false;
}

/*
 * The finalizers obj keeps when deleted with policy (NULL: none given;
 * orphan_deps: DeleteOptions.orphanDependents, -1 when absent): the
 * garbage collector's two are decided afresh, as upstream's
 * shouldOrphanDependents and shouldDeleteDependents — the options first,
 * then what the object already asked, then the kind's default (batch/v1
 * Jobs orphan their pods). A new array.
 */
static json_t *deletion_finalizers(const json_t *obj, const struct resource *res,
				   const char *policy, int orphan_deps)
{
	const json_t *fins = jx_get(obj, "metadata.finalizers");
	bool had_orphan = has_finalizer(obj, FINALIZER_ORPHAN);
	bool had_fg = has_finalizer(obj, FINALIZER_FOREGROUND);
	bool orphan, fg;
	json_t *out = json_array(), *f;
	size_t i;

	if (orphan_deps >= 0) {
		orphan = orphan_deps;
		fg = false;
	} else if (policy) {
		orphan = is(policy, "Orphan");
		fg = is(policy, "Foreground");
	} else {
		orphan = had_orphan || (!had_fg && res && (res->rules & RES_ORPHANS));
		fg = had_fg;
	}
	if (orphan == had_orphan && fg == had_fg) {
		json_array_extend(out, (json_t *)fins);
		return out;
	}
	json_array_foreach(fins, i, f)
		if (!is(json_string_value(f), FINALIZER_ORPHAN) &&
		    !is(json_string_value(f), FINALIZER_FOREGROUND))
			json_array_append(out, f);
	if (orphan)
		json_array_append_new(out, json_string(FINALIZER_ORPHAN));
	if (fg)
		json_array_append_new(out, json_string(FINALIZER_FOREGROUND));
	return out;
}

/*
 * What deleting obj means now, as upstream's Store.Delete. For PLAN_MARK
 * *marked is the object to store (deletionTimestamp set, the finalizers the
 * policy asks for); it stays until its kubelet or its finalizers let it go
 * (gc.c works the garbage collector's two).
 */
static enum plan plan_delete(const json_t *obj, int64_t grace, const char *policy,
			     int orphan_deps, json_t **marked)
{
	const struct resource *res = resource_of(obj);
	/* A kind its node terminates (pods): upstream's pod strategy's CheckGracefulDelete. */
	bool pod = res && (res->rules & RES_GRACEFUL);
	bool bound = pod && json_string_length(jx_get(obj, "spec.nodeName")) > 0;
	const char *phase = jx_str(obj, "status.phase");
	json_t *dts = jx_get(obj, "metadata.deletionTimestamp"), *fins;
	int64_t had = jx_int(obj, "metadata.deletionGracePeriodSeconds", 0);
	char when[TIME_BUF];

	*marked = NULL;
	if (pod && grace < 0)
		grace = jx_get(obj, "metadata.deletionGracePeriodSeconds")
				? had
				: jx_int(obj, "spec.terminationGracePeriodSeconds", 30);
	if (pod && (!bound || is(phase, "Succeeded") || is(phase, "Failed")))
		grace = 0;
	/* An object already being deleted at grace 0 stays at 0. */
	bool graceful = pod && grace > 0 && !(dts && had == 0);
	int64_t asked = graceful ? grace : 0;
	const json_t *cur;
	/* A graceful deletion under way, not asked to go sooner, changes
	 * nothing — not even the finalizers. Sooner (a kubelet's confirmation)
	 * moves the grace period down, so a finalizer's removal deletes it. */
	if (dts && had > 0 && asked >= had)
		return PLAN_ALREADY;
	fins = deletion_finalizers(obj, res, policy, orphan_deps);
	if (!graceful && json_array_size(fins) == 0) {
		json_decref(fins);
		return PLAN_NOW;
	}
	cur = jx_get(obj, "metadata.finalizers");
	if (dts && had == 0 && (cur ? json_equal(fins, (json_t *)cur) : !json_array_size(fins))) {
		json_decref(fins);
		return PLAN_ALREADY;
	}
	*marked = json_deep_copy(obj);
	/* A non-graceful object keeps the time its deletion began. */
	if (!dts || had > 0)
		jx_set_str(*marked, "metadata.deletionTimestamp",
			   time_format_rfc3339(clock_now() + asked * NS_PER_SEC, when));
	jx_set(*marked, "metadata.deletionGracePeriodSeconds", json_integer(asked));
	if (json_array_size(fins))
		jx_set(*marked, "metadata.finalizers", fins);
	else {
		json_object_del(json_object_get(*marked, "metadata"), "finalizers");
		json_decref(fins);
	}
	return PLAN_MARK;
}

bool delete_internal_then(struct apiserver *s, const char *key, int64_t grace,
			  const char *policy, cache_done_fn done, void *arg)
{
	json_t *obj = cache_get(s->cache, key), *marked;
	int rc = 0;

	if (!obj)
		return false;
	switch (plan_delete(obj, grace, policy, -1, &marked)) {
	case PLAN_NOW:
		rc = cache_delete(s->cache, key, done, arg);
		break;
	case PLAN_MARK:
		rc = cache_update(s->cache, key, marked, done, arg);
		break;
	case PLAN_ALREADY:
		return false;
	}
	if (rc < 0)
		LOG_ERROR("delete %s: %s", key, err_msg());
	return rc == 0;
}

void delete_internal(struct apiserver *s, const char *key, int64_t grace, const char *policy)
{
	delete_internal_then(s, key, grace, policy, NULL, NULL);
}

/* ---- requests -------------------------------------------------------------------------------- */

struct del_ctx {
	struct req *r;
	char *uid;
	json_t *answer; /* eviction's 201 Status; else a 200 Status with details */
};

/* The object is gone: answer (gc.c hears of it and collects its dependents). */
static void on_deleted(void *arg, int err, json_t *obj)
{
	struct del_ctx *d = arg;
	struct req *r = d->r;

	(void)obj;
	if (retry_lost_write(r, err)) {
		json_decref(d->answer);
	} else if (err) {
		json_decref(d->answer);
		reply_storage_error(r, err_msg());
	} else if (d->answer)
		req_reply(r, 201, d->answer);
	else
		req_reply(r, 200,
			  status_success(200, r->res->group, r->res->plural, r->name, d->uid));
	free(d->uid);
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
	if (r->kind->finalizers &&
	    (json_array_size(jx_get(old, r->kind->finalizers)) ||
	     json_array_size(jx_get(old, "metadata.finalizers")))) {
		if (jx_get(old, "metadata.deletionTimestamp")) {
			json_decref(answer);
			reply_object(r, 200, json_incref((json_t *)old));
		} else {
			json_t *t = json_deep_copy(old);
			char when[TIME_BUF];
			r->kind->deleting(t);
			jx_set_str(t, "metadata.deletionTimestamp",
				   time_format_rfc3339(clock_now(), when));
			jx_set(t, "metadata.deletionGracePeriodSeconds", json_integer(0));
			json_decref(answer);
			write_and_reply(r, key, t, false, 200);
		}
		goto out;
	}
	/* Upstream answers 202 to a deletion that did not happen at once only
	 * when the (deprecated) orphanDependents: false asked for the cascade;
	 * 200 with the object otherwise. */
	int later = o->orphan_deps == 0 ? 202 : 200;
	switch (plan_delete(old, o->grace, o->policy, o->orphan_deps, &marked)) {
	case PLAN_NOW: {
		struct del_ctx *d;
		if (req_dry_run(r)) {
			/* The answer a deletion would get; nothing deleted. */
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
		if (cache_delete(r->s->cache, key, on_deleted, d) < 0) {
			json_decref(d->answer);
			free(d->uid);
			free(d);
			req_not_found(r);
		}
		break;
	}
	case PLAN_MARK:
		if (answer)
			write_and_answer(r, key, marked, false, 201, answer);
		else
			write_and_reply(r, key, marked, false, later);
		break;
	case PLAN_ALREADY:
		if (answer)
			req_reply(r, 201, answer);
		else
			reply_object(r, later, json_incref((json_t *)old));
		break;
	}
out:
	free(key);
}

/* The object r names, authorized and admitted for deletion; NULL once answered. */
/* The object r deletes (borrowed; NULL when absent), once r may delete
 * it: authorization comes first, so a 404 tells the forbidden nothing.
 * false when the 403 has been answered. */
static bool deletion_allowed(struct req *r, json_t **old)
{
	char *key = object_key(r->res, r->ns, r->name);

	*old = cache_get(r->s->cache, key);
	free(key);
	return authz_request(r, *old) == 0;
}

/* As upstream's delete handler: the options are validated (422) before
 * the object is looked up (404); then admission. */
static void delete_checked(struct req *r, json_t *old, struct delete_opts *o, json_t *answer)
{
	if (!old) {
		json_decref(answer);
		req_not_found(r);
	} else if (admit(r, NULL, old) < 0) {
		json_decref(answer);
	} else {
		delete_with(r, old, o, answer);
	}
}

void handle_delete(struct req *r)
{
	json_t *old, *body;
	struct delete_opts o;
	bool failed;

	if (!deletion_allowed(r, &old))
		return;
	body = read_body_opts(r, &failed);
	if (failed)
		return;
	if (read_opts(r, body, &o) == 0)
		delete_checked(r, old, &o, NULL);
	json_decref(body);
	json_decref(o.doc);
}

void handle_eviction(struct req *r)
{
	json_t *old, *body;
	struct delete_opts o;

	if (!deletion_allowed(r, &old) || !(body = body_object(r)))
		return;
	if (read_opts(r, json_object_get(body, "deleteOptions"), &o) == 0)
		delete_checked(r, old, &o, status_success(201, NULL, NULL, NULL, NULL));
	json_decref(body);
	json_decref(o.doc);
}

/*
 * A deletecollection is answered once every one of its writes is durable,
 * with what upstream's Store.DeleteCollection answers: the list of what it
 * deleted (an object whose deletion is graceful or held by finalizers as it
 * now is, marked), in key order.
 */
struct collection {
	struct req *r;
	size_t outstanding; /* writes not yet durable, plus one while submitting */
	json_t *items;
	char *error; /* the first failure's text */
	int64_t rev; /* the list's revision */
};

static void collection_step(void *arg, int err, json_t *obj)
{
	struct collection *c = arg;
	struct req *r = c->r;
	char api[96], kind[96], rv[24];

	if (err && !c->error)
		c->error = str_printf("%s", err_msg());
	else if (!err && obj)
		json_array_append(c->items, obj);
	if (--c->outstanding)
		return;
	if (c->error) {
		reply_storage_error(r, c->error);
	} else {
		snprintf(kind, sizeof(kind), "%sList", r->res->kind);
		snprintf(rv, sizeof(rv), "%" PRId64, c->rev);
		req_reply(r, 200,
			  json_pack("{s:s,s:s,s:{s:s},s:O}", "kind", kind, "apiVersion",
				    resource_api_version(r->res, api, sizeof(api)), "metadata",
				    "resourceVersion", rv, "items", c->items));
	}
	json_decref(c->items);
	free(c->error);
	free(c);
}

void handle_deletecollection(struct req *r)
{
	struct selectors sel;
	struct collection *c;
	char *prefix;
	json_t **objs = NULL;
	size_t n;

	if (authz_request(r, NULL) < 0 || parse_selectors(r, &sel) < 0)
		return;
	if (!(c = calloc(1, sizeof(*c))))
		abort();
	c->r = r;
	c->outstanding = 1;
	c->items = json_array();
	c->rev = cache_committed_rev(r->s->cache);
	prefix = prefix_key(r->res, r->ns);
	n = cache_list_committed(r->s->cache, prefix, NULL, 0, &objs, NULL);
	for (size_t i = 0; i < n; i++) {
		if (!selectors_match(&sel, objs[i]))
			continue;
		if (req_dry_run(r)) {
			/* What would go; nothing goes. */
			json_array_append(c->items, objs[i]);
			continue;
		}
		char *key = object_key(r->res, jx_str(objs[i], "metadata.namespace"),
				       jx_str(objs[i], "metadata.name"));
		c->outstanding++;
		if (!delete_internal_then(r->s, key, -1, req_query(r, "propagationPolicy"),
					  collection_step, c))
			c->outstanding--;
		free(key);
	}
	free(objs);
	free(prefix);
	free_selectors(&sel);
	collection_step(c, 0, NULL);
}
