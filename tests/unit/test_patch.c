/* JSON patch, merge patch and strategic merge patch. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/patch.h"
#include "base/err.h"
#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *J(const char *s)
{
	json_t *v = jx_parse(s, strlen(s));
	if (!v)
		fail_msg("bad test JSON %s: %s", s, err_msg());
	return v;
}

/* Compare got (consumed) with the JSON text want; arrays in order. */
static void expect_json(json_t *got, const char *want)
{
	json_t *w = J(want);
	if (!got)
		fail_msg("got NULL (%s / %s), want %s", err_msg(), patch_detail(), want);
	if (!json_equal(got, w)) {
		char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
		fprintf(stderr, "got  %s\nwant %s\n", g, want);
		free(g);
		fail_msg("JSON differs");
	}
	json_decref(w);
	json_decref(got);
}

enum kind { MERGE, JSONP, SMP };

/* Apply, check the result and that the target was left alone. */
static void check(enum kind k, const char *kind, const char *target, const char *patch,
                  const char *want)
{
	json_t *t = J(target), *p = J(patch), *before = json_deep_copy(t), *pb = json_deep_copy(p);
	json_t *r = k == MERGE   ? patch_merge(t, p)
	            : k == JSONP ? patch_json(t, p)
	                         : patch_strategic(t, p, kind);
	expect_json(r, want);
	assert_true(json_equal(t, before));
	assert_true(json_equal(p, pb));
	json_decref(t);
	json_decref(p);
	json_decref(before);
	json_decref(pb);
}

/* Expect failure with code; the detail (or message) must contain `part`. */
static void check_fail(enum kind k, const char *kind, const char *target, const char *patch,
                       int code, const char *part)
{
	json_t *t = J(target), *p = J(patch), *before = json_deep_copy(t);
	json_t *r = k == JSONP ? patch_json(t, p) : patch_strategic(t, p, kind);
	if (r) {
		char *g = json_dumps(r, JSON_COMPACT | JSON_ENCODE_ANY);
		fail_msg("expected failure, got %s", g);
	}
	assert_true(json_equal(t, before));
	if (code == ERR_UNPROCESSABLE)
		assert_string_equal(err_msg(), PATCH_MSG_REJECTED);
	if (part && !strstr(patch_detail(), part))
		fail_msg("detail \"%s\" lacks \"%s\"", patch_detail(), part);
	json_decref(t);
	json_decref(p);
	json_decref(before);
	(void)code;
}

/* ------------------------------ RFC 7386 ------------------------------ */

