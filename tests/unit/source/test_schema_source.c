/*
 * The schema is the single source. This suite is linked with a copy of
 * src/api/schema_data.c that has one more line in ConfigMap's table (a
 * string "alias", protobuf field 99: add_field.cmake) and no other change,
 * and finds the field everywhere the table is read: the typed decoding and
 * fieldValidation=Strict of a real API server, its OpenAPI v2 and v3
 * documents, and the protobuf decoder. test_openapi, linked with the real
 * table, sees no such field (test_no_alias_field).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/openapi.h"
#include "api/protobuf.h"
#include "api/schema.h"
#include "base/err.h"
#include "base/jx.h"
#include "testenv.h"

#include <string.h>

static void test_validation(void **state)
{
	const struct schema_msg *m = schema_kind_msg("v1", "ConfigMap");
	json_t *cm = json_pack("{s:s,s:s,s:{s:s},s:s}", "apiVersion", "v1", "kind", "ConfigMap",
	                       "metadata", "name", "front", "alias", "front-door");
	json_t *unknown = NULL;

	assert_int_equal(schema_conform(cm, m, SCHEMA_REPORT, 0, &unknown), 0);
	assert_null(unknown);
	assert_string_equal(jx_str(cm, "alias"), "front-door");
	json_decref(cm);

	cm = json_pack("{s:s,s:s,s:i}", "apiVersion", "v1", "kind", "ConfigMap", "alias", 5);
	assert_int_equal(schema_conform(cm, m, SCHEMA_REPORT, 0, &unknown), ERR_INVALID);
	assert_string_equal(err_msg(), "json: cannot unmarshal number into Go struct field "
	                               "ConfigMap.alias of type string");
	json_decref(cm);
}

static void test_openapi(void **state)
{
	json_t *v3 = openapi_v3("", "v1"), *v2 = openapi_v2();
	const char *doc = "Another name people know this ConfigMap by.";

	assert_string_equal(jx_str(json_object_get(jx_get(v3, "components.schemas"),
	                                           "io.k8s.api.core.v1.ConfigMap"),
	                           "properties.alias.description"),
	                    doc);
	assert_string_equal(jx_str(json_object_get(json_object_get(v2, "definitions"),
	                                           "io.k8s.api.core.v1.ConfigMap"),
	                           "properties.alias.type"),
	                    "string");
	json_decref(v3);
	json_decref(v2);
}

static void put_varint(unsigned char **p, uint64_t v)
{
	do {
		*(*p)++ = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void put_str(unsigned char **p, unsigned field, const char *s)
{
	put_varint(p, (uint64_t)field << 3 | 2);
	put_varint(p, strlen(s));
	memcpy(*p, s, strlen(s));
	*p += strlen(s);
}

static void test_protobuf(void **state)
{
	unsigned char raw[64], *r = raw, body[128], *b = body;
	json_t *obj = NULL;

	put_str(&r, 99, "front-door"); /* ConfigMap.alias */
	memcpy(b, PB_MAGIC, PB_MAGIC_LEN);
	b += PB_MAGIC_LEN;
	put_varint(&b, 1 << 3 | 2); /* Unknown.typeMeta */
	put_varint(&b, 2 + 2 + 2 + strlen("ConfigMap"));
	put_str(&b, 1, "v1");
	put_str(&b, 2, "ConfigMap");
	put_varint(&b, 2 << 3 | 2); /* Unknown.raw */
	put_varint(&b, (uint64_t)(r - raw));
	memcpy(b, raw, (size_t)(r - raw));
	b += r - raw;

	assert_int_equal(pb_parse(body, (size_t)(b - body), &obj), 0);
	assert_string_equal(jx_str(obj, "alias"), "front-door");
	json_decref(obj);
}

/* A real API server: a Strict create keeps the field, and its OpenAPI
 * document publishes it. */
static void test_api_server(void **state)
{
	struct testenv e;
	struct testenv_result res;
	json_t *cm = json_pack("{s:s,s:s,s:{s:s},s:s}", "apiVersion", "v1", "kind", "ConfigMap",
	                       "metadata", "name", "front", "alias", "front-door");

	testenv_quiet_logs();
	testenv_start_inproc(&e, "schema-source");
	res = testenv_call(&e, "POST",
	                   "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", cm);
	json_decref(cm);
	assert_int_equal(res.status, 201);
	assert_string_equal(jx_str(res.body, "alias"), "front-door");
	json_decref(res.body);
	res = testenv_call(&e, "GET", "/api/v1/namespaces/default/configmaps/front", NULL);
	assert_string_equal(jx_str(res.body, "alias"), "front-door");
	json_decref(res.body);
	res = testenv_call(&e, "GET", "/openapi/v3/api/v1", NULL);
	assert_int_equal(res.status, 200);
	assert_string_equal(jx_str(json_object_get(jx_get(res.body, "components.schemas"),
	                                           "io.k8s.api.core.v1.ConfigMap"),
	                           "properties.alias.type"),
	                    "string");
	json_decref(res.body);
	testenv_stop(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_validation),
	    cmocka_unit_test(test_openapi),
	    cmocka_unit_test(test_protobuf),
	    cmocka_unit_test(test_api_server),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
