/*
 * The OpenAPI documents (api/openapi.c): what kubectl explain, kubectl's
 * fieldValidation check and kubectl 1.27/1.28's client-side apply read in
 * them, that every reference resolves, and the v2 protobuf's wire shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/openapi.h"
#include "api/resources.h"
#include "api/schema.h"
#include "base/jx.h"
#include "base/sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *def(json_t *doc, const char *name)
{
	json_t *defs = json_object_get(doc, "definitions");
	if (!defs)
		defs = jx_get(doc, "components.schemas");
	json_t *d = json_object_get(defs, name);
	if (!d)
		fail_msg("no definition %s", name);
	return d;
}

static json_t *prop(json_t *schema, const char *name)
{
	json_t *p = json_object_get(json_object_get(schema, "properties"), name);
	if (!p)
		fail_msg("no property %s", name);
	return p;
}

static bool has_string(const json_t *a, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v) if (json_string_value(v) &&
	                                !strcmp(json_string_value(v), s)) return true;
	return false;
}

/* Every "$ref" in v names a definition of doc. */
static void refs_resolve(json_t *doc, json_t *v, const char *prefix)
{
	const char *key;
	json_t *x;
	size_t i;

	if (json_is_array(v)) {
		json_array_foreach(v, i, x) refs_resolve(doc, x, prefix);
		return;
	}
	if (!json_is_object(v))
		return;
	json_object_foreach(v, key, x)
	{
		if (!strcmp(key, "$ref")) {
			const char *ref = json_string_value(x);
			assert_non_null(ref);
			if (strncmp(ref, prefix, strlen(prefix)))
				fail_msg("ref %s does not start with %s", ref, prefix);
			def(doc, ref + strlen(prefix));
		} else {
			refs_resolve(doc, x, prefix);
		}
	}
}

static void test_v3_tolerations(void **state)
{
	json_t *doc = openapi_v3("", "v1");
	json_t *tol = def(doc, "io.k8s.api.core.v1.Toleration");
	json_t *spec = def(doc, "io.k8s.api.core.v1.PodSpec");

	assert_string_equal(jx_str(doc, "openapi"), "3.0.0");
	assert_true(has_string(json_object_get(prop(tol, "operator"), "enum"), "Exists"));
	assert_true(has_string(json_object_get(prop(tol, "operator"), "enum"), "Equal"));
	assert_int_equal(json_array_size(json_object_get(prop(tol, "effect"), "enum")), 3);
	assert_string_equal(jx_str(prop(tol, "tolerationSeconds"), "format"), "int64");
	assert_string_equal(jx_str(prop(tol, "tolerationSeconds"), "type"), "integer");
	assert_true(strlen(jx_str(prop(tol, "key"), "description")) > 20);
	assert_true(strlen(jx_str(tol, "description")) > 20);
	/* PodSpec.tolerations: an atomic list of Toleration, referred to through
	 * allOf with a {} default, as upstream's v3 documents do. */
	json_t *tols = prop(spec, "tolerations");
	assert_string_equal(jx_str(tols, "type"), "array");
	assert_string_equal(jx_str(tols, "x-kubernetes-list-type"), "atomic");
	assert_string_equal(
	    json_string_value(json_object_get(
	        json_array_get(json_object_get(json_object_get(tols, "items"), "allOf"), 0),
	        "$ref")),
	    "#/components/schemas/io.k8s.api.core.v1.Toleration");
	assert_true(json_is_object(jx_get(tols, "items.default")));
	json_decref(doc);
}