static void test_merge_rfc7386_appendix_a(void **state)
{
	static const char *const cases[][3] = {
	    {"{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
	    {"{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}"},
	    {"{\"a\":\"b\"}", "{\"a\":null}", "{}"},
	    {"{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}"},
	    {"{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
	    {"{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}"},
	    {"{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}"},
	    {"{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}"},
	    {"[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]"},
	    {"{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]"},
	    {"{\"a\":\"foo\"}", "null", "null"},
	    {"{\"a\":\"foo\"}", "\"bar\"", "\"bar\""},
	    {"{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}"},
	    {"[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}"},
	    {"{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(MERGE, NULL, cases[i][0], cases[i][1], cases[i][2]);
}

static void test_merge_rfc7386_section3(void **state)
{
	check(MERGE, NULL,
	      "{\"title\":\"Goodbye!\",\"author\":{\"givenName\":\"John\",\"familyName\":\"Doe\"},"
	      "\"tags\":[\"example\",\"sample\"],\"content\":\"This will be unchanged\"}",
	      "{\"title\":\"Hello!\",\"phoneNumber\":\"+01-123-456-7890\",\"author\":{"
	      "\"familyName\":null},\"tags\":[\"example\"]}",
	      "{\"title\":\"Hello!\",\"author\":{\"givenName\":\"John\"},\"tags\":[\"example\"],"
	      "\"content\":\"This will be unchanged\",\"phoneNumber\":\"+01-123-456-7890\"}");
}

static void test_merge_kubectl_bodies(void **state)
{
	const char *node = "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"spec\":{"
	                   "\"podCIDR\":\"10.0.0.0/24\",\"unschedulable\":true}}";
	check(MERGE, NULL, node, "{\"spec\":{\"unschedulable\":null}}",
	      "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"spec\":{\"podCIDR\":"
	      "\"10.0.0.0/24\"}}");
	/* Lists are replaced, even ones with a merge key. */
	check(MERGE, NULL, "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":null}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
}

/* ------------------------------ RFC 6902 ------------------------------ */

static void test_json_rfc6902_appendix_a(void **state)
{
	/* A.1 - A.8, A.10, A.11, A.14, A.16 */
	check(JSONP, NULL, "{\"foo\":\"bar\"}",
	      "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]",
	      "{\"baz\":\"qux\",\"foo\":\"bar\"}");
	check(JSONP, NULL, "{\"foo\":[\"bar\",\"baz\"]}",
	      "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
	      "{\"foo\":[\"bar\",\"qux\",\"baz\"]}");
	check(JSONP, NULL, "{\"baz\":\"qux\",\"foo\":\"bar\"}",
	      "[{\"op\":\"remove\",\"path\":\"/baz\"}]", "{\"foo\":\"bar\"}");
	check(JSONP, NULL, "{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
	      "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", "{\"foo\":[\"bar\",\"baz\"]}");
	check(JSONP, NULL, "{\"baz\":\"qux\",\"foo\":\"bar\"}",
	      "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
	      "{\"baz\":\"boo\",\"foo\":\"bar\"}");
	check(JSONP, NULL,
	      "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
	      "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
	      "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}");
	check(JSONP, NULL, "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
	      "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
	      "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}");
	check(JSONP, NULL, "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
	      "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},"
	      "{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
	      "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}");
	check(JSONP, NULL, "{\"foo\":\"bar\"}",
	      "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
	      "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}");
	check(JSONP, NULL, "{\"foo\":\"bar\"}",
	      "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
	      "{\"foo\":\"bar\",\"baz\":\"qux\"}");
	check(JSONP, NULL, "{\"/\":9,\"~1\":10}",
	      "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]", "{\"/\":9,\"~1\":10}");
	check(JSONP, NULL, "{\"foo\":[\"bar\"]}",
	      "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
	      "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}");
	/* copy, ~1 in a key (an annotation), and the whole document */
	check(JSONP, NULL, "{\"a\":{\"b\":[1,2]},\"metadata\":{\"annotations\":{}}}",
	      "[{\"op\":\"copy\",\"from\":\"/a/b\",\"path\":\"/c\"},"
	      "{\"op\":\"add\",\"path\":\"/metadata/annotations/example.com~1x\",\"value\":\"y\"},"
	      "{\"op\":\"remove\",\"path\":\"/a/b/-1\"}]",
	      "{\"a\":{\"b\":[1]},\"c\":[1,2],\"metadata\":{\"annotations\":{\"example.com/x\":"
	      "\"y\"}}}");
	check(JSONP, NULL, "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]",
	      "{\"b\":2}");
	check(JSONP, NULL, "{\"a\":1}", "null", "{\"a\":1}");
}

static void test_json_rfc6902_errors(void **state)
{
	/* A.9 */
	check_fail(JSONP, NULL, "{\"baz\":\"qux\"}",
	           "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", ERR_UNPROCESSABLE,
	           "testing value /baz failed: test failed");
	/* A.12 */
	check_fail(JSONP, NULL, "{\"foo\":\"bar\"}",
	           "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", ERR_UNPROCESSABLE,
	           "add operation does not apply: doc is missing path: \"/baz/bat\"");
	/* A.15 */
	check_fail(JSONP, NULL, "{\"/\":9,\"~1\":10}",
	           "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]", ERR_UNPROCESSABLE,
	           "testing value /~01 failed");
	check_fail(JSONP, NULL, "{\"spec\":{}}",
	           "[{\"op\":\"replace\",\"path\":\"/spec/x\",\"value\":1}]", ERR_UNPROCESSABLE,
	           "replace operation does not apply: doc is missing key: /spec/x: missing value");
	check_fail(JSONP, NULL, "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/5\",\"value\":1}]",
	           ERR_UNPROCESSABLE, "Unable to access invalid index: 5");
	check_fail(JSONP, NULL, "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/b\"}]",
	           ERR_UNPROCESSABLE, "Unable to remove nonexistent key: b");
	check_fail(JSONP, NULL, "{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/x\",\"path\":\"/b\"}]",
	           ERR_UNPROCESSABLE, NULL);
	/* An unknown or missing op only fails when applied: 422 upstream. */
	check_fail(JSONP, NULL, "{}", "[{\"op\":\"frob\",\"path\":\"/a\"}]", ERR_UNPROCESSABLE,
	           "Unexpected kind: frob");
	check_fail(JSONP, NULL, "{}", "[{\"path\":\"/a\"}]", ERR_UNPROCESSABLE,
	           "Unexpected kind: unknown");
	/* A later failure leaves nothing of the earlier ops behind. */
	check_fail(JSONP, NULL, "{\"a\":1}",
	           "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2},{\"op\":\"test\",\"path\":\"/a\","
	           "\"value\":2}]",
	           ERR_UNPROCESSABLE, "testing value /a failed");

	/* A malformed document is a 400 with the decoder's message. */
	json_t *t = J("{}"), *p = J("{\"op\":\"add\"}");
	assert_null(patch_json(t, p));
	assert_string_equal(err_msg(),
	                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
	json_decref(p);
	p = J("[\"add\"]");
	assert_null(patch_json(t, p));
	assert_string_equal(err_msg(), "json: cannot unmarshal string into Go value of type "
	                               "jsonpatch.Operation");
	json_decref(p);
	json_decref(t);
}

/* ----------------------- strategic merge patch ------------------------ */

static void test_smp_cordon_uncordon(void **state)
{
	const char *node = "{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-1\"},\"spec\":{"
	                   "\"podCIDR\":\"10.0.0.0/24\"}}";
	check(SMP, "Node", node, "{\"spec\":{\"unschedulable\":true}}",
	      "{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-1\"},\"spec\":{\"podCIDR\":"
	      "\"10.0.0.0/24\",\"unschedulable\":true}}");
	check(SMP, "Node",
	      "{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-1\"},\"spec\":{\"podCIDR\":"
	      "\"10.0.0.0/24\",\"unschedulable\":true}}",
	      "{\"spec\":{\"unschedulable\":null}}", node);
	/* null for a missing key is not stored */
	check(SMP, "Node", node, "{\"spec\":{\"unschedulable\":null}}", node);
}

static void test_smp_taints_replaced(void **state)
{
	check(SMP, "Node",
	      "{\"spec\":{\"taints\":[{\"effect\":\"NoSchedule\",\"key\":\"k1\",\"value\":\"v1\"},"
	      "{\"effect\":\"NoExecute\",\"key\":\"k2\",\"value\":\"v2\"}]}}",
	      "{\"spec\":{\"taints\":[{\"effect\":\"NoExecute\",\"key\":\"k2\",\"value\":\"v2\"},"
	      "{\"effect\":\"NoSchedule\",\"key\":\"k\",\"value\":\"v\"}]}}",
	      "{\"spec\":{\"taints\":[{\"effect\":\"NoExecute\",\"key\":\"k2\",\"value\":\"v2\"},"
	      "{\"effect\":\"NoSchedule\",\"key\":\"k\",\"value\":\"v\"}]}}");
	/* removing the last taint sends an empty list */
	check(SMP, "Node", "{\"spec\":{\"taints\":[{\"effect\":\"NoSchedule\",\"key\":\"k\"}]}}",
	      "{\"spec\":{\"taints\":[]}}", "{\"spec\":{\"taints\":[]}}");
}

static void test_smp_tolerations_replaced(void **state)
{
	check(SMP, "Pod",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"tolerations\":[{\"key\":\"a\","
	      "\"operator\":\"Exists\"},{\"key\":\"b\",\"operator\":\"Exists\"}]}}",
	      "{\"spec\":{\"tolerations\":[{\"key\":\"x\",\"operator\":\"Equal\",\"value\":\"y\","
	      "\"effect\":\"NoSchedule\",\"tolerationSeconds\":null}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"tolerations\":[{\"key\":\"x\","
	      "\"operator\":\"Equal\",\"value\":\"y\",\"effect\":\"NoSchedule\"}]}}");
}

static const char *const deploy =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"api\","
    "\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":\"old\"}},"
    "\"spec\":{\"replicas\":1,\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":"
    "{\"maxSurge\":\"25%\",\"maxUnavailable\":\"25%\"}},\"template\":{\"metadata\":{\"labels\":"
    "{\"app\":\"api\"}},\"spec\":{\"containers\":[{\"name\":\"api\",\"image\":\"api:v1\","
    "\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"},{\"containerPort\":8080,"
    "\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\","
    "\"value\":\"2\"}]}]}}},\"status\":{\"replicas\":1}}";

static void test_smp_kubectl_apply_deployment(void **state)
{
	/* What kubectl apply sends after removing port 80 and bumping the image. */
	check(
	    SMP, "Deployment", deploy,
	    "{\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
	    "\"new\"}},\"spec\":{\"replicas\":3,\"template\":{\"spec\":{"
	    "\"$setElementOrder/containers\":[{\"name\":\"api\"}],\"containers\":[{"
	    "\"$setElementOrder/ports\":[{\"containerPort\":8080}],\"image\":\"api:v2\","
	    "\"name\":\"api\",\"ports\":[{\"$patch\":\"delete\",\"containerPort\":80}]}]}}}}",
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"api\","
	    "\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":\"new\"}},"
	    "\"spec\":{\"replicas\":3,\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":"
	    "{\"maxSurge\":\"25%\",\"maxUnavailable\":\"25%\"}},\"template\":{\"metadata\":{"
	    "\"labels\":{\"app\":\"api\"}},\"spec\":{\"containers\":[{\"name\":\"api\","
	    "\"image\":\"api:v2\",\"ports\":[{\"containerPort\":8080,\"protocol\":\"TCP\"}],"
	    "\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}]}]}}},"
	    "\"status\":{\"replicas\":1}}");
	/* The same without the ports order list. */
	check(SMP, "Deployment",
	      "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"api\",\"image\":"
	      "\"api:v1\",\"ports\":[{\"containerPort\":80},{\"containerPort\":8080}]}]}}}}",
	      "{\"spec\":{\"template\":{\"spec\":{\"$setElementOrder/containers\":[{\"name\":"
	      "\"api\"}],\"containers\":[{\"image\":\"api:v2\",\"name\":\"api\",\"ports\":[{"
	      "\"$patch\":\"delete\",\"containerPort\":80}]}]}}}}",
	      "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"api\",\"image\":"
	      "\"api:v2\",\"ports\":[{\"containerPort\":8080}]}]}}}}");
	/* $setElementOrder reorders and adds new items in place; a server-only item
	 * goes before the first ordered item that followed it in the live list. */
	check(SMP, "StatefulSet",
	      "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":"
	      "\"sidecar\"},{\"name\":\"b\"}]}}}}",
	      "{\"spec\":{\"template\":{\"spec\":{\"$setElementOrder/containers\":[{\"name\":"
	      "\"b\"},{\"name\":\"c\"},{\"name\":\"a\"}],\"containers\":[{\"name\":\"c\","
	      "\"image\":\"c\"}]}}}}",
	      "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"sidecar\"},{"
	      "\"name\":\"b\"},{\"name\":\"c\",\"image\":\"c\"},{\"name\":\"a\"}]}}}}");
}

static void test_smp_env_merge_by_name(void **state)
{
	check(SMP, "Deployment", deploy,
	      "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"api\",\"env\":[{"
	      "\"name\":\"B\",\"value\":\"3\"},{\"name\":\"C\",\"value\":\"4\"}]}]}}}}",
	      "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"api\","
	      "\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":\"old\"}},"
	      "\"spec\":{\"replicas\":1,\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":"
	      "{\"maxSurge\":\"25%\",\"maxUnavailable\":\"25%\"}},\"template\":{\"metadata\":{"
	      "\"labels\":{\"app\":\"api\"}},\"spec\":{\"containers\":[{\"name\":\"api\","
	      "\"image\":\"api:v1\",\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"},{"
	      "\"containerPort\":8080,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"A\",\"value\":"
	      "\"1\"},{\"name\":\"B\",\"value\":\"3\"},{\"name\":\"C\",\"value\":\"4\"}]}]}}},"
	      "\"status\":{\"replicas\":1}}");
	/* Without $setElementOrder upstream puts a new element first. */
	check(SMP, "Pod",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"A\",\"value\":"
	      "\"1\"}]}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"Z\",\"value\":"
	      "\"9\"}]}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"Z\",\"value\":"
	      "\"9\"},{\"name\":\"A\",\"value\":\"1\"}]}]}}");
	/* A field inside an element is deleted with null; an element with $patch. */
	check(SMP, "Pod",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"A\",\"value\":"
	      "\"1\"},{\"name\":\"B\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"x\"}}}]}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"A\",\"$patch\":"
	      "\"delete\"},{\"name\":\"B\",\"value\":\"2\",\"valueFrom\":null}]}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"B\",\"value\":"
	      "\"2\"}]}]}}");
}

static void test_smp_node_status_conditions(void **state)
{
	check(SMP, "Node",
	      "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":"
	      "\"KubeletNotReady\"},{\"type\":\"MemoryPressure\",\"status\":\"False\"}],"
	      "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"},{\"type\":"
	      "\"Hostname\",\"address\":\"n1\"}]}}",
	      "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":"
	      "\"KubeletReady\",\"message\":\"kubelet is posting ready status\"}],\"addresses\":[{"
	      "\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"}]}}",
	      "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":"
	      "\"KubeletReady\",\"message\":\"kubelet is posting ready status\"},{\"type\":"
	      "\"MemoryPressure\",\"status\":\"False\"}],\"addresses\":[{\"type\":\"InternalIP\","
	      "\"address\":\"10.0.0.2\"},{\"type\":\"Hostname\",\"address\":\"n1\"}]}}");
	/* Pod status: conditions by type, podIPs by ip. */
	check(SMP, "Pod",
	      "{\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
	      "\"status\":\"True\"}]}}",
	      "{\"status\":{\"phase\":\"Running\",\"$setElementOrder/conditions\":[{\"type\":"
	      "\"PodScheduled\"},{\"type\":\"Ready\"}],\"conditions\":[{\"type\":\"Ready\","
	      "\"status\":\"True\"}],\"podIPs\":[{\"ip\":\"10.1.0.5\"}]}}",
	      "{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodScheduled\","
	      "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\"}],\"podIPs\":[{\"ip\":"
	      "\"10.1.0.5\"}]}}");
}

static void test_smp_finalizers_and_primitive_lists(void **state)
{
	check(SMP, "ConfigMap", "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}",
	      "{\"metadata\":{\"finalizers\":[\"b\",\"c\"]}}",
	      "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}");
	/* a value the live list lacks goes before the server-only ones, as upstream */
	check(SMP, "ConfigMap", "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}",
	      "{\"metadata\":{\"finalizers\":[\"c\"]}}",
	      "{\"metadata\":{\"finalizers\":[\"c\",\"a\",\"b\"]}}");
	check(SMP, "ConfigMap", "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
	      "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\",\"x\"]}}",
	      "{\"metadata\":{\"finalizers\":[\"a\",\"c\"]}}");
	check(SMP, "ConfigMap", "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
	      "{\"metadata\":{\"$setElementOrder/finalizers\":[\"c\",\"a\"],"
	      "\"$deleteFromPrimitiveList/finalizers\":[\"b\"]}}",
	      "{\"metadata\":{\"finalizers\":[\"c\",\"a\"]}}");
	/* deleting from a list that is not there does nothing */
	check(SMP, "ConfigMap", "{\"metadata\":{\"name\":\"x\"}}",
	      "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\"]}}",
	      "{\"metadata\":{\"name\":\"x\"}}");
	check(SMP, "Node", "{\"spec\":{\"podCIDRs\":[\"10.0.0.0/24\"]}}",
	      "{\"spec\":{\"podCIDRs\":[\"10.0.0.0/24\",\"fd00::/64\"]}}",
	      "{\"spec\":{\"podCIDRs\":[\"10.0.0.0/24\",\"fd00::/64\"]}}");
	/* ownerReferences merge by uid */
	check(SMP, "Pod",
	      "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"1\",\"kind\":\"ReplicaSet\","
	      "\"controller\":true}]}}",
	      "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"1\",\"blockOwnerDeletion\":true}]}}",
	      "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"1\",\"kind\":\"ReplicaSet\","
	      "\"controller\":true,\"blockOwnerDeletion\":true}]}}");
}

static void test_smp_retain_keys(void **state)
{
	check(SMP, "Deployment",
	      "{\"spec\":{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{"
	      "\"maxSurge\":1}}}}",
	      "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\"}}}",
	      "{\"spec\":{\"strategy\":{\"type\":\"Recreate\"}}}");
	/* volumes: merge by name, each element may carry $retainKeys */
	check(SMP, "Pod",
	      "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}},{\"name\":\"w\","
	      "\"emptyDir\":{}}]}}",
	      "{\"spec\":{\"volumes\":[{\"$retainKeys\":[\"configMap\",\"name\"],\"name\":\"v\","
	      "\"configMap\":{\"name\":\"cm\"}}]}}",
	      "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"configMap\":{\"name\":\"cm\"}},{\"name\":"
	      "\"w\",\"emptyDir\":{}}]}}");
	check_fail(SMP, "Deployment", "{\"spec\":{\"strategy\":{\"type\":\"RollingUpdate\"}}}",
	           "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"rollingUpdate\":{}}}}",
	           ERR_INVALID, "invalid patch format of retainKeys");
	check_fail(SMP, "Deployment", "{\"spec\":{\"strategy\":{}}}",
	           "{\"spec\":{\"strategy\":{\"$retainKeys\":\"type\"}}}", ERR_INVALID,
	           "invalid patch format of retainKeys");
	assert_string_equal(err_msg(), "invalid patch format of retainKeys");
}

static void test_smp_patch_replace_and_delete(void **state)
{
	check(SMP, "Pod", "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"}}}",
	      "{\"metadata\":{\"labels\":{\"$patch\":\"replace\",\"c\":\"3\"}}}",
	      "{\"metadata\":{\"labels\":{\"c\":\"3\"}}}");
	check(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\"},{\"$patch\":\"replace\"}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
	check(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"b\"}]}}");
	/* $patch: delete on a map leaves it empty, as upstream */
	check(SMP, "Pod", "{\"metadata\":{\"labels\":{\"a\":\"1\"}}}",
	      "{\"metadata\":{\"labels\":{\"$patch\":\"delete\"}}}",
	      "{\"metadata\":{\"labels\":{}}}");
	/* $patch: merge asks for the default */
	check(SMP, "Pod", "{\"metadata\":{\"labels\":{\"a\":\"1\"}}}",
	      "{\"metadata\":{\"labels\":{\"$patch\":\"merge\",\"b\":\"2\"}}}",
	      "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"}}}");
	/* directives in a new value are not stored */
	check(SMP, "Pod", "{\"spec\":{}}",
	      "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"}],\"containers\":[{"
	      "\"name\":\"a\",\"env\":[{\"name\":\"X\",\"$patch\":\"delete\"},{\"name\":\"Y\","
	      "\"value\":null}]}],\"nodeSelector\":{\"$patch\":\"delete\"}}}",
	      "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"Y\"}]}]}}");
}

