/*
 * Discovery: /version, aggregated (v2, v2beta1) and legacy /api and /apis,
 * the per-group resource lists, and just enough OpenAPI v3 for kubectl
 * apply's default validation (kubectl-wire.md §1, §2.15).
 */
#include "apiserver/internal.h"

#include "api/status.h"

#include "base/err.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
			      "responseKind", "group", res->group, "version", res->version,
			      "kind", res->kind, "scope", res->namespaced ? "Namespaced" : "Cluster",
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
		json_array_append_new(
			items, json_pack("{s:{s:s},s:[{s:s,s:o,s:s}]}", "metadata", "name", gs[g],
					 "versions", "version", "v1", "resources", rs, "freshness",
					 "Current"));
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

/* The smallest OpenAPI v3 that makes kubectl trust fieldValidation. */
static json_t *openapi_root(void)
{
	const char *gs[32];
	size_t ng = groups(gs, 32);
	json_t *paths = json_object();
	for (size_t g = 0; g < ng; g++) {
		char key[128], url[192];
		snprintf(key, sizeof(key), "%s%s/v1", *gs[g] ? "apis/" : "api", gs[g]);
		if (!*gs[g])
			snprintf(key, sizeof(key), "api/v1");
		snprintf(url, sizeof(url), "/openapi/v3/%s?hash=CUBE1", key);
		json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url));
	}
	return json_pack("{s:o}", "paths", paths);
}

static json_t *openapi_group(const char *group)
{
	json_t *paths = json_object();
	for (size_t i = 0; i < resources_count; i++) {
		const struct resource *res = &resources[i];
		char path[256];
		if (strcmp(res->group, group))
			continue;
		snprintf(path, sizeof(path), "/%s%s%s/v1/%s%s/{name}", *group ? "apis/" : "api",
			 group, "", res->namespaced ? "namespaces/{namespace}/" : "",
			 res->plural);
		if (!*group)
			snprintf(path, sizeof(path), "/api/v1/%s%s/{name}",
				 res->namespaced ? "namespaces/{namespace}/" : "", res->plural);
		json_t *op = json_pack(
			"{s:{s:s,s:s,s:s},s:[{s:s,s:s,s:{s:s}}],s:{s:{s:s}}}",
			"x-kubernetes-group-version-kind", "group", group, "version", "v1", "kind",
			res->kind, "parameters", "name", "fieldValidation", "in", "query",
			"schema", "type", "string", "responses", "200", "description", "OK");
		json_object_set_new(paths, path, json_pack("{s:o}", "patch", op));
	}
	return json_pack("{s:s,s:{s:s,s:s},s:{s:{}},s:o}", "openapi", "3.0.0", "info", "title",
			 "Kubernetes", "version", "v1.32.0", "components", "schemas", "paths",
			 paths);
}

bool discovery_serve(struct req *r)
{
	const char *p = r->path;
	const char *accept = req_header(r, "Accept");
	bool v2 = accept && strstr(accept, "v=v2;") && strstr(accept, "as=APIGroupDiscoveryList");
	bool v2b1 = accept && strstr(accept, "v=v2beta1") &&
		    strstr(accept, "as=APIGroupDiscoveryList");
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
	if (!strcmp(p, "/openapi/v3")) {
		reply_ct(r, "application/json", openapi_root());
		return true;
	}
	if (!strncmp(p, "/openapi/v3/", 12)) {
		const char *g = p + 12;
		char group[96] = "";
		if (!strncmp(g, "apis/", 5)) {
			const char *slash = strchr(g + 5, '/');
			if (slash)
				snprintf(group, sizeof(group), "%.*s", (int)(slash - g - 5), g + 5);
		}
		reply_ct(r, "application/json", openapi_group(group));
		return true;
	}
	return false;
}
