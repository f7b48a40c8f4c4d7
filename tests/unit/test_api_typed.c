/*
 * Typed bodies (issue 10, item 5), in process: every body is decoded as
 * upstream decodes it into the kind's Go type, and answered with the Go
 * decoder's texts. What this file pins, exactly as upstream 1.32 writes it:
 *
 *   - create and update with a value of the wrong type: 400 BadRequest
 *     `<Kind> in version "v1" cannot be handled as a <Kind>: json: cannot
 *     unmarshal ...` (rest.go's transformDecodeError), nothing stored;
 *   - a merge patch that leaves a wrong type: 422 Invalid on the field
 *     "patch", the patched object as the value (patch.go); a strategic
 *     merge patch: the same with Go's %v of the patch and the unstructured
 *     converter's texts;
 *   - fieldValidation: Strict refuses unknown fields, Warn (the default)
 *     says so in Warning headers, Ignore is silent, anything else is 422
 *     `<Verb>Options.meta.k8s.io "" is invalid`, checked before the body;
 *   - what is stored is what Go would encode: quantities and times in their
 *     canonical form, null as the zero value.
 *
 * tests/e2e/test_apiserver.py's test_typed_fields_as_upstream drives the
 * same through HTTPS and kubectl; these run in milliseconds, on every unit
 * run, under ASan too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMS "/api/v1/namespaces/default/configmaps"
#define PODS "/api/v1/namespaces/default/pods"
#define NODES "/api/v1/nodes"
#define MERGE "application/merge-patch+json"
#define SMP "application/strategic-merge-patch+json"
/* resource.ErrFormatWrong's text. */
#define QTY_RE                                                                                     \
	"quantities must match the regular expression "                                            \
	"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "typed");
	*state = e;
	return 0;
}

/* A request that must be refused with upstream's Status, exactly; a
 * failure names the request. */
static void expect_failure(struct testenv *e, const char *method, const char *target,
                           const char *content_type, const char *body, int code, const char *reason,
                           const char *message)
{
	struct testenv_reply r = testenv_as_admin(e, method, target, content_type, body);
	char *why = testenv_status_mismatch(&r, code, reason, message), buf[2048];

	testenv_reply_free(&r);
	if (why) {
		snprintf(buf, sizeof(buf), "%s %s: %s", method, target, why);
		free(why);
		fail_msg("%s", buf);
	}
}

static void expect_absent(struct testenv *e, const char *target)
{
	struct testenv_reply r = testenv_as_admin(e, "GET", target, NULL, NULL);
	assert_int_equal(r.status, 404);
	testenv_reply_free(&r);
}

/* The object at target, as GET reads it back (the caller's). */
static json_t *get(struct testenv *e, const char *target)
{
	struct testenv_reply r = testenv_as_admin(e, "GET", target, NULL, NULL);
	json_t *obj;
	if (r.status != 200)
		fail_msg("GET %s: %d %s", target, r.status, r.text);
	obj = json_incref(r.body);
	testenv_reply_free(&r);
	return obj;
}

static void assert_json(const json_t *got, const char *want_text)
{
	json_t *want = json_loads(want_text, 0, NULL);
	char *text = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	assert_non_null(want);
	if (!json_equal(got, want))
		fail_msg("got %s, want %s", text ? text : "(null)", want_text);
	free(text);
	json_decref(want);
}

/* The typed-node every patch test works on: created once, with its
 * quantities canonicalised as Quantity.String() writes them. */
static void ensure_node(struct testenv *e)
{
	struct testenv_reply r = testenv_as_admin(e, "GET", NODES "/typed-node", NULL, NULL);
	int status = r.status;
	testenv_reply_free(&r);
	if (status == 200)
		return;
	r = testenv_as_admin(e, "POST", NODES, NULL,
	                     "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
	                     "\"typed-node\"},\"status\":{\"capacity\":{\"cpu\":\"4000m\","
	                     "\"memory\":\"2048Mi\",\"pods\":110}}}");
	if (r.status != 201)
		fail_msg("create node: %d %s", r.status, r.text);
	testenv_reply_free(&r);
}

/* ---- create and update: 400 "cannot be handled as" ------------------------- */