static void test_smp_other_kinds(void **state)
{
	check(SMP, "Service",
	      "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":8080},{\"port\":443}]}}",
	      "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":9090}]}}",
	      "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":9090},{\"port\":443}]}}");
	/* A DaemonSet's template is a PodSpec too; imagePullSecrets by name. */
	check(SMP, "DaemonSet",
	      "{\"spec\":{\"template\":{\"spec\":{\"imagePullSecrets\":[{\"name\":\"a\"}]}}}}",
	      "{\"spec\":{\"template\":{\"spec\":{\"imagePullSecrets\":[{\"name\":\"b\"}]}}}}",
	      "{\"spec\":{\"template\":{\"spec\":{\"imagePullSecrets\":[{\"name\":\"b\"},{"
	      "\"name\":\"a\"}]}}}}");
	/* Every merge key comes from the schema's struct tags, not a hand list:
	 * a ServiceAccount's secrets merge by name, a Pod's
	 * resourceClaimStatuses by name; a CSR's conditions have no
	 * patchStrategy (only listType=map), so a patch replaces them. */
	check(SMP, "ServiceAccount", "{\"secrets\":[{\"name\":\"a\"}]}",
	      "{\"secrets\":[{\"name\":\"b\"}]}",
	      "{\"secrets\":[{\"name\":\"b\"},{\"name\":\"a\"}]}");
	check(SMP, "Pod", "{\"status\":{\"resourceClaimStatuses\":[{\"name\":\"a\"}]}}",
	      "{\"status\":{\"resourceClaimStatuses\":[{\"name\":\"b\"}]}}",
	      "{\"status\":{\"resourceClaimStatuses\":[{\"name\":\"b\"},{\"name\":\"a\"}]}}");
	check(SMP, "CertificateSigningRequest",
	      "{\"status\":{\"conditions\":[{\"type\":\"Approved\",\"status\":\"True\"}]}}",
	      "{\"status\":{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]}}",
	      "{\"status\":{\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]}}");
	/* A kind without knowledge replaces lists; maps still merge. */
	check(
	    SMP, "Widget",
	    "{\"spec\":{\"containers\":[{\"name\":\"a\"}],\"m\":{\"x\":1}},\"data\":{\"k\":\"v\"}}",
	    "{\"spec\":{\"containers\":[{\"name\":\"b\"}],\"m\":{\"y\":2}}}",
	    "{\"spec\":{\"containers\":[{\"name\":\"b\"}],\"m\":{\"x\":1,\"y\":2}},\"data\":{"
	    "\"k\":\"v\"}}");
	check(SMP, NULL, "{\"a\":1}", "null", "{\"a\":1}");
	check(SMP, "Pod", "{\"a\":1}", "{\"$patch\":\"replace\",\"b\":2}", "{\"b\":2}");
}

