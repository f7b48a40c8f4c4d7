/*
 * Discovery: /version, aggregated (v2, v2beta1) and legacy /api and /apis,
 * the per-group resource lists, and the OpenAPI documents (api/openapi.h):
 * v3 per group-version with its hash, v2 in JSON and protobuf.
 */
#include "apiserver/internal.h"

#include "api/openapi.h"
#include "api/status.h"

#include "base/err.h"
#include "base/sbuf.h"

#include <event2/buffer.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AGG_V2 "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
#define AGG_V2B1 "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

static void reply_ct(struct req *r, const char *ct, json_t *body)
{
	/* Aggregated discovery is recognised by its Content-Type alone. */
	req_set_header(r, "Content-Type", ct);
	req_reply(r, 200, body);
}

static json_t *verbs_json(unsigned verbs)
{
	const char *names[8];
	size_t n;
	json_t *a = json_array();
	resource_verb_names(verbs, names, &n);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(names[i]));
	return a;
}

static json_t *strs_json(const char *const *v, size_t max)
{
	json_t *a = json_array();
	for (size_t i = 0; i < max && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *agg_resource(const struct resource *res)
{
	json_t *o = json_pack("{s:s,s:{s:s,s:s,s:s},s:s,s:s,s:o}", "resource", res->plural,
	                      "responseKind", "group", res->group, "version", res->version, "kind",
	                      res->kind, "scope", res->namespaced ? "Namespaced" : "Cluster",
	                      "singularResource", res->singular, "verbs", verbs_json(res->verbs));
	json_t *subs = json_array();

	if (res->short_names[0])
		json_object_set_new(o, "shortNames", strs_json(res->short_names, 3));
	if (res->categories[0])
		json_object_set_new(o, "categories", strs_json(res->categories, 2));
	for (size_t i = 0; i < RESOURCE_MAX_SUBS && res->subs[i].name; i++) {
		const struct subresource *s = &res->subs[i];
		json_array_append_new(subs, json_pack("{s:s,s:{s:s,s:s,s:s},s:o}", "subresource",
		                                      s->name, "responseKind", "group", s->group,
		                                      "version", s->version, "kind", s->kind,
		                                      "verbs", verbs_json(s->verbs)));
	}
	if (json_array_size(subs))
		json_object_set_new(o, "subresources", subs);
	else
		json_decref(subs);
	return o;
}

/* Groups in first-seen order of the table: "" first, then the others. */
static size_t groups(const char **out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < resources_count; i++) {
		bool seen = false;
		for (size_t j = 0; j < n; j++)
			seen |= !strcmp(out[j], resources[i].group);
		if (!seen && n < max)
			out[n++] = resources[i].group;
	}
	return n;
}

static json_t *agg_list(bool core, const char *api_version)
{
	const char *gs[32];
	size_t ng = groups(gs, 32);
	json_t *items = json_array();

	for (size_t g = 0; g < ng; g++) {
		json_t *rs = json_array();
		if (core != !*gs[g]) {
			json_decref(rs);
			continue;
		}
		for (size_t i = 0; i < resources_count; i++)
			if (!strcmp(resources[i].group, gs[g]))
				json_array_append_new(rs, agg_resource(&resources[i]));
		json_array_append_new(items, json_pack("{s:{s:s},s:[{s:s,s:o,s:s}]}", "metadata",
		                                       "name", gs[g], "versions", "version", "v1",
		                                       "resources", rs, "freshness", "Current"));
	}
	return json_pack("{s:s,s:s,s:{},s:o}", "kind", "APIGroupDiscoveryList", "apiVersion",
	                 api_version, "metadata", "items", items);
}

static json_t *legacy_resources(const char *group, const char *version)
{
	json_t *list = json_array();
	char gv[128];

	for (size_t i = 0; i < resources_count; i++) {
		const struct resource *res = &resources[i];
		if (strcmp(res->group, group) || strcmp(res->version, version))
			continue;
		json_t *o = json_pack("{s:s,s:s,s:b,s:s,s:o}", "name", res->plural, "singularName",
		                      res->singular, "namespaced", res->namespaced, "kind",
		                      res->kind, "verbs", verbs_json(res->verbs));
		if (res->short_names[0])
			json_object_set_new(o, "shortNames", strs_json(res->short_names, 3));
		if (res->categories[0])
			json_object_set_new(o, "categories", strs_json(res->categories, 2));
		json_array_append_new(list, o);
		for (size_t j = 0; j < RESOURCE_MAX_SUBS && res->subs[j].name; j++) {
			const struct subresource *s = &res->subs[j];
			char name[128];
			snprintf(name, sizeof(name), "%s/%s", res->plural, s->name);
			o = json_pack("{s:s,s:s,s:b,s:s,s:o}", "name", name, "singularName", "",
			              "namespaced", res->namespaced, "kind", s->kind, "verbs",
			              verbs_json(s->verbs));
			/* drain's eviction check wants group and version spelled out. */
			if (strcmp(s->group, group) || strcmp(s->version, version)) {
				json_object_set_new(o, "group", json_string(s->group));
				json_object_set_new(o, "version", json_string(s->version));
			}
			json_array_append_new(list, o);
		}
	}
	snprintf(gv, sizeof(gv), "%s%s%s", group, *group ? "/" : "", version);
	return json_pack("{s:s,s:s,s:s,s:o}", "kind", "APIResourceList", "apiVersion", "v1",
	                 "groupVersion", gv, "resources", list);
}

static json_t *legacy_groups(void)
{
	const char *gs[32];
	size_t ng = groups(gs, 32);
	json_t *list = json_array();
	for (size_t g = 0; g < ng; g++) {
		char gv[128];
		if (!*gs[g])
			continue;
		snprintf(gv, sizeof(gv), "%s/v1", gs[g]);
		json_array_append_new(list, json_pack("{s:s,s:[{s:s,s:s}],s:{s:s,s:s}}", "name",
		                                      gs[g], "versions", "groupVersion", gv,
		                                      "version", "v1", "preferredVersion",
		                                      "groupVersion", gv, "version", "v1"));
	}
	return json_pack("{s:s,s:s,s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
	                 list);
}

/* ---- OpenAPI ---------------------------------------------------------- */

/*
 * The documents are made once per process, on first request (they are
 * functions of constant tables), and kept as bytes with their hash: the
 * SHA-512 of the bytes in upper-case hex, as upstream's ETag and v3's
 * ?hash= are. A client that asks with the hash it was given gets
 * "Cache-Control: public, immutable", as kubectl's cache expects.
 */
#define OA_KEY_MAX 112 /* "apis/<group>/<version>" and NUL */
#define OA_GROUPS_MAX 32

struct oa_doc {
	char key[OA_KEY_MAX]; /* "api/v1", "apis/apps/v1"; "index", "swagger", "swagger.pb" */
	char *bytes;
	size_t len;
	char etag[2 * SHA512_DIGEST_LENGTH + 1];
};

static struct {
	pthread_mutex_t mu;
	struct oa_doc docs[40];
	size_t n;
} oa_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The protobuf forms' media subtypes; each has an old name with "@". */
#define PB_V2_SUBTYPE "com.github.proto-openapi.spec.v2.v1.0+protobuf"
#define PB_V2_SUBTYPE_OLD "com.github.proto-openapi.spec.v2@v1.0+protobuf"

static void oa_hash(struct oa_doc *d)
{
	unsigned char h[SHA512_DIGEST_LENGTH];
	unsigned int n = 0;
	EVP_Digest(d->bytes, d->len, h, &n, EVP_sha512(), NULL);
	for (unsigned i = 0; i < n; i++)
		snprintf(d->etag + 2 * i, 3, "%02X", h[i]);
}

/* A v3 document's name: "api/<version>" or "apis/<group>/<version>", each
 * part non-empty. Anything else names no document. */
static bool v3_key(const char *key, char *group, size_t n, const char **version)
{
	const char *slash;

	if (!strncmp(key, "api/", 4)) {
		*group = '\0';
		*version = key + 4;
	} else if (!strncmp(key, "apis/", 5) && (slash = strchr(key + 5, '/')) && slash > key + 5 &&
	           (size_t)(slash - key - 5) < n) {
		snprintf(group, n, "%.*s", (int)(slash - key - 5), key + 5);
		*version = slash + 1;
	} else {
		return false;
	}
	return **version && !strchr(*version, '/');
}

static const struct oa_doc *oa_get(const char *key);

/* "api/v1", "apis/apps/v1": the v3 documents, one per group-version. */
static size_t oa_keys(char keys[][OA_KEY_MAX], size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < resources_count; i++) {
		const struct resource *res = &resources[i];
		char key[OA_KEY_MAX];
		bool seen = false;
		if (*res->group)
			snprintf(key, sizeof(key), "apis/%s/%s", res->group, res->version);
		else
			snprintf(key, sizeof(key), "api/%s", res->version);
		for (size_t j = 0; j < n; j++)
			seen |= !strcmp(keys[j], key);
		if (!seen && n < max)
			snprintf(keys[n++], sizeof(keys[0]), "%s", key);
	}
	return n;
}

