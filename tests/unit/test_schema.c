/*
 * schema: the kinds' shape as data, checked against upstream's own
 * round-trip fixtures (tests/data/vectors/upstream-1.32: kubernetes/api
 * v0.32.0 testdata/HEAD, one object per kind with every field set, in its
 * protobuf and JSON forms).
 *
 *  - every protobuf fixture decodes to its JSON fixture: field numbers,
 *    types, inlined messages, maps, named slices and wrappers are right;
 *  - schema_conform leaves every JSON fixture as it is and reports no
 *    unknown field: every JSON name and type of every served kind is known;
 *  - the typed decode's errors and canonical quantities as upstream's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/protobuf.h"
#include "api/schema.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixtures, by file stem, and the kind's apiVersion/kind. */
static const char *const fixtures[] = {
    "core.v1.Namespace",
    "core.v1.Node",
    "core.v1.Pod",
    "core.v1.Binding",
    "core.v1.Event",
    "core.v1.Secret",
    "core.v1.ConfigMap",
    "core.v1.Service",
    "core.v1.Endpoints",
    "core.v1.ServiceAccount",
    "apps.v1.Deployment",
    "apps.v1.ReplicaSet",
    "apps.v1.StatefulSet",
    "apps.v1.ControllerRevision",
    "apps.v1.DaemonSet",
    "batch.v1.Job",
    "autoscaling.v1.Scale",
    "certificates.k8s.io.v1.CertificateSigningRequest",
    "coordination.k8s.io.v1.Lease",
    "discovery.k8s.io.v1.EndpointSlice",
    "authentication.k8s.io.v1.SelfSubjectReview",
    "authentication.k8s.io.v1.TokenRequest",
    "authentication.k8s.io.v1.TokenReview",
    "authorization.k8s.io.v1.SubjectAccessReview",
    "authorization.k8s.io.v1.LocalSubjectAccessReview",
    "authorization.k8s.io.v1.SelfSubjectAccessReview",
    "authorization.k8s.io.v1.SelfSubjectRulesReview",
    "policy.v1.Eviction",
    "rbac.authorization.k8s.io.v1.Role",
    "rbac.authorization.k8s.io.v1.ClusterRole",
    "rbac.authorization.k8s.io.v1.RoleBinding",
    "rbac.authorization.k8s.io.v1.ClusterRoleBinding",
};
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static char *fixture_path(const char *stem, const char *ext)
{
	const char *dir = getenv("CUBE_VECTORS");
	char rel[256];

	if (!dir || !*dir)
		dir = "/work/main/tests/data/vectors";
	snprintf(rel, sizeof(rel), "upstream-1.32/%s.%s", stem, ext);
	return file_join(dir, rel);
}

static json_t *fixture_json(const char *stem)
{
	char *path = fixture_path(stem, "json");
	json_t *v = jx_load_file(path);

	if (!v)
		fail_msg("cannot load %s: %s", path, err_msg());
	free(path);
	return v;
}

static unsigned char *fixture_pb(const char *stem, size_t *len)
{
	char *path = fixture_path(stem, "pb"), *data = NULL;

	if (file_read(path, &data, len, 1 << 20))
		fail_msg("cannot read %s: %s", path, err_msg());
	free(path);
	return (unsigned char *)data;
}

/* Print where two JSON values first differ, then fail. */
static void diff(const char *path, const json_t *got, const json_t *want, int *ndiff)
{
	const char *k;
	json_t *v;

	if (json_equal(got, want) || *ndiff > 20)
		return;
	if (json_is_object(got) && json_is_object(want)) {
		char sub[512];
		json_object_foreach((json_t *)want, k, v)
		{
			snprintf(sub, sizeof(sub), "%s.%s", path, k);
			diff(sub, json_object_get(got, k), v, ndiff);
		}
		json_object_foreach((json_t *)got, k, v)
		{
			if (!json_object_get(want, k)) {
				print_error("%s.%s: unexpected\n", path, k);
				++*ndiff;
			}
		}
		return;
	}
	if (json_is_array(got) && json_is_array(want) &&
	    json_array_size(got) == json_array_size(want)) {
		char sub[512];
		for (size_t i = 0; i < json_array_size(want); i++) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			diff(sub, json_array_get(got, i), json_array_get(want, i), ndiff);
		}
		return;
	}
	char *g = got ? json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	char *w = json_dumps(want, JSON_ENCODE_ANY | JSON_COMPACT);
	print_error("%s: got %.200s, want %.200s\n", path, g ? g : "(absent)", w);
	free(g);
	free(w);
	++*ndiff;
}