static void test_smp_errors(void **state)
{
	check_fail(SMP, "Pod", "{\"spec\":{}}", "{\"spec\":{\"$foo\":1}}", ERR_INVALID,
	           "unknown patch directive: $foo");
	check_fail(SMP, "Pod", "{\"metadata\":{\"labels\":{}}}",
	           "{\"metadata\":{\"labels\":{\"$patch\":\"frob\"}}}", ERR_INVALID,
	           "unknown patch type: frob in map: map[$patch:frob]");
	check_fail(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
	           "{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}", ERR_INVALID,
	           "map: map[image:x] does not contain declared merge key: name");
	check_fail(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
	           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"frob\"}]}}",
	           ERR_INVALID, "unknown patch type: frob");
	check_fail(SMP, "Pod", "{\"metadata\":{\"finalizers\":[]}}",
	           "{\"metadata\":{\"finalizers\":[[\"b\"]]}}", ERR_UNPROCESSABLE,
	           "lists of lists are not supported");
	check_fail(SMP, "Pod", "{\"metadata\":{\"finalizers\":[\"a\"]}}",
	           "{\"metadata\":{\"finalizers\":[1]}}", ERR_INVALID,
	           "list element types are not identical");
	check_fail(SMP, "Pod", "{\"metadata\":{\"finalizers\":[\"a\"]}}",
	           "{\"metadata\":{\"$deleteFromPrimitiveList\":[\"a\"]}}", ERR_INVALID,
	           "invalid patch format of primitive list");
	check_fail(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
	           "{\"spec\":{\"$setElementOrder\":[{\"name\":\"a\"}]}}", ERR_INVALID,
	           "invalid patch format of setElementOrder list");
	check_fail(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
	           "{\"spec\":{\"$setElementOrder/containers\":{}}}", ERR_INVALID,
	           "expected a []interface {}, but received a map[string]interface {}");
	check_fail(SMP, "Pod", "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
	           "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"}],\"containers\":[{"
	           "\"name\":\"b\"}]}}",
	           ERR_INVALID, "doesn't match $setElementOrder list");
	check_fail(SMP, "Pod", "[1]", "{}", ERR_INVALID, "invalid JSON document");
	check_fail(SMP, "Pod", "{}", "[]", ERR_INVALID,
	           "json: cannot unmarshal array into Go value of type map[string]interface {}");
	assert_int_equal(err_http_status(ERR_INVALID), 400);
}