static void test_create_wrong_data_type_is_400(void **state)
{
	struct testenv *e = *state;

	expect_failure(e, "POST", CMS, NULL,
	               "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	               "\"typed-cm\",\"namespace\":\"default\"},\"data\":{\"a\":1}}",
	               400, "BadRequest",
	               "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: "
	               "cannot unmarshal number into Go struct field ConfigMap.data of type "
	               "string");
	/* Refused whole: nothing of it was stored. */
	expect_absent(e, CMS "/typed-cm");
}

/* ObjectMeta's fields decode as Go's: the struct is ObjectMeta, the path
 * the JSON names from the top. */
static void test_create_wrong_metadata_types_are_400(void **state)
{
	static const struct {
		const char *metadata, *message;
	} cases[] = {
	    {"\"labels\":\"str\"",
	     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of "
	     "type map[string]string"},
	    {"\"ownerReferences\":\"str\"",
	     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata."
	     "ownerReferences of type []v1.OwnerReference"},
	    {"\"finalizers\":{}",
	     "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.finalizers "
	     "of type []string"},
	    {"\"creationTimestamp\":5",
	     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata."
	     "creationTimestamp of type string"},
	};
	struct testenv *e = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char body[256], message[512];
		snprintf(body, sizeof(body),
		         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
		         "\"bad-meta\",%s}}",
		         cases[i].metadata);
		snprintf(message, sizeof(message),
		         "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: %s",
		         cases[i].message);
		expect_failure(e, "POST", CMS, NULL, body, 400, "BadRequest", message);
	}
	expect_absent(e, CMS "/bad-meta");
}

/* An update decodes its body as a create does. */
static void test_update_wrong_type_is_400(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = testenv_as_admin(
	    e, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"upd\"},\"data\":{\"a\":\"1\"}}");
	json_t *cm;

	assert_int_equal(r.status, 201);
	testenv_reply_free(&r);
	expect_failure(e, "PUT", CMS "/upd", NULL,
	               "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	               "\"upd\"},\"data\":{\"a\":true}}",
	               400, "BadRequest",
	               "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: "
	               "cannot unmarshal bool into Go struct field ConfigMap.data of type string");
	cm = get(e, CMS "/upd");
	assert_string_equal(jx_str(cm, "data.a"), "1");
	json_decref(cm);
}

/* metav1.Time.UnmarshalJSON returns time.Parse's error as it is. */
static void test_invalid_time_is_go_parse_error(void **state)
{
	struct testenv *e = *state;

	expect_failure(e, "POST", CMS, NULL,
	               "{\"metadata\":{\"name\":\"bad-time\",\"creationTimestamp\":"
	               "\"yesterday\"}}",
	               400, "BadRequest",
	               "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: parsing "
	               "time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse "
	               "\"yesterday\" as \"2006\"");
	expect_failure(e, "POST", CMS, NULL,
	               "{\"metadata\":{\"name\":\"bad-time\",\"creationTimestamp\":"
	               "\"2026-13-01T00:00:00Z\"}}",
	               400, "BadRequest",
	               "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: parsing "
	               "time \"2026-13-01T00:00:00Z\": month out of range");
	expect_absent(e, CMS "/bad-time");
}

/* ---- patches: 422 on the field "patch" ------------------------------------- */

/* Go's %q of a printable ASCII string. */
static char *go_quote(const char *s)
{
	char *out = malloc(2 * strlen(s) + 3), *p = out;
	assert_non_null(out);
	*p++ = '"';
	for (; *s; s++) {
		assert_true(*s >= 0x20 && *s < 0x7f);
		if (*s == '"' || *s == '\\')
			*p++ = '\\';
		*p++ = *s;
	}
	*p++ = '"';
	*p = '\0';
	return out;
}

/* The one cause of a patch's 422: FieldValueInvalid on "patch", its message
 * the Status's without the leading ` "" is invalid: patch: `. */