/* /openapi/v3: each group-version's document and its hash. */
static json_t *openapi_index(void)
{
	char keys[OA_GROUPS_MAX][OA_KEY_MAX];
	size_t n = oa_keys(keys, OA_GROUPS_MAX);
	json_t *paths = json_object();

	for (size_t i = 0; i < n; i++) {
		const struct oa_doc *d = oa_get(keys[i]);
		char url[512];
		if (!d)
			continue;
		snprintf(url, sizeof(url), "/openapi/v3/%s?hash=%s", keys[i], d->etag);
		json_object_set_new(paths, keys[i], json_pack("{s:s}", "serverRelativeURL", url));
	}
	return json_pack("{s:o}", "paths", paths);
}

static json_t *oa_make(const char *key)
{
	char group[96];
	const char *version;

	if (!strcmp(key, "swagger") || !strcmp(key, "swagger.pb"))
		return openapi_v2();
	if (!strcmp(key, "index"))
		return openapi_index();
	if (!v3_key(key, group, sizeof(group), &version))
		return NULL;
	return openapi_v3(group, version);
}

/* The document of key, made on first use; NULL when there is none.
 * Documents are made outside the lock (the index is made from the others)
 * and published under it; a published one never changes or goes. */
static const struct oa_doc *oa_get(const char *key)
{
	struct oa_doc *d = NULL, made = {.len = 0};
	json_t *doc;

	if (strlen(key) >= sizeof(made.key))
		return NULL;
	pthread_mutex_lock(&oa_cache.mu);
	for (size_t i = 0; i < oa_cache.n; i++)
		if (!strcmp(oa_cache.docs[i].key, key))
			d = &oa_cache.docs[i];
	pthread_mutex_unlock(&oa_cache.mu);
	if (d || !(doc = oa_make(key)))
		return d;
	snprintf(made.key, sizeof(made.key), "%s", key);
	if (!strcmp(key, "swagger.pb")) {
		struct sbuf pb = SBUF_INIT;
		openapi_v2_protobuf(doc, &pb);
		made.len = pb.len;
		made.bytes = sbuf_take(&pb);
	} else {
		made.bytes = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
		made.len = strlen(made.bytes);
	}
	json_decref(doc);
	oa_hash(&made);

	pthread_mutex_lock(&oa_cache.mu);
	/* Another thread may have made it meanwhile: the same bytes; keep one. */
	for (size_t i = 0; i < oa_cache.n && !d; i++)
		if (!strcmp(oa_cache.docs[i].key, key))
			d = &oa_cache.docs[i];
	if (!d && oa_cache.n < sizeof(oa_cache.docs) / sizeof(oa_cache.docs[0])) {
		d = &oa_cache.docs[oa_cache.n++];
		*d = made;
		made.bytes = NULL;
	}
	pthread_mutex_unlock(&oa_cache.mu);
	free(made.bytes);
	return d;
}

