/*
 * The verbs on resources: get, list, create, update, patch, and the
 * subresources status, approval, scale, binding and selfsubjectreviews.
 * Every write goes through the cache and is answered once durable.
 */
#include "apiserver/objects.h"

#include "api/patch.h"
#include "api/printers.h"
#include "api/protobuf.h"
#include "api/selector.h"
#include "api/status.h"
#include "api/validation.h"

#include "base/blob.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/timeutil.h"
#include "base/yamljson.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *new_uid(void)
{
	char *out = malloc(RAND_UUID_LEN + 1);
	if (!out)
		abort();
	return rand_uuid(out);
}

/* ---- bodies ------------------------------------------------------------------ */

char *body_bytes(struct req *r, size_t *len)
{
	struct evbuffer *in = r->in_body;
	size_t n = evbuffer_get_length(in);
	char *buf, msg[128];

	if (n > r->s->o.max_body) {
		snprintf(msg, sizeof(msg), "Request entity too large: limit is %zu",
			 r->s->o.max_body);
		req_fail(r, ERR_TOOLARGE, msg);
		return NULL;
	}
	buf = malloc(n + 1);
	if (!buf)
		abort();
	evbuffer_copyout(in, buf, n);
	buf[n] = '\0';
	*len = n;
	return buf;
}