/* ------------------------------ dispatch ------------------------------ */

static int apply(const char *target, const char *ct, const char *body, const char *kind,
                 json_t **out)
{
	json_t *t = J(target), *before = json_deep_copy(t);
	int rc = patch_apply(t, ct, body, strlen(body), kind, out);
	assert_true(json_equal(t, before));
	json_decref(t);
	json_decref(before);
	return rc;
}

static void test_apply_dispatch(void **state)
{
	const char *node = "{\"kind\":\"Node\",\"spec\":{\"taints\":[{\"key\":\"a\"}],\"podCIDRs\":"
	                   "[\"x\"]}}";
	json_t *out;

	assert_int_equal(apply(node, "application/strategic-merge-patch+json",
	                       "{\"spec\":{\"unschedulable\":true,\"podCIDRs\":[\"y\"]}}", "Node",
	                       &out),
	                 0);
	expect_json(out, "{\"kind\":\"Node\",\"spec\":{\"taints\":[{\"key\":\"a\"}],\"podCIDRs\":"
	                 "[\"y\",\"x\"],\"unschedulable\":true}}");
	assert_int_equal(apply(node, "application/merge-patch+json; charset=utf-8",
	                       "{\"spec\":{\"podCIDRs\":[\"y\"]}}", "Node", &out),
	                 0);
	expect_json(out, "{\"kind\":\"Node\",\"spec\":{\"taints\":[{\"key\":\"a\"}],\"podCIDRs\":"
	                 "[\"y\"]}}");
	assert_int_equal(apply(node, "application/json-patch+json",
	                       "[{\"op\":\"remove\",\"path\":\"/spec/taints/0\"}]", "Node", &out),
	                 0);
	expect_json(out, "{\"kind\":\"Node\",\"spec\":{\"taints\":[],\"podCIDRs\":[\"x\"]}}");
}