/* The bytes of d, or 304 when the client has them (If-None-Match).
 * Unless the reply may be kept for good, caches must ask again, as
 * upstream's default Cache-Control says. */
static void oa_reply(struct req *r, const struct oa_doc *d, const char *tag, const char *ct,
                     bool immutable)
{
	char etag[sizeof(d->etag) + 2];
	const char *inm = req_header(r, "If-None-Match");

	snprintf(etag, sizeof(etag), "\"%s\"", tag);
	req_set_header(r, "Etag", etag);
	if (!immutable)
		req_set_header(r, "Cache-Control", "no-cache, private");
	if (inm && (!strcmp(inm, etag) || !strcmp(inm, "*"))) {
		req_reply_bytes(r, 304, NULL, "", 0);
		return;
	}
	req_reply_bytes(r, 200, ct, d->bytes, d->len);
}

static void oa_fail(struct req *r, int code)
{
	req_set_header(r, "Cache-Control", "no-cache, private");
	if (code == 404)
		req_reply_bytes(r, 404, "text/plain; charset=utf-8", "404 page not found\n", 19);
	else
		req_reply_bytes(r, code, NULL, "", 0);
}

/*
 * kube-openapi's negotiation: the Accept clauses by preference (q, highest
 * first; the order given among equals), the first that names one of the
 * forms an endpoint serves, or a wildcard (its first form). The index into
 * types, or -1: 406.
 */