static void assert_same(const char *what, const json_t *got, const json_t *want)
{
	int n = 0;

	diff(what, got, want, &n);
	if (n)
		fail_msg("%s: %d difference(s)", what, n);
}

/* ---- protobuf ----------------------------------------------------------- */

static void test_protobuf_fixtures_decode_to_their_json(void **state)
{
	(void)state;
	for (size_t i = 0; i < NFIXTURES; i++) {
		size_t len = 0;
		unsigned char *pb = fixture_pb(fixtures[i], &len);
		json_t *want = fixture_json(fixtures[i]), *got = NULL;

		if (pb_parse(pb, len, &got) != 0)
			fail_msg("%s: %s", fixtures[i], err_msg());
		assert_same(fixtures[i], got, want);
		json_decref(got);
		json_decref(want);
		free(pb);
	}
}

/* ---- conforming JSON ------------------------------------------------------ */

static const struct schema_msg *msg_of(const json_t *obj)
{
	const struct schema_msg *m =
	    schema_kind_msg(json_string_value(json_object_get(obj, "apiVersion")),
	                    json_string_value(json_object_get(obj, "kind")));
	assert_non_null(m);
	return m;
}

static void test_json_fixtures_conform_unchanged(void **state)
{
	(void)state;
	for (size_t i = 0; i < NFIXTURES; i++) {
		json_t *want = fixture_json(fixtures[i]), *got = json_deep_copy(want), *unknown;
		if (schema_conform(got, msg_of(want), SCHEMA_REPORT, 0, &unknown) != 0)
			fail_msg("%s: %s", fixtures[i], err_msg());
		if (unknown) {
			char *u = jx_dump(unknown);
			fail_msg("%s: unknown fields %s", fixtures[i], u);
		}
		assert_same(fixtures[i], got, want);
		json_decref(got);
		json_decref(want);
	}
}

/* schema_conform of a JSON text: 0 and the result, or the error text. */
static int conform_text(const char *text, unsigned flags, json_t **out, json_t **unknown)
{
	json_t *obj = jx_parse(text, strlen(text));
	int rc;

	assert_non_null(obj);
	rc = schema_conform(obj, msg_of(obj), SCHEMA_REPORT, flags, unknown);
	*out = obj;
	return rc;
}

static void expect_error(const char *text, unsigned flags, const char *want)
{
	json_t *obj, *unknown;
	int rc = conform_text(text, flags, &obj, &unknown);

	if (rc != ERR_INVALID)
		fail_msg("%s: accepted", text);
	if (strcmp(err_msg(), want) != 0)
		fail_msg("%s:\n got: %s\nwant: %s", text, err_msg(), want);
	assert_null(unknown);
	json_decref(obj);
}