static void test_apply_errors(void **state)
{
	json_t *out = (json_t *)1;
	int rc;

	rc = apply("{}", "application/json", "{}", "Pod", &out);
	assert_int_equal(rc, ERR_UNSUPPORTED);
	assert_null(out);
	assert_int_equal(err_http_status(rc), 415);
	assert_string_equal(err_msg(),
	                    "the body of the request was in an unknown format - accepted "
	                    "media types include: application/json-patch+json, "
	                    "application/merge-patch+json, "
	                    "application/strategic-merge-patch+json, "
	                    "application/apply-patch+yaml");
	assert_int_equal(apply("{}", NULL, "{}", "Pod", &out), ERR_UNSUPPORTED);
	assert_int_not_equal(apply("{}", "application/apply-patch+yaml", "{}", "Pod", &out), 0);

	/* malformed bodies: 400 */
	rc = apply("{}", "application/strategic-merge-patch+json", "{\"spec\":", "Pod", &out);
	assert_int_equal(rc, ERR_INVALID);
	assert_int_equal(err_http_status(rc), 400);
	assert_true(strlen(err_msg()) > 0);
	rc = apply("{}", "application/merge-patch+json", "not json", "Pod", &out);
	assert_int_equal(rc, ERR_INVALID);
	assert_non_null(strstr(err_msg(), "error decoding patch: "));
	assert_int_equal(apply("{}", "application/json-patch+json", "", "Pod", &out), ERR_INVALID);
	assert_int_equal(apply("{}", "application/merge-patch+json", "null", "Pod", &out),
	                 ERR_INVALID);
	assert_string_equal(err_msg(), "Invalid JSON Patch");
	assert_int_equal(apply("{}", "application/merge-patch+json", "[1]", "Pod", &out),
	                 ERR_INVALID);
	assert_int_equal(
	    apply("{}", "application/json-patch+json", "{\"op\":\"add\"}", "Pod", &out),
	    ERR_INVALID);
	assert_string_equal(err_msg(),
	                    "error decoding patch: json: cannot unmarshal object into Go "
	                    "value of type []handlers.jsonPatchOp");
	assert_int_equal(apply("{}", "application/json-patch+json", "[{\"op\":1}]", "Pod", &out),
	                 ERR_INVALID);
	assert_int_equal(apply("{}", "application/strategic-merge-patch+json",
	                       "{\"spec\":{\"$bogus\":1}}", "Pod", &out),
	                 ERR_INVALID);

	/* a failing operation: 422 with upstream's fixed message */
	rc = apply("{\"spec\":{}}", "application/json-patch+json",
	           "[{\"op\":\"test\",\"path\":\"/spec\",\"value\":1}]", "Pod", &out);
	assert_int_equal(rc, ERR_UNPROCESSABLE);
	assert_int_equal(err_http_status(rc), 422);
	assert_string_equal(err_reason(rc), "Invalid");
	assert_string_equal(err_msg(), PATCH_MSG_REJECTED);
	assert_string_equal(patch_detail(), "testing value /spec failed: test failed");
	/* A.13: a duplicate "op" keeps the last one, as Go's decoder; remove fails */
	assert_int_equal(apply("{\"foo\":\"bar\"}", "application/json-patch+json",
	                       "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"op\":"
	                       "\"remove\"}]",
	                       "Pod", &out),
	                 ERR_UNPROCESSABLE);
	/* a result that is not an object */
	assert_int_equal(apply("{}", "application/json-patch+json",
	                       "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1]}]", "Pod", &out),
	                 ERR_UNPROCESSABLE);
	assert_non_null(strstr(err_msg(), "is invalid: patch: Invalid value"));
	assert_null(out);
}