static void assert_patch_cause(const struct testenv_reply *r)
{
	json_t *causes = jx_get(r->body, "details.causes");
	const char *msg = jx_str(r->body, "message");
	const char *prefix = " \"\" is invalid: patch: ";

	assert_int_equal(json_array_size(causes), 1);
	assert_string_equal(jx_str(json_array_get(causes, 0), "field"), "patch");
	assert_string_equal(jx_str(json_array_get(causes, 0), "reason"), "FieldValueInvalid");
	assert_int_equal(strncmp(msg, prefix, strlen(prefix)), 0);
	assert_string_equal(jx_str(json_array_get(causes, 0), "message"), msg + strlen(prefix));
	/* NewInvalid with an empty GroupKind and name: details says neither. */
	assert_null(jx_get(r->body, "details.name"));
	assert_null(jx_get(r->body, "details.kind"));
	assert_null(jx_get(r->body, "details.group"));
}

/* A merge patch's result is decoded into the Node: the quantity's parse
 * error, the patched object (as json.Marshal sorts it) as the value. */
static void test_merge_patch_bad_quantity_is_422_with_patched_object(void **state)
{
	struct testenv *e = *state;
	json_t *node, *cap;
	char *patched, *quoted, *want;
	struct testenv_reply r;

	ensure_node(e);
	node = get(e, NODES "/typed-node");
	cap = jx_get(node, "status.capacity");
	json_object_set_new(cap, "cpu", json_pack("{s:i}", "x", 1));
	patched = json_dumps(node, JSON_COMPACT | JSON_SORT_KEYS);
	quoted = go_quote(patched);
	assert_true(
	    asprintf(&want, " \"\" is invalid: patch: Invalid value: %s: %s", quoted, QTY_RE) > 0);

	r = testenv_as_admin(e, "PATCH", NODES "/typed-node/status", MERGE,
	                     "{\"status\":{\"capacity\":{\"cpu\":{\"x\":1}}}}");
	testenv_assert_status(&r, 422, "Invalid", want);
	assert_patch_cause(&r);
	testenv_reply_free(&r);

	/* Refused: the capacity is as it was. */
	json_decref(node);
	node = get(e, NODES "/typed-node");
	assert_string_equal(jx_str(node, "status.capacity.cpu"), "4");
	json_decref(node);
	free(want);
	free(quoted);
	free(patched);
}

/* The metadata corruptions of the review, as merge patches: 422, the Go
 * decoder's text after the patched object. */
static void test_merge_patch_wrong_metadata_types_are_422(void **state)
{
	static const struct {
		const char *patch, *error;
	} cases[] = {
	    {"{\"metadata\":{\"labels\":\"str\"}}",
	     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of "
	     "type map[string]string"},
	    {"{\"metadata\":{\"ownerReferences\":\"str\"}}",
	     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata."
	     "ownerReferences of type []v1.OwnerReference"},
	    {"{\"metadata\":{\"finalizers\":{}}}",
	     "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.finalizers "
	     "of type []string"},
	};
	struct testenv *e = *state;

	ensure_node(e);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct testenv_reply r =
		    testenv_as_admin(e, "PATCH", NODES "/typed-node", MERGE, cases[i].patch);
		const char *msg = jx_str(r.body, "message");
		size_t n = msg ? strlen(msg) : 0, m = strlen(cases[i].error);

		assert_int_equal(r.status, 422);
		assert_string_equal(jx_str(r.body, "reason"), "Invalid");
		assert_non_null(msg);
		/* ` "" is invalid: patch: Invalid value: "{...}": <error>` */
		assert_int_equal(strncmp(msg, " \"\" is invalid: patch: Invalid value: \"{", 40),
		                 0);
		assert_true(n > m + 3);
		assert_int_equal(strncmp(msg + n - m - 3, "\": ", 3), 0);
		assert_string_equal(msg + n - m, cases[i].error);
		assert_patch_cause(&r);
		testenv_reply_free(&r);
	}
}

/* Strategic merge: the patch is applied to a map and converted, so the
 * value is Go's %v of the patch and the errors are the converter's. */