static int oa_negotiate(const char *accept, const char *const *types, int ntypes)
{
	struct clause {
		char mt[160];
		double q;
	} cl[16];
	const char *p = accept && *accept ? accept : "*/*";
	int n = 0;

	while (*p && n < 16) {
		size_t len = strcspn(p, ",");
		char text[256], *params, *c;
		snprintf(text, sizeof(text), "%.*s", (int)(len < sizeof(text) ? len : 0), p);
		p += len + (p[len] == ',');
		cl[n].q = 1;
		if ((params = strchr(text, ';'))) {
			char *qp = strstr(params, "q=");
			*params = '\0';
			if (qp)
				cl[n].q = strtod(qp + 2, NULL);
		}
		c = text + strspn(text, " \t");
		c[strcspn(c, " \t")] = '\0';
		if (!*c || cl[n].q <= 0)
			continue;
		snprintf(cl[n].mt, sizeof(cl[n].mt), "%s", c);
		/* Stable insertion by q. */
		for (int i = n; i > 0 && cl[i - 1].q < cl[i].q; i--) {
			struct clause t = cl[i];
			cl[i] = cl[i - 1];
			cl[i - 1] = t;
		}
		n++;
	}
	for (int i = 0; i < n; i++) {
		if (!strcmp(cl[i].mt, "*/*") || !strcmp(cl[i].mt, "application/*"))
			return 0;
		for (int t = 0; t < ntypes; t++)
			if (!strcmp(cl[i].mt, types[t]))
				return t;
	}
	return -1;
}

static void serve_openapi_v2(struct req *r)
{
	static const char *const types[] = {"application/json", "application/" PB_V2_SUBTYPE_OLD,
	                                    "application/" PB_V2_SUBTYPE};
	int f = oa_negotiate(req_header(r, "Accept"), types, 3);
	const struct oa_doc *json = oa_get("swagger"), *d = f > 0 ? oa_get("swagger.pb") : json;

	req_set_header(r, "Vary", "Accept");
	if (f < 0) {
		oa_fail(r, 406);
		return;
	}
	if (!d || !json) {
		req_fail(r, ERR_INTERNAL, "the OpenAPI v2 document could not be made");
		return;
	}
	/* One ETag for both forms (the JSON's), as upstream: Vary tells them apart. */
	oa_reply(r, d, json->etag, f > 0 ? "application/" PB_V2_SUBTYPE : "application/json",
	         false);
}