static void test_too_many_ops(void **state)
{
	json_t *t = J("{\"a\":[]}"), *ops = json_array();
	for (int i = 0; i < 10001; i++)
		json_array_append_new(
		    ops, json_pack("{s:s,s:s,s:i}", "op", "add", "path", "/a/-", "value", i));
	assert_null(patch_json(t, ops));
	assert_string_equal(err_msg(), "The allowed maximum operations in a JSON patch is 10000, "
	                               "got 10001");
	json_array_remove(ops, 0);
	json_t *r = patch_json(t, ops);
	assert_int_equal(json_array_size(json_object_get(r, "a")), 10000);
	json_decref(r);
	json_decref(ops);
	json_decref(t);
}

/* Issue 10, item 4: the 20-op copy bomb (each copy doubling the document)
 * stops at upstream's 3 MiB of accumulated copies with the generic 422;
 * copies under the limit still work. */
static void test_copy_bomb(void **state)
{
	json_t *t = json_pack("{s:{s:s}}", "data", "x", "0123456789abcdef0123456789abcdef");
	json_t *ops = json_array(), *r;
	char from[32], to[32];

	(void)state;
	for (int i = 0; i < 20; i++) {
		snprintf(from, sizeof(from), i ? "/data%d" : "/data", i - 1);
		snprintf(to, sizeof(to), "/data%d", i);
		/* /data_i = {a: /data_{i-1}, b: /data_{i-1}}: twice the size */
		json_array_append_new(
		    ops, json_pack("{s:s,s:s,s:{}}", "op", "add", "path", to, "value"));
		json_array_append_new(
		    ops, json_pack("{s:s,s:s,s:s+}", "op", "copy", "from", from, "path", to, "/a"));
		json_array_append_new(
		    ops, json_pack("{s:s,s:s,s:s+}", "op", "copy", "from", from, "path", to, "/b"));
	}
	assert_null(patch_json(t, ops));
	assert_string_equal(err_msg(), PATCH_MSG_REJECTED);
	assert_non_null(strstr(patch_detail(), "Unable to complete the copy, the accumulated size "
	                                       "increase of copy is "));
	assert_non_null(strstr(patch_detail(), "exceeding the limit 3145728"));
	/* The first ten doublings (~64 KiB of copies) are fine. */
	while (json_array_size(ops) > 30)
		json_array_remove(ops, json_array_size(ops) - 1);
	r = patch_json(t, ops);
	assert_non_null(r);
	assert_non_null(json_object_get(r, "data9"));
	json_decref(r);
	json_decref(ops);
	json_decref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merge_rfc7386_appendix_a),
	    cmocka_unit_test(test_merge_rfc7386_section3),
	    cmocka_unit_test(test_merge_kubectl_bodies),
	    cmocka_unit_test(test_json_rfc6902_appendix_a),
	    cmocka_unit_test(test_json_rfc6902_errors),
	    cmocka_unit_test(test_smp_cordon_uncordon),
	    cmocka_unit_test(test_smp_taints_replaced),
	    cmocka_unit_test(test_smp_tolerations_replaced),
	    cmocka_unit_test(test_smp_kubectl_apply_deployment),
	    cmocka_unit_test(test_smp_env_merge_by_name),
	    cmocka_unit_test(test_smp_node_status_conditions),
	    cmocka_unit_test(test_smp_finalizers_and_primitive_lists),
	    cmocka_unit_test(test_smp_retain_keys),
	    cmocka_unit_test(test_smp_patch_replace_and_delete),
	    cmocka_unit_test(test_smp_other_kinds),
	    cmocka_unit_test(test_smp_errors),
	    cmocka_unit_test(test_apply_dispatch),
	    cmocka_unit_test(test_apply_errors),
	    cmocka_unit_test(test_too_many_ops),
	    cmocka_unit_test(test_copy_bomb),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