static void test_strategic_merge_patch_errors_are_the_converters(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	ensure_node(e);
	r = testenv_as_admin(e, "PATCH", NODES "/typed-node", SMP,
	                     "{\"metadata\":{\"labels\":\"str\"}}");
	testenv_assert_status(
	    &r, 422, "Invalid",
	    " \"\" is invalid: patch: Invalid value: \"map[metadata:map[labels:str]]\": "
	    "cannot restore map from string");
	assert_patch_cause(&r);
	testenv_reply_free(&r);

	r = testenv_as_admin(e, "PATCH", NODES "/typed-node/status", SMP,
	                     "{\"status\":{\"capacity\":{\"cpu\":{\"x\":1}}}}");
	testenv_assert_status(&r, 422, "Invalid",
	                      " \"\" is invalid: patch: Invalid value: "
	                      "\"map[status:map[capacity:map[cpu:map[x:1]]]]\": " QTY_RE);
	assert_patch_cause(&r);
	testenv_reply_free(&r);

	/* A bool where a bool goes is fine; a string is not. */
	r = testenv_as_admin(e, "PATCH", NODES "/typed-node", SMP,
	                     "{\"spec\":{\"unschedulable\":\"yes\"}}");
	testenv_assert_status(&r, 422, "Invalid",
	                      " \"\" is invalid: patch: Invalid value: "
	                      "\"map[spec:map[unschedulable:yes]]\": unrecognized type: bool");
	testenv_reply_free(&r);
}

/* ---- fieldValidation --------------------------------------------------------- */

#define UNKNOWN_FIELDS_CM                                                                          \
	"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","             \
	"\"foo\":\"x\"},\"data\":{\"a\":\"1\"},\"spec\":{\"x\":1}}"

static struct testenv_reply create_unknown(struct testenv *e, const char *query, const char *name)
{
	char target[128], body[256];
	snprintf(target, sizeof(target), CMS "%s", query);
	snprintf(body, sizeof(body), UNKNOWN_FIELDS_CM, name);
	return testenv_as_admin(e, "POST", target, NULL, body);
}

/* Strict: every unknown field, by its full path, in the order met. */
static void test_strict_refuses_unknown_fields(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = create_unknown(e, "?fieldValidation=Strict", "strict");

	testenv_assert_status(
	    &r, 400, "BadRequest",
	    "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict "
	    "decoding error: unknown field \"metadata.foo\", unknown field \"spec\"");
	testenv_reply_free(&r);
	expect_absent(e, CMS "/strict");
}

/* Warn, the default: stored without them, one Warning header each. */
static void test_warn_is_the_default_and_drops_unknown_fields(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = create_unknown(e, "", "warned");
	json_t *cm;

	assert_int_equal(r.status, 201);
	assert_string_equal(apiserver_exchange_header(r.x, "Warning", 0),
	                    "299 - \"unknown field \\\"metadata.foo\\\"\"");
	assert_string_equal(apiserver_exchange_header(r.x, "Warning", 1),
	                    "299 - \"unknown field \\\"spec\\\"\"");
	assert_null(apiserver_exchange_header(r.x, "Warning", 2));
	assert_null(jx_get(r.body, "spec"));
	testenv_reply_free(&r);

	cm = get(e, CMS "/warned");
	assert_null(jx_get(cm, "spec"));
	assert_null(jx_get(cm, "metadata.foo"));
	assert_string_equal(jx_str(cm, "data.a"), "1");
	json_decref(cm);

	r = create_unknown(e, "?fieldValidation=Warn", "warned-too");
	assert_int_equal(r.status, 201);
	assert_string_equal(apiserver_exchange_header(r.x, "Warning", 1),
	                    "299 - \"unknown field \\\"spec\\\"\"");
	testenv_reply_free(&r);
}

static void test_ignore_drops_unknown_fields_silently(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = create_unknown(e, "?fieldValidation=Ignore", "ignored");
	json_t *cm;

	assert_int_equal(r.status, 201);
	assert_null(apiserver_exchange_header(r.x, "Warning", 0));
	testenv_reply_free(&r);
	cm = get(e, CMS "/ignored");
	assert_null(jx_get(cm, "spec"));
	assert_null(jx_get(cm, "metadata.foo"));
	json_decref(cm);
}

/* A patch's unknown fields are the patched object's: Strict refuses them
 * on the field "patch" (jsonPatcher's strict branch), Warn says so. */