/* The review's corruptions, with the Go decoder's texts (sigs.k8s.io/json). */
static void test_type_errors_as_the_go_decoder(void **state)
{
	(void)state;
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"a\":1}}", 0,
	             "json: cannot unmarshal number into Go struct field ConfigMap.data of type "
	             "string");
	expect_error(
	    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":\"str\"}}", 0,
	    "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels "
	    "of type map[string]string");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"ownerReferences\":"
	             "\"str\"}}",
	             0,
	             "json: cannot unmarshal string into Go struct field "
	             "ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"finalizers\":{}}}",
	             0,
	             "json: cannot unmarshal object into Go struct field "
	             "ObjectMeta.metadata.finalizers of type []string");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"containers\":[{\"name\":"
	             "\"a\"},{\"name\":\"b\",\"image\":5}]}}",
	             0,
	             "json: cannot unmarshal number into Go struct field "
	             "Container.spec.containers.image of type string");
	expect_error(
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"replicas\":1.5}}", 0,
	    "json: cannot unmarshal number 1.5 into Go struct field "
	    "DeploymentSpec.spec.replicas of type int32");
	expect_error("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"replicas\":"
	             "3000000000}}",
	             0,
	             "json: cannot unmarshal number 3000000000 into Go struct field "
	             "DeploymentSpec.spec.replicas of type int32");
	expect_error("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"strategy\":{"
	             "\"rollingUpdate\":{\"maxSurge\":true}}}}",
	             0,
	             "json: cannot unmarshal bool into Go struct field "
	             "RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32");
	/* Quantity's own decoder: no field, and it ends decoding */
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":1},"
	             "\"status\":{\"capacity\":{\"cpu\":{\"x\":1}}}}",
	             0,
	             "quantities must match the regular expression "
	             "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
	/* the first of two type errors */
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":1},\"spec\":{"
	             "\"nodeName\":2}}",
	             0,
	             "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name "
	             "of type string");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"creationTimestamp\":"
	             "\"yesterday\"}}",
	             0,
	             "parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse "
	             "\"yesterday\" as \"2006\"");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"creationTimestamp\":"
	             "\"2026-13-01T00:00:00Z\"}}",
	             0, "parsing time \"2026-13-01T00:00:00Z\": month out of range");
	expect_error(
	    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"spec\":{"
	    "\"renewTime\":\"2026-01-01T00:00:00Z\"}}",
	    0,
	    "parsing time \"2026-01-01T00:00:00Z\" as \"2006-01-02T15:04:05.000000Z07:00\": "
	    "cannot parse \"Z\" as \".000000\"");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"data\":{\"k\":\"abc\"}}", 0,
	             "illegal base64 data at input byte 0");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"data\":{\"k\":\"ab!d\"}}", 0,
	             "illegal base64 data at input byte 2");
	expect_error("{\"apiVersion\":5,\"kind\":\"DeleteOptions\"}", 0,
	             "json: cannot unmarshal number into Go struct field DeleteOptions.apiVersion "
	             "of type string");
}

/* The unstructured converter's texts, for strategic merge patches. */
static void test_type_errors_as_the_converter(void **state)
{
	(void)state;
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":\"str\"}}",
	             SCHEMA_CONVERTER, "cannot restore map from string");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"finalizers\":{}}}",
	             SCHEMA_CONVERTER, "cannot restore slice from map");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"spec\":\"x\"}", SCHEMA_CONVERTER,
	             "cannot restore struct from: string");
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":"
	             "{\"a\":1}}}",
	             SCHEMA_CONVERTER, "cannot convert int64 to string");
	expect_error(
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"replicas\":1.5}}",
	    SCHEMA_CONVERTER, "cannot convert float64 to int32");
	expect_error("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"replicas\":"
	             "\"3\"}}",
	             SCHEMA_CONVERTER, "unrecognized type: int32");
}