json_t *body_object(struct req *r)
{
	const char *ct = req_header(r, "Content-Type");
	size_t len;
	char *buf = body_bytes(r, &len), msg[1024];
	json_t *obj = NULL;
	int rc;

	if (!buf)
		return NULL;
	if ((is(r->verb, "create") || is(r->verb, "update")) && check_field_validation(r) < 0) {
		free(buf);
		return NULL;
	}
	if (!ct)
		ct = "application/json";
	if (!strncmp(ct, "application/vnd.kubernetes.protobuf", 35)) {
		if ((rc = pb_parse((const unsigned char *)buf, len, &obj)) < 0) {
			snprintf(msg, sizeof(msg), "%s", err_msg());
			req_fail(r, rc, msg);
		}
	} else if (!strncmp(ct, "application/yaml", 16) ||
		   !strncmp(ct, "application/apply-patch+yaml", 28)) {
		if (!(obj = yj_parse(buf, len))) {
			snprintf(msg, sizeof(msg), "error converting YAML to JSON: %s", err_msg());
			req_fail(r, ERR_INVALID, msg);
		}
	} else if (!strncmp(ct, "application/json", 16) || !strncmp(ct, "*/*", 3)) {
		if (!(obj = jx_parse(buf, len))) {
			snprintf(msg, sizeof(msg),
				 "couldn't get version/kind; json parse error: %s", err_msg());
			req_fail(r, ERR_INVALID, msg);
		}
	} else {
		snprintf(msg, sizeof(msg),
			 "the body of the request was in an unknown format - accepted media types "
			 "include: application/json, application/yaml, "
			 "application/vnd.kubernetes.protobuf");
		req_fail(r, ERR_UNSUPPORTED, msg);
	}
	free(buf);
	if (obj && !json_is_object(obj)) {
		json_decref(obj);
		req_fail(r, ERR_INVALID, "the body of the request must be a JSON object");
		return NULL;
	}
	if (obj && typed_body(r, obj) < 0) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

/* ---- replies --------------------------------------------------------------------- */

static json_t *one_row_table(struct req *r, const json_t *obj)
{
	json_t *items = json_pack("[O]", obj), *t;
	t = printers_table(r->res->kind, items, jx_str(obj, "metadata.resourceVersion"), NULL,
			   r->include, true, clock_now());
	json_decref(items);
	return t;
}

void reply_object(struct req *r, int code, json_t *obj)
{
	if (r->want_table && !r->sub && json_is_object(obj) &&
	    !is(jx_str(obj, "kind"), "Status")) {
		json_t *t = one_row_table(r, obj);
		json_decref(obj);
		obj = t;
	}
	req_reply(r, code, obj);
}

void reply_cached(struct req *r, int code, const json_t *obj)
{
	struct blob *json;
	char *key;

	if (r->want_table && !r->sub) {
		reply_object(r, code, json_incref((json_t *)obj));
		return;
	}
	key = object_key(r->res, jx_str(obj, "metadata.namespace"), jx_str(obj, "metadata.name"));
	json = cache_json(r->s->cache, key, obj);
	free(key);
	req_reply_json(r, code, json);
	blob_unref(json);
}

void reply_conflict(struct req *r)
{
	char q[128], msg[512];

	if (refresh_and_retry(r))
		return;
	resource_qualified(r->res, q, sizeof(q));
	snprintf(msg, sizeof(msg),
		 "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please "
		 "apply your changes to the latest version and try again",
		 q, r->name ? r->name : "");
	req_fail_status(r, status_failure(ERR_CONFLICT, msg, r->res->group, r->res->plural,
					  r->name));
}

void reply_invalid(struct req *r, struct validation *v, const char *kind, const char *name)
{
	char *msg = val_message(v, kind, name);
	json_t *st = status_failure(ERR_UNPROCESSABLE, msg, r->res->group, kind, name);

	json_object_set(json_object_get(st, "details"), "causes", v->causes);
	/* Upstream's details.kind is the Kind here, not the resource. */
	free(msg);
	req_fail_status(r, st);
}

/* ---- writing ------------------------------------------------------------------------ */

struct write_ctx {
	struct req *r;
	int code;
	json_t *answer;     /* sent instead of the stored object when set */
	char *then_delete;  /* once written: delete this key (the last finalizer gone) */
};


void reply_storage_error(struct req *r, const char *detail)
{
	char msg[700];
	json_t *st;

	snprintf(msg, sizeof(msg), "Internal error occurred: %s", detail);
	st = status_failure(ERR_INTERNAL, msg, NULL, NULL, NULL);
	status_add_cause(st, NULL, detail, NULL);
	req_fail_status(r, st);
}

/*
 * A write to a shared store lost its compare to another API server's (the
 * cache said the key was at one revision, etcd had a newer one): serve the
 * request again on the state the cache now has — its preconditions, its
 * admission, its patch — as upstream's GuaranteedUpdate runs its update
 * function again. A precondition that no longer holds then answers 409
 * the usual way. true when it took r over.
 */
/* Upstream tries without a bound; each round one writer wins, so n
 * writers of one key finish within n rounds. The bound only stops a bug
 * from spinning. */
#define WRITE_TRIES 1024

static void write_refused(struct req *r, int rc);

bool retry_lost_write(struct req *r, int err)
{
	if (err != ERR_CONFLICT || !cache_remote(r->s->cache))
		return false;
	/* A create loses only to a create of the same name: it exists now. */
	if (is(r->verb, "create") && !r->sub) {
		write_refused(r, ERR_EXISTS);
		return true;
	}
	if (++r->write_tries >= WRITE_TRIES || r->gone) {
		reply_conflict(r);
		return true;
	}
	LOG_V(4, "write of %s lost to another server's; serving it again (try %d)", r->path,
	      r->write_tries + 1);
	handle_resource_again(r);
	return true;
}

void handle_resource_again(struct req *r)
{
	/* A create took its name from the body: the URL named none. */
	if (is(r->verb, "create") && !r->sub) {
		free(r->name);
		r->name = NULL;
	}
	handle_resource(r);
}

static void on_written(void *arg, int err, json_t *obj)
{
	struct write_ctx *w = arg;
	struct apiserver *s = w->r->s; /* the reply may end r */

	if (retry_lost_write(w->r, err)) {
		json_decref(w->answer);
	} else if (err) {
		json_decref(w->answer);
		reply_storage_error(w->r, err_msg());
	} else {
		if (w->answer)
			req_reply(w->r, w->code, w->answer);
		else if (is_scale(w->r))
			req_reply(w->r, w->code, scale_of(obj));
		else
			reply_cached(w->r, w->code, obj);
		/* After the write, on the state it left: a shared store's
		 * cache has it only now. */
		if (w->then_delete)
			delete_internal(s, w->then_delete, 0, "Background");
	}
	free(w->then_delete);
	free(w);
}

/* A write the cache refused at once (rc: ERR_EXISTS, ERR_TOOLARGE, ...). */
static void write_refused(struct req *r, int rc)
{
	char q[128], msg[512];

	resource_qualified(r->res, q, sizeof(q));
	if (rc == ERR_EXISTS && refresh_and_retry(r))
		return;
	if (rc == ERR_EXISTS) {
		snprintf(msg, sizeof(msg), "%s \"%s\" already exists", q, r->name);
	} else if (rc == ERR_TOOLARGE) {
		/* Upstream passes etcd's error through as it is: a 500
		 * without a reason ("Error from server: etcdserver: ..."). */
		req_fail_status(r, json_pack("{s:s,s:s,s:{},s:s,s:s,s:i}", "kind", "Status",
					     "apiVersion", "v1", "metadata", "status", "Failure",
					     "message", err_msg(), "code", 500));
		return;
	} else {
		snprintf(msg, sizeof(msg), "%s", err_msg());
	}
	req_fail_status(r, status_failure(rc, msg, r->res->group, r->res->plural, r->name));
}

static void write_then(struct req *r, const char *key, json_t *obj, bool create, int code,
		       json_t *answer, bool then_delete)
{
	struct write_ctx *w;
	int rc;

	/* A dry run stores nothing but answers as the write would, so a
	 * create of a name that exists is still 409 (upstream's
	 * DryRunnableStorage.Create). */
	if (req_dry_run(r) && create && cache_get(r->s->cache, key)) {
		json_decref(obj);
		json_decref(answer);
		write_refused(r, ERR_EXISTS);
		return;
	}
	if (req_dry_run(r)) {
		if (answer) {
			json_decref(obj);
			req_reply(r, code, answer);
		} else {
			reply_object(r, code, obj);
		}
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->r = r;
	w->code = code;
	w->answer = answer;
	if (then_delete && !(w->then_delete = strdup(key)))
		abort();
	rc = create ? cache_create(r->s->cache, key, obj, on_written, w)
		    : cache_update(r->s->cache, key, obj, on_written, w);
	if (rc < 0) {
		json_decref(w->answer);
		free(w->then_delete);
		free(w);
		write_refused(r, rc);
	}
}

void write_and_answer(struct req *r, const char *key, json_t *obj, bool create, int code,
		      json_t *answer)
{
	write_then(r, key, obj, create, code, answer, false);
}

void write_and_reply(struct req *r, const char *key, json_t *obj, bool create, int code)
{
	write_and_answer(r, key, obj, create, code, NULL);
}

/* The autoscaling/v1 Scale view of a workload. */
json_t *scale_of(const json_t *obj)
{
	json_t *sel = jx_get(obj, "spec.selector.matchLabels"), *scale;
	struct strv parts = STRV_INIT;
	const char *k;
	json_t *v;
	char *selector;

	json_object_foreach(sel, k, v) strv_pushf(&parts, "%s=%s", k, json_string_value(v));
	strv_sort(&parts);
	selector = strv_join(&parts, ",");
	scale = json_pack("{s:s,s:s,s:{s:O,s:O,s:O,s:O,s:O},s:{s:I},s:{s:I,s:s}}", "kind", "Scale",
			  "apiVersion", "autoscaling/v1", "metadata", "name",
			  jx_get(obj, "metadata.name"), "namespace", jx_get(obj, "metadata.namespace"),
			  "uid", jx_get(obj, "metadata.uid"), "resourceVersion",
			  jx_get(obj, "metadata.resourceVersion"), "creationTimestamp",
			  jx_get(obj, "metadata.creationTimestamp"), "spec", "replicas",
			  (json_int_t)jx_int(obj, "spec.replicas", 0), "status", "replicas",
			  (json_int_t)jx_int(obj, "status.replicas", 0), "selector", selector);
	free(selector);
	strv_free(&parts);
	return scale;
}

bool is_scale(const struct req *r)
{
	return r->sub && !strcmp(r->sub->name, "scale");
}

static const char *const *allowed_fields(const struct resource *res, const char **buf)
{
	size_t n = 0;
	buf[n++] = "metadata.name";
	if (res->namespaced)
		buf[n++] = "metadata.namespace";
	for (size_t i = 0; res->field_labels && res->field_labels[i] && n < 30; i++)
		buf[n++] = res->field_labels[i];
	buf[n] = NULL;
	return buf;
}

/* 0, or a 400 has been sent. */
int parse_selectors(struct req *r, struct selectors *sel)
{
	const char *ls = req_query(r, "labelSelector"), *fs = req_query(r, "fieldSelector");
	const char *allowed[32];
	char msg[1024];

	memset(sel, 0, sizeof(*sel));
	if (ls && !(sel->labels = label_selector_parse(ls))) {
		snprintf(msg, sizeof(msg), "%s", err_msg());
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	}
	if (fs && (!(sel->fields = field_selector_parse(fs)) ||
		   field_selector_validate(sel->fields, allowed_fields(r->res, allowed)) < 0)) {
		snprintf(msg, sizeof(msg), "%s", err_msg());
		label_selector_free(sel->labels);
		field_selector_free(sel->fields);
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	}
	return 0;
}

void free_selectors(struct selectors *sel)
{
	label_selector_free(sel->labels);
	field_selector_free(sel->fields);
}

bool selectors_match(const struct selectors *sel, const json_t *obj)
{
	return (!sel->labels || label_selector_match(sel->labels, jx_get(obj, "metadata.labels"))) &&
	       (!sel->fields || field_selector_match(sel->fields, obj));
}

char *selectors_key(const struct req *r, const struct selectors *sel)
{
	const char *name = sel->fields ? field_selector_exact(sel->fields, "metadata.name") : NULL;

	if (!name || (r->res->namespaced && !r->ns))
		return NULL;
	return object_key(r->res, r->ns, name);
}

/* ---- create ------------------------------------------------------------------------------ */

/* Kind/apiVersion and namespace of a body against the URL; 0 or a 400 sent. */
static int check_identity(struct req *r, json_t *obj, const char *kind, const char *group,
			  const char *version)
{
	const char *k = jx_str(obj, "kind"), *av = jx_str(obj, "apiVersion"), *ns;
	char want_av[96], msg[512];

	snprintf(want_av, sizeof(want_av), "%s%s%s", group, *group ? "/" : "", version);
	if ((k && *k && strcmp(k, kind)) || (av && *av && strcmp(av, want_av))) {
		snprintf(msg, sizeof(msg),
			 "%s in version \"%s\" cannot be handled as a %s: no kind \"%s\" is "
			 "registered for version \"%s\"",
			 k && *k ? k : kind, av && *av ? av : want_av, kind, k && *k ? k : kind,
			 av && *av ? av : want_av);
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	}
	json_object_set_new(obj, "kind", json_string(kind));
	json_object_set_new(obj, "apiVersion", json_string(want_av));
	if (!json_is_object(json_object_get(obj, "metadata")))
		json_object_set_new(obj, "metadata", json_object());
	ns = jx_str(obj, "metadata.namespace");
	if (r->res->namespaced && r->ns) {
		if (ns && *ns && strcmp(ns, r->ns)) {
			req_fail(r, ERR_INVALID,
				 "the namespace of the provided object does not match the namespace "
				 "sent on the request");
			return ERR_INVALID;
		}
		jx_set_str(obj, "metadata.namespace", r->ns);
	} else if (!r->res->namespaced) {
		json_object_del(json_object_get(obj, "metadata"), "namespace");
	}
	return 0;
}

static bool has_status_sub(const struct resource *res)
{
	return resource_sub(res, "status") != NULL;
}

/* Server-owned metadata on create; status reset where upstream resets it. */
static void prepare_create(struct req *r, json_t *obj)
{
	char now[TIME_BUF], *uid = new_uid();
	json_t *meta = json_object_get(obj, "metadata");

	json_object_set_new(meta, "uid", json_string(uid));
	free(uid);
	json_object_set_new(meta, "creationTimestamp",
			    json_string(time_format_rfc3339(clock_now(), now)));
	json_object_del(meta, "resourceVersion");
	json_object_del(meta, "deletionTimestamp");
	json_object_del(meta, "deletionGracePeriodSeconds");
	json_object_del(meta, "managedFields");
	if (r->res->prepare_create)
		r->res->prepare_create(obj);
	if (json_object_get(obj, "spec") && !(r->res->rules & RES_NO_GENERATION))
		json_object_set_new(meta, "generation", json_integer(1));
	if (has_status_sub(r->res) && !(r->res->rules & RES_KEEPS_STATUS))
		json_object_del(obj, "status");
}

/* ValidateRBACName: any path segment name (upstream's IsValidPathSegmentName). */
static void rbac_name_validate(struct validation *v, const char *name)
{
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		val_invalid_str(v, "metadata.name", name,
				!strcmp(name, ".") ? "may not be '.'" : "may not be '..'");
	else if (strchr(name, '/'))
		val_invalid_str(v, "metadata.name", name, "may not contain '/'");
	else if (strchr(name, '%'))
		val_invalid_str(v, "metadata.name", name, "may not contain '%'");
}

/* The name of a new object, by its kind's rule: 0, or a 400 has been sent
 * (errors of the 422 kind go to v). */
static int name_check(struct req *r, struct validation *v, const char *name)
{
	const char *why;
	char msg[512];

	switch (r->res->name_rule) {
	case NAME_LABEL:
		val_dns_label(v, "metadata.name", name);
		return 0;
	case NAME_PATH_SEGMENT:
		rbac_name_validate(v, name); /* kubeadm:..., system:... */
		return 0;
	case NAME_KEY_SEGMENT:
		/* Upstream does not care what CSRs are called (node-csr-<base64url>),
		 * but its storage key function wants a path segment: 400. */
		why = !strcmp(name, ".")     ? "may not be '.'"
		      : !strcmp(name, "..")  ? "may not be '..'"
		      : strchr(name, '/')    ? "may not contain '/'"
		      : strchr(name, '%')    ? "may not contain '%'"
					     : NULL;
		if (!why)
			return 0;
		snprintf(msg, sizeof(msg), "Name parameter invalid: \"%s\": %s", name, why);
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	default:
		val_dns_subdomain(v, "metadata.name", name);
		return 0;
	}
}

/* Defaults, admission, validation: 0 or a reply has been sent. */
static int admit_and_validate(struct req *r, json_t *obj, const json_t *old)
{
	struct validation v;
	const char *name = jx_str(obj, "metadata.name");

	/* Upstream defaults every decoded body; a status update's is a whole
	 * object too (a namespace's phase, its name label). */
	if (r->res->defaults && (!r->sub || is(r->sub->name, "status")))
		r->res->defaults(obj);
	if (admit(r, obj, old) < 0)
		return ERR_FORBIDDEN;
	val_init(&v);
	if (!old) {
		if (!name || !*name)
			val_required(&v, "metadata.name");
		else if (name_check(r, &v, name) < 0) {
			val_free(&v);
			return ERR_INVALID;
		}
	}
	val_metadata_maps(&v, json_object_get(obj, "metadata"));
	if (r->res->validate)
		r->res->validate(obj, old, &v);
	if (!val_ok(&v)) {
		reply_invalid(r, &v, r->res->kind, name);
		val_free(&v);
		return ERR_UNPROCESSABLE;
	}
	val_free(&v);
	return 0;
}

void serve_selfsubjectreview(struct req *r)
{
	json_t *body, *out;

	/* Anyone authenticated may (system:basic-user); anonymous may not. */
	if (authz_request(r, NULL) < 0 || !(body = body_object(r)))
		return;
	json_decref(body);
	out = json_pack("{s:s,s:s,s:{s:n},s:{s:o}}", "kind", "SelfSubjectReview",
				"apiVersion", "authentication.k8s.io/v1", "metadata",
				"creationTimestamp", "status", "userInfo",
				user_info_json(&r->user));
	req_reply(r, 201, out);
}

void handle_binding(struct req *r)
{
	json_t *body, *pod, *copy;
	const char *target;
	char *key = object_key(r->res, r->ns, r->name);

	pod = cache_get(r->s->cache, key);
	/* Authorize first (before the body, as upstream's filter): a 404 must
	 * not tell the forbidden what exists. */
	if (authz_request(r, pod) < 0) {
		free(key);
		return;
	}
	if (!(body = body_object(r))) {
		free(key);
		return;
	}
	target = jx_str(body, "target.name");
	if (!pod) {
		req_not_found(r);
		goto out;
	}
	if (!target || !*target) {
		req_fail(r, ERR_INVALID, "Binding.target.name: Required value");
		goto out;
	}
	if (json_string_length(jx_get(pod, "spec.nodeName"))) {
		char msg[512];
		snprintf(msg, sizeof(msg), "pod %s is already assigned to node \"%s\"", r->name,
			 jx_str(pod, "spec.nodeName"));
		req_fail(r, ERR_CONFLICT, msg);
		goto out;
	}
	copy = json_deep_copy(pod);
	jx_set_str(copy, "spec.nodeName", target);
	{
		json_t *conds = jx_get(copy, "status.conditions");
		char now[TIME_BUF];
		if (!json_is_array(conds)) {
			conds = json_array();
			jx_set(copy, "status.conditions", conds);
		}
		json_array_append_new(conds, json_pack("{s:s,s:s,s:n,s:s}", "type", "PodScheduled",
						       "status", "True", "lastProbeTime",
						       "lastTransitionTime",
						       time_format_rfc3339(clock_now(), now)));
	}
	/* The answer to a binding is a Status, not the pod. */
	write_and_answer(r, key, copy, false, 201, status_success(201, NULL, NULL, NULL, NULL));
out:
	free(key);
	json_decref(body);
}

static void handle_create(struct req *r)
{
	json_t *obj;
	char *key;
	const char *name, *gen;

	if (r->sub) {
		void (*create)(struct req *r) = kind_sub_create(r->kind, r->sub->name);
		if (create)
			create(r);
		else
			req_fail(r, ERR_METHOD, "the server does not allow this method on the "
						"requested resource");
		return;
	}
	if (r->kind->serve_create) {
		r->kind->serve_create(r);
		return;
	}
	/* Authorization is a filter before the handler upstream: it sees the
	 * request (a POST names no object), never the body. */
	if (authz_request(r, NULL) < 0 || !(obj = body_object(r)))
		return;
	if (check_identity(r, obj, r->res->kind, r->res->group, r->res->version) < 0)
		goto fail;
	name = jx_str(obj, "metadata.name");
	gen = jx_str(obj, "metadata.generateName");
	if ((!name || !*name) && gen && *gen) {
		char suffix[6] = {0}, full[300];
		rand_alnum(suffix, 5);
		snprintf(full, sizeof(full), "%s%s", gen, suffix);
		jx_set_str(obj, "metadata.name", full);
		name = jx_str(obj, "metadata.name");
	}
	free(r->name);
	r->name = name ? strdup(name) : NULL;
	prepare_create(r, obj);
	if (admit_and_validate(r, obj, NULL) < 0)
		goto fail;
	if (rbac_check_escalation(r, obj) < 0)
		goto fail;
	key = object_key(r->res, r->ns, r->name);
	write_and_reply(r, key, obj, true, 201);
	free(key);
	return;
fail:
	json_decref(obj);
}

/* ---- update and patch ------------------------------------------------------------------------ */

/* The object an update of r->sub would store, built from old and the body. */
static json_t *merge_for_sub(struct req *r, const json_t *old, json_t *body)
{
	const char *sub = r->sub ? r->sub->name : NULL;
	/* The main resource starts from the body; a subresource from the old object. */
	json_t *out = sub ? json_deep_copy(old) : json_incref(body);

	if (!sub) {
		/* The main resource cannot change status where status has its own door. */
		if (has_status_sub(r->res)) {
			/* A copy: validation stamps the conditions it is given
			 * (a CSR's), and the cached object is immutable. */
			if (json_object_get(old, "status"))
				json_object_set_new(out, "status",
				                    json_deep_copy(json_object_get(old, "status")));
			else
				json_object_del(out, "status");
		}
		/* A namespace's spec.finalizers change only through /finalize. */
		if (r->kind->finalizers) {
			json_t *f = jx_get(old, r->kind->finalizers);
			if (f)
				jx_set(out, r->kind->finalizers, json_incref(f));
			else
				jx_del(out, r->kind->finalizers);
		}
	} else if (is(sub, "finalize")) {
		json_t *f = jx_get(body, "spec.finalizers");
		jx_set(out, "spec.finalizers", f ? json_incref(f) : json_array());
	} else if (is(sub, "status")) {
		/* As upstream's status strategies: the object is the body's —
		 * metadata and status — with the stored spec, and whatever else
		 * the kind's strategy keeps (kinds.c). */
		json_decref(out);
		out = json_deep_copy(body);
		for (const char *const *k = r->kind->status_keeps; k && *k; k++) {
			json_t *v = jx_get(old, *k);
			if (v)
				jx_set(out, *k, json_deep_copy(v));
			else
				jx_del(out, *k);
		}
		for (const char *const *k = r->kind->status_backfills; k && *k; k++)
			if (!jx_get(out, *k) && jx_get(old, *k))
				jx_set(out, *k, json_deep_copy(jx_get(old, *k)));
		/* Copies: defaulting and admission edit the new object, never the
		 * stored one. */
		if (json_object_get(old, "spec"))
			json_object_set_new(out, "spec", json_deep_copy(json_object_get(old, "spec")));
		else
			json_object_del(out, "spec");
	} else if (is(sub, "approval")) {
		json_t *conds = jx_get(body, "status.conditions");
		jx_set(out, "status.conditions", conds ? json_incref(conds) : json_array());
	} else if (is(sub, "scale")) {
		json_t *rep = jx_get(body, "spec.replicas");
		jx_set(out, "spec.replicas", rep ? json_incref(rep) : json_integer(0));
	}
	/* Server-owned metadata stays the server's. */
	json_t *meta = json_object_get(out, "metadata"), *ometa = json_object_get(old, "metadata");
	static const char *const owned[] = {"uid", "creationTimestamp", "deletionTimestamp",
					    "deletionGracePeriodSeconds", "generation", "name",
					    "namespace", NULL};
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(out, "metadata", meta);
	}
	for (size_t i = 0; owned[i]; i++) {
		json_t *v = json_object_get(ometa, owned[i]);
		if (v)
			json_object_set(meta, owned[i], v);
		else
			json_object_del(meta, owned[i]);
	}
	json_object_set(out, "kind", json_object_get(old, "kind"));
	json_object_set(out, "apiVersion", json_object_get(old, "apiVersion"));
	return out;
}

static json_t *condition(const json_t *obj, const char *type)
{
	return jx_condition(json_object_get(obj, "status"), type);
}

/*
 * The CSR's decision conditions belong to /approval, its certificate to
 * /status, and neither may be rewritten after the fact (upstream's
 * certificates validation). Missing condition timestamps are filled in.
 */
void csr_update_rules(struct req *r, json_t *next, const json_t *old, struct validation *v)
{
	static const char *const decisions[] = {"Approved", "Denied"};
	const char *sub = r->sub ? r->sub->name : NULL;
	json_t *c, *cert = jx_get(next, "status.certificate");
	char now[TIME_BUF], msg[160];
	size_t i;

	time_format_rfc3339(clock_now(), now);
	json_array_foreach(jx_get(next, "status.conditions"), i, c)
	{
		if (!json_object_get(c, "lastUpdateTime"))
			json_object_set_new(c, "lastUpdateTime", json_string(now));
		if (!json_object_get(c, "lastTransitionTime"))
			json_object_set_new(c, "lastTransitionTime", json_string(now));
	}
	if (condition(next, "Approved") && condition(next, "Denied"))
		val_invalid_str(v, "status.conditions", "Denied",
				"Approved and Denied conditions are mutually exclusive");
	for (int d = 0; d < 2; d++) {
		bool had = condition(old, decisions[d]), has = condition(next, decisions[d]);
		if (had && !has) {
			snprintf(msg, sizeof(msg), "updates may not remove a condition of type \"%s\"",
				 decisions[d]);
			val_forbidden(v, "status.conditions", msg);
		} else if (!had && has && !is(sub, "approval")) {
			snprintf(msg, sizeof(msg), "updates may not add a condition of type \"%s\"",
				 decisions[d]);
			val_forbidden(v, "status.conditions", msg);
		}
	}
	if (json_string_length(jx_get(old, "status.certificate")) &&
	    !json_equal(cert, jx_get(old, "status.certificate")))
		val_forbidden(v, "status.certificate",
			      "updates may not modify existing certificate content");
	else if (json_string_length(cert) && !json_string_length(jx_get(old, "status.certificate")) &&
		 (!condition(next, "Approved") || condition(next, "Failed")))
		val_forbidden(v, "status.certificate",
			      "certificate can only be set on an approved, non-failed request");
}

/* The body's kind and name are the URL's (upstream's update handler checks
 * both, 400, before it looks the object up). A Scale body is not the
 * resource's kind; merge_for_sub reads its replicas. 0, or answered. */
static int check_update_body(struct req *r, json_t *body)
{
	const char *bn = jx_str(body, "metadata.name");
	char msg[512];

	if (r->sub && is(r->sub->name, "scale"))
		return 0;
	if (check_identity(r, body, r->res->kind, r->res->group, r->res->version) < 0)
		return ERR_INVALID;
	if (is(bn, r->name))
		return 0;
	snprintf(msg, sizeof(msg), "the name of the object (%s) does not match the name on the URL (%s)",
		 bn ? bn : "", r->name);
	req_fail(r, ERR_INVALID, msg);
	return ERR_INVALID;
}

/* Shared tail of update and patch: body is the client's intended object. */
static void update_with(struct req *r, const json_t *old, json_t *body, bool check_rv)
{
	const char *rv = jx_str(body, "metadata.resourceVersion");
	char *key;
	json_t *next;

	if (check_rv && rv && *rv && !is(rv, jx_str(old, "metadata.resourceVersion"))) {
		reply_conflict(r);
		return;
	}
	bool scale = r->sub && is(r->sub->name, "scale");

	if (check_update_body(r, body) < 0)
		return;
	{
		/* uid is immutable: an update (or patch, as controllers' adoption
		 * patches do) naming another object's uid is refused, not merged. */
		const char *bu = jx_str(body, "metadata.uid");
		if (!scale && bu && *bu && !is(bu, jx_str(old, "metadata.uid"))) {
			struct validation v;
			val_init(&v);
			val_immutable(&v, "metadata.uid", jx_get(body, "metadata.uid"),
				      jx_get(old, "metadata.uid"));
			reply_invalid(r, &v, r->res->kind, r->name);
			val_free(&v);
			return;
		}
	}
	next = merge_for_sub(r, old, body);
	if (r->kind->check_update) {
		struct validation v;
		val_init(&v);
		r->kind->check_update(r, next, old, &v);
		if (!val_ok(&v)) {
			reply_invalid(r, &v, r->res->kind, r->name);
			val_free(&v);
			json_decref(next);
			return;
		}
		val_free(&v);
	}
	if (admit_and_validate(r, next, old) < 0 || rbac_check_escalation(r, next) < 0) {
		json_decref(next);
		return;
	}
	/* A no-op changes nothing, not even the resourceVersion (kubectl's "no change"). */
	jx_set(next, "metadata.resourceVersion",
	       json_incref(jx_get(old, "metadata.resourceVersion")));
	if (json_equal(next, old)) {
		json_decref(next);
		if (is_scale(r))
			req_reply(r, 200, scale_of(old));
		else
			reply_object(r, 200, json_incref((json_t *)old));
		return;
	}
	if (!r->sub && jx_get(old, "metadata.generation") &&
	    !json_equal(json_object_get(next, "spec"), json_object_get(old, "spec")))
		jx_set(next, "metadata.generation",
		       json_integer(jx_int(old, "metadata.generation", 0) + 1));
	key = object_key(r->res, r->ns, r->name);
	/* The last finalizer gone from an object being deleted: delete it now
	 * — unless a graceful deletion is still running (a bound pod waits for
	 * its kubelet; upstream's ShouldDeleteDuringUpdate wants a grace period
	 * of 0). A namespace has two lists: spec.finalizers (the namespace
	 * controller's "kubernetes") and metadata.finalizers. */
	if (jx_get(next, "metadata.deletionTimestamp") &&
	    jx_int(old, "metadata.deletionGracePeriodSeconds", 0) == 0 &&
	    json_array_size(jx_get(next, "metadata.finalizers")) == 0 &&
	    (json_array_size(jx_get(old, "metadata.finalizers")) > 0 ||
	     (r->kind->finalizers && json_array_size(jx_get(old, r->kind->finalizers)) > 0)) &&
	    (!r->kind->finalizers || json_array_size(jx_get(next, r->kind->finalizers)) == 0)) {
		write_then(r, key, next, false, 200, NULL, true);
		free(key);
		return;
	}
	write_and_reply(r, key, next, false, 200);
	free(key);
}

static void handle_update(struct req *r)
{
	char *key = object_key(r->res, r->ns, r->name);
	json_t *old = cache_get(r->s->cache, key), *body;

	free(key);
	/* Authorize first: a 404 must not tell the forbidden what exists.
	 * Then as upstream's update handler: the options and the body (its
	 * 422 and 400) before the object is looked up (404). */
	if (authz_request(r, old) < 0 || !(body = body_object(r)))
		return;
	if (check_update_body(r, body) < 0) {
		json_decref(body);
		return;
	}
	if (!old) {
		json_decref(body);
		req_not_found(r);
		return;
	}
	update_with(r, old, body, true);
	json_decref(body);
}

/* Server-side apply, approximated: create, or merge the applied fields in. */
static void handle_apply(struct req *r, json_t *old, const char *buf, size_t len)
{
	json_t *body = yj_parse(buf, len), *next;
	char msg[1024], *key;

	if (!body || !json_is_object(body)) {
		snprintf(msg, sizeof(msg), "error decoding YAML: %s", body ? "not an object" : err_msg());
		json_decref(body);
		req_fail(r, ERR_INVALID, msg);
		return;
	}
	/* The applied configuration decodes as the kind, as a patch's result does. */
	if (typed_patched(r, body, NULL, "application/apply-patch+yaml", buf, len) < 0) {
		json_decref(body);
		return;
	}
	if (!old) {
		if (check_identity(r, body, r->res->kind, r->res->group, r->res->version) < 0) {
			json_decref(body);
			return;
		}
		jx_set_str(body, "metadata.name", r->name);
		prepare_create(r, body);
		if (admit_and_validate(r, body, NULL) < 0) {
			json_decref(body);
			return;
		}
		key = object_key(r->res, r->ns, r->name);
		write_and_reply(r, key, body, true, 201);
		free(key);
		return;
	}
	next = patch_merge(old, body);
	json_decref(body);
	update_with(r, old, next, false);
	json_decref(next);
}

static void handle_patch(struct req *r)
{
	char *key = object_key(r->res, r->ns, r->name);
	json_t *old = cache_get(r->s->cache, key), *patched = NULL, *base;
	const char *ct = req_header(r, "Content-Type");
	size_t len;
	char *buf;
	int rc;

	free(key);
	if (authz_request(r, old) < 0 || check_field_validation(r) < 0)
		return;
	if (!(buf = body_bytes(r, &len)))
		return;
	if (ct && !strncmp(ct, "application/apply-patch+yaml", 28)) {
		handle_apply(r, old, buf, len);
		free(buf);
		return;
	}
	if (!old) {
		free(buf);
		req_not_found(r);
		return;
	}
	/* A patch on scale sees the Scale, on anything else the object itself. */
	base = is_scale(r) ? scale_of(old) : json_incref(old);
	rc = patch_apply(base, ct ? ct : "", buf, len, r->res->kind, &patched);
	if (rc < 0) {
		json_decref(base);
		free(buf);
		req_fail(r, rc, err_msg());
		return;
	}
	rc = typed_patched(r, patched, base, ct, buf, len);
	json_decref(base);
	free(buf);
	if (rc < 0) {
		json_decref(patched);
		return;
	}
	update_with(r, old, patched, true);
	json_decref(patched);
}

/* The verbs of resource requests: the bit a resource's row grants, and
 * who serves it. */
static const struct {
	const char *name;
	unsigned bit;
	void (*serve)(struct req *r);
} verbs[] = {
	{"get", VERB_GET, handle_get},
	{"list", VERB_LIST, handle_list},
	{"watch", VERB_WATCH, watch_serve},
	{"create", VERB_CREATE, handle_create},
	{"update", VERB_UPDATE, handle_update},
	{"patch", VERB_PATCH, handle_patch},
	{"delete", VERB_DELETE, handle_delete},
	{"deletecollection", VERB_DELETECOLLECTION, handle_deletecollection},
};

void handle_resource(struct req *r)
{
	const char *inc = req_query(r, "includeObject");
	unsigned allowed = r->sub ? r->sub->verbs : r->res->verbs, need = 0;
	void (*serve)(struct req *r) = NULL;

	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (is(r->verb, verbs[i].name))
			need = verbs[i].bit, serve = verbs[i].serve;
	if (printers_include_parse(inc, &r->include) < 0) {
		req_fail(r, ERR_INVALID, err_msg());
		return;
	}
	/* POST names no object; PUT and PATCH name one. */
	if (is(r->verb, "create") && r->name && !r->sub)
		need = 0;
	if ((is(r->verb, "update") || is(r->verb, "patch")) && !r->name)
		need = 0;
	if (!(allowed & need) || (r->sub && !r->name)) {
		req_fail_status(r, status_failure(ERR_METHOD,
						  "the server does not allow this method on the "
						  "requested resource",
						  r->res->group, r->res->plural, r->name));
		return;
	}
	if (r->res->namespaced && !r->ns && !is(r->verb, "list") && !is(r->verb, "watch")) {
		req_fail(r, ERR_NOTFOUND, "the server could not find the requested resource");
		return;
	}
	if (r->sub && is(r->sub->name, "proxy"))
		serve = proxy_serve_node;
	else if (r->sub && is(r->sub->name, "log"))
		serve = proxy_serve_pod_log;
	serve(r);
}