static void test_patch_unknown_fields_follow_field_validation(void **state)
{
	struct testenv *e = *state;
	json_t *node;
	char *patched, *quoted, *want;
	struct testenv_reply r;

	ensure_node(e);
	node = get(e, NODES "/typed-node");
	jx_set(node, "spec.foo", json_integer(1));
	patched = json_dumps(node, JSON_COMPACT | JSON_SORT_KEYS);
	quoted = go_quote(patched);
	assert_true(asprintf(&want,
	                     " \"\" is invalid: patch: Invalid value: %s: strict decoding error: "
	                     "unknown field \"spec.foo\"",
	                     quoted) > 0);
	r = testenv_as_admin(e, "PATCH", NODES "/typed-node?fieldValidation=Strict", MERGE,
	                     "{\"spec\":{\"foo\":1}}");
	testenv_assert_status(&r, 422, "Invalid", want);
	assert_patch_cause(&r);
	testenv_reply_free(&r);

	r = testenv_as_admin(e, "PATCH", NODES "/typed-node", MERGE, "{\"spec\":{\"foo\":1}}");
	assert_int_equal(r.status, 200);
	assert_string_equal(apiserver_exchange_header(r.x, "Warning", 0),
	                    "299 - \"unknown field \\\"spec.foo\\\"\"");
	assert_null(jx_get(r.body, "spec.foo"));
	testenv_reply_free(&r);
	json_decref(node);
	free(want);
	free(quoted);
	free(patched);
}