static void test_v3_patch_keys_and_required(void **state)
{
	json_t *doc = openapi_v3("", "v1");
	json_t *spec = def(doc, "io.k8s.api.core.v1.PodSpec");
	json_t *c = prop(spec, "containers");
	json_t *container = def(doc, "io.k8s.api.core.v1.Container");

	assert_string_equal(jx_str(c, "x-kubernetes-patch-merge-key"), "name");
	assert_string_equal(jx_str(c, "x-kubernetes-patch-strategy"), "merge");
	assert_string_equal(jx_str(c, "x-kubernetes-list-type"), "map");
	assert_true(has_string(json_object_get(c, "x-kubernetes-list-map-keys"), "name"));
	assert_true(has_string(json_object_get(spec, "required"), "containers"));
	assert_false(has_string(json_object_get(spec, "required"), "tolerations"));
	assert_true(has_string(json_object_get(container, "required"), "name"));
	/* A required string defaults to "" in v3; a struct held by value to {}. */
	assert_string_equal(jx_str(prop(container, "name"), "default"), "");
	assert_true(json_is_object(
	    json_object_get(prop(def(doc, "io.k8s.api.core.v1.Pod"), "spec"), "default")));
	/* ContainerPort.protocol's +default. */
	assert_string_equal(
	    jx_str(prop(def(doc, "io.k8s.api.core.v1.ContainerPort"), "protocol"), "default"),
	    "TCP");
	/* Atomic structs. */
	assert_string_equal(jx_str(def(doc, "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
	                           "x-kubernetes-map-type"),
	                    "atomic");
	json_decref(doc);
}

static void test_v3_gvk_and_paths(void **state)
{
	json_t *doc = openapi_v3("", "v1");
	json_t *pod = def(doc, "io.k8s.api.core.v1.Pod");
	json_t *g = json_array_get(json_object_get(pod, "x-kubernetes-group-version-kind"), 0);
	json_t *patch = jx_get(json_object_get(json_object_get(doc, "paths"),
	                                       "/api/v1/namespaces/{namespace}/pods/{name}"),
	                       "patch");
	json_t *p;
	size_t i;
	bool fv = false;

	assert_string_equal(jx_str(g, "group"), "");
	assert_string_equal(jx_str(g, "kind"), "Pod");
	assert_string_equal(jx_str(g, "version"), "v1");
	assert_non_null(patch);
	assert_string_equal(jx_str(patch, "x-kubernetes-group-version-kind.kind"), "Pod");
	assert_string_equal(jx_str(patch, "x-kubernetes-action"), "patch");
	assert_string_equal(jx_str(patch, "operationId"), "patchCoreV1NamespacedPod");
	json_array_foreach(json_object_get(patch, "parameters"), i, p) fv |=
	    !strcmp(jx_str(p, "name"), "fieldValidation") && !strcmp(jx_str(p, "in"), "query");
	assert_true(fv);
	assert_non_null(jx_get(patch, "requestBody.content"));
	/* The list types and the list path. */
	assert_non_null(def(doc, "io.k8s.api.core.v1.PodList"));
	assert_non_null(
	    jx_get(json_object_get(json_object_get(doc, "paths"), "/api/v1/pods"), "get"));
	/* No other group's kinds. */
	assert_null(
	    json_object_get(jx_get(doc, "components.schemas"), "io.k8s.api.apps.v1.Deployment"));
	json_decref(doc);

	doc = openapi_v3("apps", "v1");
	json_t *strategy = def(doc, "io.k8s.api.apps.v1.DeploymentStrategy");
	assert_non_null(prop(strategy, "rollingUpdate"));
	assert_non_null(prop(def(doc, "io.k8s.api.apps.v1.RollingUpdateDeployment"), "maxSurge"));
	json_t *ios = def(doc, "io.k8s.apimachinery.pkg.util.intstr.IntOrString");
	assert_string_equal(jx_str(ios, "format"), "int-or-string");
	assert_int_equal(json_array_size(json_object_get(ios, "oneOf")), 2);
	assert_non_null(jx_get(json_object_get(json_object_get(doc, "paths"),
	                                       "/apis/apps/v1/namespaces/{namespace}/"
	                                       "deployments/{name}/scale"),
	                       "patch"));
	json_decref(doc);

	doc = openapi_v3("", "v1");
	json_t *dc = jx_get(json_object_get(json_object_get(doc, "paths"),
	                                    "/api/v1/namespaces/{namespace}/configmaps"),
	                    "delete");
	assert_string_equal(jx_str(dc, "operationId"), "deleteCoreV1CollectionNamespacedConfigMap");
	assert_string_equal(jx_str(dc, "x-kubernetes-action"), "deletecollection");
	/* DELETE's options may be left out. */
	assert_null(jx_get(dc, "requestBody.required"));
	json_decref(doc);

	/* []byte is a slice: no enforced default; discovery's AddressType
	 * values come through core's IPFamily constants. */
	doc = openapi_v3("certificates.k8s.io", "v1");
	assert_null(json_object_get(
	    prop(def(doc, "io.k8s.api.certificates.v1.CertificateSigningRequestSpec"), "request"),
	    "default"));
	json_decref(doc);
	doc = openapi_v3("discovery.k8s.io", "v1");
	json_t *at = prop(def(doc, "io.k8s.api.discovery.v1.EndpointSlice"), "addressType");
	assert_int_equal(json_array_size(json_object_get(at, "enum")), 3);
	assert_true(has_string(json_object_get(at, "enum"), "IPv4"));
	json_decref(doc);

	assert_null(openapi_v3("apps", "v2"));
	assert_null(openapi_v3("nosuch.example.com", "v1"));
}

/* Every group-version's document and the v2 one: each reference resolves,
 * every served kind has a definition with its group-version-kind. */
static void test_references_resolve(void **state)
{
	json_t *v2 = openapi_v2();

	refs_resolve(v2, v2, "#/definitions/");
	for (size_t i = 0; i < resources_count; i++) {
		const struct resource *res = &resources[i];
		json_t *v3 = openapi_v3(res->group, res->version);
		char api[128];
		const struct schema_msg *m =
		    schema_kind_msg(resource_api_version(res, api, sizeof(api)), res->kind);
		/* The one kind without a schema: cube lists no CRDs, and
		 * publishes no document for their group. */
		if (!strcmp(res->kind, "CustomResourceDefinition")) {
			assert_null(m);
			assert_null(v3);
			continue;
		}
		assert_non_null(v3);
		assert_non_null(m);
		refs_resolve(v3, v3, "#/components/schemas/");
		assert_non_null(jx_get(def(v3, m->oapi), "x-kubernetes-group-version-kind"));
		assert_non_null(jx_get(def(v2, m->oapi), "x-kubernetes-group-version-kind"));
		/* v2 keeps references bare (no allOf) and carries no defaults. */
		assert_null(json_object_get(prop(def(v2, m->oapi), "metadata"), "allOf"));
		assert_null(json_object_get(prop(def(v2, m->oapi), "metadata"), "default"));
		json_decref(v3);
	}
	assert_string_equal(jx_str(v2, "swagger"), "2.0");
	json_decref(v2);
}

/* A field the table does not have is in no document. (The single-source
 * test adds one to the table and finds it everywhere.) */
static void test_no_alias_field(void **state)
{
	json_t *doc = openapi_v3("", "v1");
	json_t *cm = def(doc, "io.k8s.api.core.v1.ConfigMap");
	assert_null(json_object_get(json_object_get(cm, "properties"), "alias"));
	assert_non_null(prop(cm, "data"));
	json_decref(doc);
}

/* ---- the protobuf form ---- */

struct rd {
	const unsigned char *p, *end;
};

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;
	for (int shift = 0; r->p < r->end && shift < 64; shift += 7) {
		unsigned char c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	fail_msg("truncated varint");
	return 0;
}

/* Walk one message; count the length-delimited fields numbered `count`
 * and return the payload of the last field numbered `want` (if any). */
static struct rd rd_walk(struct rd r, unsigned want, unsigned count, size_t *n)
{
	struct rd found = {NULL, NULL};
	*n = 0;
	while (r.p < r.end) {
		uint64_t tag = rd_varint(&r);
		switch (tag & 7) {
		case 0:
			rd_varint(&r);
			break;
		case 2: {
			uint64_t len = rd_varint(&r);
			assert_true(len <= (uint64_t)(r.end - r.p));
			if ((tag >> 3) == want)
				found = (struct rd){r.p, r.p + len};
			if ((tag >> 3) == count)
				(*n)++;
			r.p += len;
			break;
		}
		default:
			fail_msg("unexpected wire type %u", (unsigned)(tag & 7));
		}
	}
	return found;
}

static void test_v2_protobuf(void **state)
{
	json_t *doc = openapi_v2();
	struct sbuf pb = SBUF_INIT;
	struct rd all, defs, paths;
	size_t n;

	openapi_v2_protobuf(doc, &pb);
	assert_true(pb.len > 100000);
	/* Document.swagger (1) = "2.0" comes first. */
	assert_memory_equal(pb.s,
	                    "\x0a\x03"
	                    "2.0",
	                    5);
	all = (struct rd){(const unsigned char *)pb.s, (const unsigned char *)pb.s + pb.len};
	defs = rd_walk(all, 9, 0, &n);
	assert_non_null(defs.p);
	/* Definitions.additional_properties (1): one NamedSchema each. */
	rd_walk(defs, 0, 1, &n);
	assert_int_equal(n, json_object_size(json_object_get(doc, "definitions")));
	paths = rd_walk(all, 8, 0, &n);
	rd_walk(paths, 0, 2, &n);
	assert_int_equal(n, json_object_size(json_object_get(doc, "paths")));
	sbuf_free(&pb);
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_v3_tolerations),
	    cmocka_unit_test(test_v3_patch_keys_and_required),
	    cmocka_unit_test(test_v3_gvk_and_paths),
	    cmocka_unit_test(test_references_resolve),
	    cmocka_unit_test(test_no_alias_field),
	    cmocka_unit_test(test_v2_protobuf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