static void test_unknown_fields_dropped_and_reported(void **state)
{
	json_t *obj, *unknown;
	(void)state;

	assert_int_equal(conform_text("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"foo\":1,"
	                              "\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"b\"},"
	                              "\"bar\":{}},\"spec\":{\"containers\":[{\"name\":\"c\"},"
	                              "{\"name\":\"d\",\"imag\":\"x\"}]}}",
	                              0, &obj, &unknown),
	                 0);
	assert_non_null(unknown);
	char *u = jx_dump(unknown), *o = jx_dump(obj);
	assert_string_equal(u, "[\"foo\",\"metadata.bar\",\"spec.containers[1].imag\"]");
	assert_string_equal(o, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
	                       "\"p\",\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":["
	                       "{\"name\":\"c\"},{\"name\":\"d\"}]}}");
	free(u);
	free(o);
	json_decref(unknown);
	json_decref(obj);

	/* a nested object that embeds TypeMeta keeps apiVersion and kind */
	assert_int_equal(conform_text("{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\","
	                              "\"deleteOptions\":{\"apiVersion\":\"v1\",\"kind\":"
	                              "\"DeleteOptions\",\"dryRun\":[\"All\"]}}",
	                              0, &obj, &unknown),
	                 0);
	assert_null(unknown);
	assert_string_equal(jx_str(obj, "deleteOptions.kind"), "DeleteOptions");
	json_decref(obj);

	/* inlined messages' fields are known: a Volume's hostPath, a probe's exec */
	assert_int_equal(
	    conform_text("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"volumes\":"
	                 "[{\"name\":\"v\",\"hostPath\":{\"path\":\"/x\"}}],"
	                 "\"containers\":[{\"name\":\"c\",\"livenessProbe\":{\"exec\":"
	                 "{\"command\":[\"true\"]},\"periodSeconds\":5}}]}}",
	                 0, &obj, &unknown),
	    0);
	assert_null(unknown);
	json_decref(obj);
}

/* null is the zero value; quantities and times as upstream stores them. */
static void test_values_canonicalised(void **state)
{
	json_t *obj, *unknown;
	(void)state;

	assert_int_equal(
	    conform_text("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n\","
	                 "\"labels\":null,\"creationTimestamp\":\"2026-01-01T02:00:00.5+02:00\","
	                 "\"finalizers\":[null,\"f\"]},\"status\":{\"capacity\":{\"cpu\":\"1000m\","
	                 "\"memory\":\"1024Mi\",\"pods\":110,\"ephemeral-storage\":0.5,"
	                 "\"hugepages-2Mi\":1000000.0,"
	                 "\"x\":null}}}",
	                 0, &obj, &unknown),
	    0);
	char *o = jx_dump(obj);
	assert_string_equal(
	    o, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
	       "\"n\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"finalizers\":"
	       "[\"\",\"f\"]},\"status\":{\"capacity\":{\"cpu\":\"1\",\"memory\":"
	       "\"1Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"500m\",\"hugepages-2Mi\":"
	       "\"1M\",\"x\":\"0\"}}}");
	free(o);
	json_decref(obj);
}

/* The zero time decodes to Go's zero Time, which it writes as null: unset. */
static void test_zero_times_are_unset(void **state)
{
	json_t *obj, *unknown;
	(void)state;

	assert_int_equal(conform_text("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":"
	                              "\"Lease\",\"metadata\":{\"creationTimestamp\":"
	                              "\"0001-01-01T00:00:00Z\"},\"spec\":{\"renewTime\":"
	                              "\"0001-01-01T00:00:00.000000Z\",\"acquireTime\":"
	                              "\"2026-01-01T01:00:00.000001+01:00\"}}",
	                              0, &obj, &unknown),
	                 0);
	assert_null(jx_get(obj, "metadata.creationTimestamp"));
	assert_null(jx_get(obj, "spec.renewTime"));
	assert_string_equal(jx_str(obj, "spec.acquireTime"), "2026-01-01T00:00:00.000001Z");
	json_decref(obj);
	/* a day the month lacks, after everything else parsed */
	expect_error("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"creationTimestamp\":"
	             "\"2026-02-30T00:00:00Z\"}}",
	             0, "parsing time \"2026-02-30T00:00:00Z\": day out of range");
}

static void test_go_printing(void **state)
{
	char buf[64];
	(void)state;
	assert_string_equal(jx_real_go(1.5, buf, sizeof(buf)), "1.5");
	assert_string_equal(jx_real_go(1e6, buf, sizeof(buf)), "1e+06");
	assert_string_equal(jx_real_go(123456, buf, sizeof(buf)), "123456");
	assert_string_equal(jx_real_go(123456789, buf, sizeof(buf)), "1.23456789e+08");
	assert_string_equal(jx_real_go(0.0001, buf, sizeof(buf)), "0.0001");
	assert_string_equal(jx_real_go(0.00001, buf, sizeof(buf)), "1e-05");
	assert_string_equal(jx_real_go(-2.25, buf, sizeof(buf)), "-2.25");
	assert_string_equal(jx_real_go(0.1, buf, sizeof(buf)), "0.1");

	const char *text = "{\"metadata\":{\"labels\":\"str\",\"a\":[1,true,null,{}]}}";
	json_t *v = jx_parse(text, strlen(text));
	assert_non_null(v);
	char *s = jx_go_string(v);
	assert_string_equal(s, "map[metadata:map[a:[1 true <nil> map[]] labels:str]]");
	free(s);
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_protobuf_fixtures_decode_to_their_json),
	    cmocka_unit_test(test_json_fixtures_conform_unchanged),
	    cmocka_unit_test(test_type_errors_as_the_go_decoder),
	    cmocka_unit_test(test_type_errors_as_the_converter),
	    cmocka_unit_test(test_unknown_fields_dropped_and_reported),
	    cmocka_unit_test(test_values_canonicalised),
	    cmocka_unit_test(test_zero_times_are_unset),
	    cmocka_unit_test(test_go_printing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