static void serve_openapi_v3(struct req *r, const char *key)
{
	/* Made in JSON only: kubectl reads JSON. A client that takes only the
	 * protobuf form gets 406, as upstream answers one that takes neither. */
	static const char *const types[] = {"application/json"};
	const char *hash = req_query(r, "hash"), *version;
	const struct oa_doc *d;
	char url[512], expires[64], group[96];
	struct tm tm;
	time_t later;

	if (!v3_key(key, group, sizeof(group), &version) || !(d = oa_get(key))) {
		oa_fail(r, 404);
		return;
	}
	req_set_header(r, "Vary", "Accept");
	if (oa_negotiate(req_header(r, "Accept"), types, 1) < 0) {
		oa_fail(r, 406);
		return;
	}
	if (hash && *hash) {
		if (strcmp(hash, d->etag)) {
			/* An old hash: to the document as it is now. */
			snprintf(url, sizeof(url), "/openapi/v3/%s?hash=%s", key, d->etag);
			req_set_header(r, "Location", url);
			oa_fail(r, 301);
			return;
		}
		later = time(NULL) + 365 * 24 * 3600;
		gmtime_r(&later, &tm);
		strftime(expires, sizeof(expires), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		req_set_header(r, "Cache-Control", "public, immutable");
		req_set_header(r, "Expires", expires);
	}
	oa_reply(r, d, d->etag, "application/json", hash && *hash);
}

static void serve_openapi_index(struct req *r)
{
	const struct oa_doc *d = oa_get("index");
	if (!d) {
		req_fail(r, ERR_INTERNAL, "the OpenAPI v3 index could not be made");
		return;
	}
	oa_reply(r, d, d->etag, "application/json", false);
}

bool discovery_serve(struct req *r)
{
	const char *p = r->path;
	const char *accept = req_header(r, "Accept");
	bool v2 = accept && strstr(accept, "v=v2;") && strstr(accept, "as=APIGroupDiscoveryList");
	bool v2b1 =
	    accept && strstr(accept, "v=v2beta1") && strstr(accept, "as=APIGroupDiscoveryList");
	/* The client lists v2 first when it can take it: honour its order. */
	if (v2 && v2b1 && strstr(accept, "v=v2beta1") < strstr(accept, "v=v2;"))
		v2 = false;

	if (!strcmp(p, "/version")) {
		reply_ct(r, "application/json",
		         json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "major", "1", "minor",
		                   "32", "gitVersion", "v1.32.0-cube", "gitCommit", "cube",
		                   "gitTreeState", "clean", "buildDate", "2026-11-30T00:00:00Z",
		                   "goVersion", "none (C11)", "compiler", "gcc", "platform",
		                   "linux/amd64"));
		return true;
	}
	if (!strcmp(p, "/api") || !strcmp(p, "/apis")) {
		bool core = !strcmp(p, "/api");
		if (v2 || v2b1)
			reply_ct(r, v2 ? AGG_V2 : AGG_V2B1,
			         agg_list(core, v2 ? "apidiscovery.k8s.io/v2"
			                           : "apidiscovery.k8s.io/v2beta1"));
		else if (core)
			reply_ct(r, "application/json",
			         json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "kind", "APIVersions",
			                   "versions", "v1", "serverAddressByClientCIDRs",
			                   "clientCIDR", "0.0.0.0/0", "serverAddress", ""));
		else
			reply_ct(r, "application/json", legacy_groups());
		return true;
	}
	if (!strcmp(p, "/api/v1")) {
		reply_ct(r, "application/json", legacy_resources("", "v1"));
		return true;
	}
	if (!strncmp(p, "/apis/", 6)) {
		char group[96];
		const char *slash = strchr(p + 6, '/');
		if (slash && !strcmp(slash, "/v1") && (size_t)(slash - p - 6) < sizeof(group)) {
			snprintf(group, sizeof(group), "%.*s", (int)(slash - p - 6), p + 6);
			for (size_t i = 0; i < resources_count; i++)
				if (!strcmp(resources[i].group, group)) {
					reply_ct(r, "application/json",
					         legacy_resources(group, "v1"));
					return true;
				}
		}
		return false;
	}
	if (!strcmp(p, "/openapi/v2")) {
		serve_openapi_v2(r);
		return true;
	}
	if (!strcmp(p, "/openapi/v3")) {
		serve_openapi_index(r);
		return true;
	}
	if (!strncmp(p, "/openapi/v3/", 12)) {
		serve_openapi_v3(r, p + 12);
		return true;
	}
	return false;
}