/* Anything else is the options' 422, before the body is even read. */
static void test_bad_field_validation_is_422_before_the_body(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r =
	    testenv_as_admin(e, "POST", CMS "?fieldValidation=strict", NULL,
	                     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
	                     "\"typed-cm2\"}}");
	json_t *cause;

	testenv_assert_status(
	    &r, 422, "Invalid",
	    "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
	    "value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
	assert_string_equal(jx_str(r.body, "details.group"), "meta.k8s.io");
	assert_string_equal(jx_str(r.body, "details.kind"), "CreateOptions");
	assert_null(jx_get(r.body, "details.name"));
	cause = json_array_get(jx_get(r.body, "details.causes"), 0);
	assert_string_equal(jx_str(cause, "reason"), "FieldValueNotSupported");
	assert_string_equal(jx_str(cause, "field"), "fieldValidation");
	assert_string_equal(jx_str(cause, "message"),
	                    "Unsupported value: \"strict\": supported values: \"\", \"Ignore\", "
	                    "\"Strict\", \"Warn\"");
	testenv_reply_free(&r);
	expect_absent(e, CMS "/typed-cm2");

	expect_failure(e, "POST", CMS "?fieldValidation=x", NULL, "{not json", 422, "Invalid",
	               "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
	               "value: \"x\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
	r = testenv_as_admin(e, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"fv-upd\"}}");
	assert_int_equal(r.status, 201);
	testenv_reply_free(&r);
	expect_failure(e, "PUT", CMS "/fv-upd?fieldValidation=x", NULL, "{not json", 422, "Invalid",
	               "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
	               "value: \"x\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
	ensure_node(e);
	r = testenv_as_admin(e, "PATCH", NODES "/typed-node?fieldValidation=x", MERGE, "{not json");
	testenv_assert_status(
	    &r, 422, "Invalid",
	    "PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
	    "value: \"x\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
	assert_string_equal(jx_str(r.body, "details.kind"), "PatchOptions");
	assert_null(jx_get(r.body, "details.name"));
	testenv_reply_free(&r);
}

/*
 * Upstream's update handler (update.go) validates its options and decodes
 * the body before it asks the storage for the object, so a PUT to an
 * object that does not exist is still the options' 422, or the decoder's
 * 400 — not 404. PATCH has the same order.
 */
static void test_update_checks_options_and_body_before_the_object(void **state)
{
	struct testenv *e = *state;

	expect_failure(e, "PATCH", CMS "/missing?fieldValidation=x", MERGE, "{}", 422, "Invalid",
	               "PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
	               "value: \"x\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
	expect_failure(e, "PUT", CMS "/missing?fieldValidation=x", NULL,
	               "{\"metadata\":{\"name\":\"missing\"}}", 422, "Invalid",
	               "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
	               "value: \"x\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
	expect_failure(e, "PUT", CMS "/missing", NULL,
	               "{\"metadata\":{\"name\":\"missing\"},\"data\":{\"a\":1}}", 400,
	               "BadRequest",
	               "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: "
	               "cannot unmarshal number into Go struct field ConfigMap.data of type "
	               "string");
	/* checkName, also before the lookup; an empty name is not the URL's. */
	expect_failure(e, "PUT", CMS "/missing", NULL, "{\"metadata\":{\"name\":\"other\"}}", 400,
	               "BadRequest",
	               "the name of the object (other) does not match the name on the URL "
	               "(missing)");
	expect_failure(e, "PUT", CMS "/missing", NULL, "{\"metadata\":{\"name\":\"\"}}", 400,
	               "BadRequest",
	               "the name of the object () does not match the name on the URL (missing)");
}

/* ---- what is stored: canonical quantities and times, null as zero ----------- */

/* Quantity.String(): 4000m -> 4, 2048Mi -> 2Gi, a bare number as a string. */
static void test_node_capacity_is_canonical(void **state)
{
	struct testenv *e = *state;
	json_t *node;

	ensure_node(e);
	node = get(e, NODES "/typed-node");
	assert_json(jx_get(node, "status.capacity"),
	            "{\"cpu\":\"4\",\"memory\":\"2Gi\",\"pods\":\"110\"}");
	json_decref(node);
}

static void test_pod_quantities_are_canonical(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = testenv_as_admin(
	    e, "POST", PODS, NULL,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"typed-pod\"},"
	    "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{"
	    "\"requests\":{\"cpu\":\"1000m\",\"memory\":\"1024Mi\"},"
	    "\"limits\":{\"cpu\":1.5,\"memory\":\"0.5Gi\"}}}]}}");
	json_t *pod, *res;

	if (r.status != 201)
		fail_msg("create pod: %d %s", r.status, r.text);
	res = json_object_get(json_array_get(jx_get(r.body, "spec.containers"), 0), "resources");
	assert_json(res, "{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},"
	                 "\"limits\":{\"cpu\":\"1500m\",\"memory\":\"512Mi\"}}");
	testenv_reply_free(&r);
	/* and so it was stored */
	pod = get(e, PODS "/typed-pod");
	res = json_object_get(json_array_get(jx_get(pod, "spec.containers"), 0), "resources");
	assert_json(res, "{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},"
	                 "\"limits\":{\"cpu\":\"1500m\",\"memory\":\"512Mi\"}}");
	assert_string_equal(jx_str(json_array_get(jx_get(pod, "spec.containers"), 0), "image"),
	                    "busybox");
	json_decref(pod);
}

/* ResourceQuota and LimitRange are not served by cube: a Node's
 * allocatable has the other forms — a fraction of a binary suffix, a plain
 * byte count, a bare zero, an exponent
 * (1e2 -> 100: the exponent is made a multiple of three). */
static void test_node_allocatable_is_canonical(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = testenv_as_admin(
	    e, "POST", NODES, NULL,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"alloc-node\"},"
	    "\"status\":{\"allocatable\":{\"cpu\":\"3500m\",\"memory\":\"0.5Gi\","
	    "\"ephemeral-storage\":\"1500000000\",\"hugepages-2Mi\":0,\"pods\":\"1e2\"}}}");
	json_t *node;

	if (r.status != 201)
		fail_msg("create node: %d %s", r.status, r.text);
	testenv_reply_free(&r);
	node = get(e, NODES "/alloc-node");
	assert_json(jx_get(node, "status.allocatable"),
	            "{\"cpu\":\"3500m\",\"memory\":\"512Mi\",\"ephemeral-storage\":\"1500M\","
	            "\"hugepages-2Mi\":\"0\",\"pods\":\"100\"}");
	json_decref(node);
}

/* A null field is unset; a null map value is the element's zero value (Go
 * stores the key with ""). */
static void test_null_is_the_zero_value(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = testenv_as_admin(
	    e, "POST", CMS, NULL,
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"nulls\","
	    "\"labels\":null,\"annotations\":{\"k\":null}},\"immutable\":null,"
	    "\"data\":{\"a\":null,\"b\":\"x\"},\"binaryData\":null}");
	json_t *cm, *meta;

	if (r.status != 201)
		fail_msg("create: %d %s", r.status, r.text);
	testenv_reply_free(&r);
	cm = get(e, CMS "/nulls");
	meta = json_object_get(cm, "metadata");
	assert_null(json_object_get(cm, "immutable"));
	assert_null(json_object_get(cm, "binaryData"));
	assert_null(json_object_get(meta, "labels"));
	assert_json(json_object_get(meta, "annotations"), "{\"k\":\"\"}");
	assert_json(json_object_get(cm, "data"), "{\"a\":\"\",\"b\":\"x\"}");
	json_decref(cm);
}

/*
 * Upstream encodes what it decoded, and encoding/json's omitempty leaves
 * out an empty map, slice or string (ObjectMeta's labels, finalizers,
 * generateName, ConfigMap's data); a *bool false is kept.
 */
static void test_empty_omitempty_fields_are_dropped(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r =
	    testenv_as_admin(e, "POST", CMS, NULL,
	                     "{\"metadata\":{\"name\":\"empties\",\"labels\":{},\"finalizers\":[],"
	                     "\"generateName\":\"\"},\"data\":{},\"immutable\":false}");
	json_t *cm, *meta;

	if (r.status != 201)
		fail_msg("create: %d %s", r.status, r.text);
	testenv_reply_free(&r);
	cm = get(e, CMS "/empties");
	meta = json_object_get(cm, "metadata");
	assert_true(json_is_false(json_object_get(cm, "immutable")));
	if (json_object_get(meta, "labels") || json_object_get(meta, "finalizers") ||
	    json_object_get(meta, "generateName") || json_object_get(cm, "data")) {
		char *text = json_dumps(cm, JSON_COMPACT);
		char buf[1024];
		snprintf(buf, sizeof(buf), "%s", text);
		free(text);
		json_decref(cm);
		fail_msg("empty omitempty fields kept: %s", buf);
	}
	json_decref(cm);
}

/* metav1.Time is written as t.UTC().Format(RFC3339): the offset applied,
 * the fraction gone. */
static void test_times_are_canonical(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r = testenv_as_admin(
	    e, "POST", NODES, NULL,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"timed-node\"},"
	    "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
	    "\"lastHeartbeatTime\":\"2024-01-01T10:00:00+02:00\","
	    "\"lastTransitionTime\":\"2024-01-01T08:00:00.123456Z\"}]}}");
	json_t *node, *cond;

	if (r.status != 201)
		fail_msg("create node: %d %s", r.status, r.text);
	testenv_reply_free(&r);
	node = get(e, NODES "/timed-node");
	cond = json_array_get(jx_get(node, "status.conditions"), 0);
	assert_string_equal(jx_str(cond, "lastHeartbeatTime"), "2024-01-01T08:00:00Z");
	assert_string_equal(jx_str(cond, "lastTransitionTime"), "2024-01-01T08:00:00Z");
	json_decref(node);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_wrong_data_type_is_400),
	    cmocka_unit_test(test_create_wrong_metadata_types_are_400),
	    cmocka_unit_test(test_update_wrong_type_is_400),
	    cmocka_unit_test(test_invalid_time_is_go_parse_error),
	    cmocka_unit_test(test_merge_patch_bad_quantity_is_422_with_patched_object),
	    cmocka_unit_test(test_merge_patch_wrong_metadata_types_are_422),
	    cmocka_unit_test(test_strategic_merge_patch_errors_are_the_converters),
	    cmocka_unit_test(test_strict_refuses_unknown_fields),
	    cmocka_unit_test(test_warn_is_the_default_and_drops_unknown_fields),
	    cmocka_unit_test(test_ignore_drops_unknown_fields_silently),
	    cmocka_unit_test(test_patch_unknown_fields_follow_field_validation),
	    cmocka_unit_test(test_bad_field_validation_is_422_before_the_body),
	    cmocka_unit_test(test_update_checks_options_and_body_before_the_object),
	    cmocka_unit_test(test_node_capacity_is_canonical),
	    cmocka_unit_test(test_pod_quantities_are_canonical),
	    cmocka_unit_test(test_node_allocatable_is_canonical),
	    cmocka_unit_test(test_null_is_the_zero_value),
	    cmocka_unit_test(test_empty_omitempty_fields_are_dropped),
	    cmocka_unit_test(test_times_are_canonical),
	};
	return cmocka_run_group_tests(tests, setup, testenv_teardown);
}
