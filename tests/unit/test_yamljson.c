/* yj: YAML as kubectl reads it, and YAML that reads back as what was written. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/yamljson.h"

static const char *data_path(const char *name)
{
	static char buf[4096];
	const char *dir = getenv("CUBE_TEST_DATA");

	snprintf(buf, sizeof(buf), "%s/yaml/%s", dir && *dir ? dir : "/work/main/tests/data", name);
	return buf;
}

/* JSON text to a value, so expectations read like the documents. */
static json_t *J(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &e);

	if (!v)
		fail_msg("bad expectation %s: %s", text, e.text);
	return v;
}

static void expect_json(const json_t *got, const char *want_text)
{
	json_t *want = J(want_text);

	if (!json_equal(got, want)) {
		char *g = got ? json_dumps(got, JSON_ENCODE_ANY) : NULL;
		print_error("got  %s\nwant %s\n", g ? g : "(null)", want_text);
		free(g);
		json_decref(want);
		fail();
	}
	json_decref(want);
}

static bool starts_with(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static json_t *parse(const char *yaml)
{
	json_t *v = yj_parse(yaml, strlen(yaml));

	if (!v)
		fail_msg("parse failed: %s\n%s", err_msg(), yaml);
	return v;
}

/* yj_emit then yj_parse must give the value back. */
static char *roundtrip(const json_t *v)
{
	char *text = yj_emit(v);
	json_t *back;

	assert_non_null(text);
	back = yj_parse(text, strlen(text));
	if (!back || !json_equal(v, back)) {
		print_error("round trip changed the value:\n%s\n(%s)\n", text, err_msg());
		json_decref(back);
		free(text);
		fail();
	}
	json_decref(back);
	return text;
}

static void test_kubeconfig(void **state)
{
	json_t *kc = yj_load_file(data_path("kubeconfig.yaml")), *c;
	char *text;

	assert_non_null(kc);
	assert_string_equal(json_string_value(json_object_get(kc, "apiVersion")), "v1");
	assert_string_equal(json_string_value(json_object_get(kc, "current-context")), "kind-kind");
	assert_int_equal(json_array_size(json_object_get(kc, "clusters")), 2);
	c = json_object_get(json_array_get(json_object_get(kc, "clusters"), 0), "cluster");
	assert_string_equal(json_string_value(json_object_get(c, "server")),
	                    "https://127.0.0.1:6443");
	assert_true(starts_with(json_string_value(json_object_get(c, "certificate-authority-data")),
	                        "LS0tLS1CRUdJTiBDRVJU"));
	c = json_object_get(json_array_get(json_object_get(kc, "clusters"), 1), "cluster");
	assert_true(json_is_true(json_object_get(c, "insecure-skip-tls-verify")));
	expect_json(json_array_get(json_object_get(kc, "contexts"), 1),
	            "{\"context\": {\"cluster\": \"staging\", \"namespace\": \"kube-system\","
	            " \"user\": \"admin\"}, \"name\": \"staging-admin\"}");
	expect_json(json_object_get(kc, "preferences"), "{}");
	/* A quoted number stays the string it is. */
	expect_json(json_object_get(json_array_get(json_object_get(kc, "users"), 1), "user"),
	            "{\"token\": \"0123456789\"}");

	/* Written back the way kubectl writes it: keys in order, lists flush
	 * with their key, one-line certificate data, quotes only where needed. */
	text = roundtrip(kc);
	assert_true(starts_with(text, "apiVersion: v1\nclusters:\n- cluster:\n"
	                              "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJU"));
	assert_non_null(
	    strstr(text, "==\n    server: https://127.0.0.1:6443\n  name: kind-kind\n"));
	assert_non_null(strstr(text, "\npreferences: {}\nusers:\n- name: kind-kind\n  user:\n"));
	assert_non_null(strstr(text, "    token: \"0123456789\"\n"));
	free(text);
	json_decref(kc);
}

static void test_kubelet_config(void **state)
{
	json_t *cm = yj_load_file(data_path("kubelet-config.yaml")), *kc;
	const char *inner;
	char *text;

	assert_non_null(cm);
	expect_json(json_object_get(cm, "metadata"),
	            "{\"name\": \"kubelet-config\", \"namespace\": \"kube-system\","
	            " \"annotations\": {\"kubeadm.kubernetes.io/component-config.hash\":"
	            " \"sha256:4b1c8a1f6e0b\"}}");
	/* The `|` block scalar keeps lines and the final newline verbatim. */
	inner = json_string_value(json_object_get(json_object_get(cm, "data"), "kubelet"));
	assert_non_null(inner);
	assert_true(starts_with(inner, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
	                               "kind: KubeletConfiguration\n"));
	assert_true(strstr(inner, "\nauthentication:\n  anonymous:\n    enabled: false\n"));
	assert_int_equal(inner[strlen(inner) - 1], '\n');
	assert_int_not_equal(inner[strlen(inner) - 2], '\n');

	kc = parse(inner);
	assert_string_equal(json_string_value(json_object_get(kc, "kind")), "KubeletConfiguration");
	assert_true(json_is_true(json_object_get(kc, "rotateCertificates")));
	assert_true(json_is_true(json_object_get(kc, "serverTLSBootstrap"))); /* yes */
	expect_json(json_object_get(kc, "nodeStatusUpdateFrequency"), "\"10s\"");
	expect_json(json_object_get(kc, "port"), "10250");
	expect_json(json_object_get(kc, "readOnlyPort"), "0");
	expect_json(json_object_get(kc, "clusterDNS"), "[\"10.96.0.10\"]");
	expect_json(json_object_get(json_object_get(kc, "authentication"), "webhook"),
	            "{\"cacheTTL\": \"0s\", \"enabled\": true}");
	/* Flow map, alias, and merge key with the explicit key winning. */
	expect_json(json_object_get(kc, "evictionHard"),
	            "{\"memory.available\": \"100Mi\", \"nodefs.available\": \"10%\","
	            " \"imagefs.available\": \"15%\"}");
	expect_json(json_object_get(kc, "evictionSoft"),
	            "{\"memory.available\": \"300Mi\", \"nodefs.available\": \"10%\","
	            " \"imagefs.available\": \"15%\"}");
	expect_json(json_object_get(kc, "evictionSoftGracePeriod"),
	            "{\"memory.available\": \"1m30s\", \"nodefs.available\": \"2m\","
	            " \"imagefs.available\": \"2m\"}");
	expect_json(json_object_get(kc, "systemReserved"),
	            "{\"cpu\": \"100m\", \"memory\": \"256Mi\"}");
	/* An alias is a copy: editing it leaves the anchored value alone. */
	json_object_set_new(json_object_get(kc, "systemReserved"), "cpu", json_string("1"));
	expect_json(json_object_get(kc, "kubeReserved"),
	            "{\"cpu\": \"100m\", \"memory\": \"256Mi\"}");
	expect_json(json_object_get(kc, "tlsCipherSuites"),
	            "[\"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\","
	            " \"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\"]");

	/* Keys written in the mapping beat merged ones wherever they stand,
	 * and an earlier merge beats a later one. */
	{
		json_t *m = parse("base: &b {x: 1, y: 2}\n"
		                  "c:\n  y: 0\n  <<: [*b, {z: 9, x: 5}]\n  z: 3\n");
		expect_json(json_object_get(m, "c"), "{\"y\": 0, \"x\": 1, \"z\": 3}");
		json_decref(m);
	}

	/* The ConfigMap writes back with its block scalar as a block scalar. */
	text = roundtrip(cm);
	assert_non_null(strstr(text, "data:\n  kubelet: |\n    apiVersion: kubelet.config"));
	free(text);
	free(roundtrip(kc));
	json_decref(kc);
	json_decref(cm);
}

static const char manifests[] = "# Applied with kubectl apply -f\n"
                                "apiVersion: v1\n"
                                "kind: Namespace\n"
                                "metadata:\n"
                                "  name: web\n"
                                "---\n"
                                "---\n"
                                "# nothing but a comment\n"
                                "---\n"
                                "apiVersion: apps/v1\n"
                                "kind: Deployment\n"
                                "metadata:\n"
                                "  name: nginx\n"
                                "  namespace: web\n"
                                "  labels: {app: nginx, tier: \"frontend\"}\n"
                                "spec:\n"
                                "  replicas: 3\n"
                                "  selector:\n"
                                "    matchLabels:\n"
                                "      app: nginx\n"
                                "  strategy:\n"
                                "    rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}\n"
                                "  template:\n"
                                "    metadata:\n"
                                "      labels:\n"
                                "        app: nginx\n"
                                "    spec:\n"
                                "      containers:\n"
                                "      - name: nginx\n"
                                "        image: nginx:1.25.3\n"
                                "        args: [\"--port\", \"8080\"]\n"
                                "        ports:\n"
                                "        - containerPort: 80\n"
                                "          protocol: TCP\n"
                                "        env:\n"
                                "        - name: DEBUG\n"
                                "          value: \"true\"\n"
                                "        - name: WORKERS\n"
                                "          value: '4'\n"
                                "        resources:\n"
                                "          limits: {cpu: 500m, memory: 128Mi}\n"
                                "        readinessProbe:\n"
                                "          httpGet: {path: /healthz, port: 80}\n"
                                "          periodSeconds: 10\n"
                                "      securityContext:\n"
                                "        fsGroup: 2000\n"
                                "        runAsNonRoot: true\n"
                                "...\n"
                                "---\n"
                                "apiVersion: v1\n"
                                "kind: Service\n"
                                "metadata: {name: nginx, namespace: web}\n"
                                "spec:\n"
                                "  ports:\n"
                                "  - port: 80\n"
                                "    targetPort: 8080\n"
                                "  selector:\n"
                                "    app: nginx\n"
                                "---\n";

static void test_manifest_stream(void **state)
{
	json_t *docs = yj_parse_all(manifests, strlen(manifests)), *d, *c;

	assert_non_null(docs);
	/* The empty and comment-only documents are skipped, as kubectl does. */
	assert_int_equal(json_array_size(docs), 3);
	expect_json(
	    json_array_get(docs, 0),
	    "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"web\"}}");
	d = json_array_get(docs, 1);
	assert_string_equal(json_string_value(json_object_get(d, "kind")), "Deployment");
	expect_json(json_object_get(json_object_get(d, "metadata"), "labels"),
	            "{\"app\": \"nginx\", \"tier\": \"frontend\"}");
	expect_json(json_object_get(json_object_get(d, "spec"), "replicas"), "3");
	expect_json(json_object_get(json_object_get(json_object_get(d, "spec"), "strategy"),
	                            "rollingUpdate"),
	            "{\"maxSurge\": \"25%\", \"maxUnavailable\": 0}");
	c = json_array_get(
	    json_object_get(
	        json_object_get(json_object_get(json_object_get(d, "spec"), "template"), "spec"),
	        "containers"),
	    0);
	expect_json(c, "{\"name\": \"nginx\", \"image\": \"nginx:1.25.3\","
	               " \"args\": [\"--port\", \"8080\"],"
	               " \"ports\": [{\"containerPort\": 80, \"protocol\": \"TCP\"}],"
	               " \"env\": [{\"name\": \"DEBUG\", \"value\": \"true\"},"
	               "           {\"name\": \"WORKERS\", \"value\": \"4\"}],"
	               " \"resources\": {\"limits\": {\"cpu\": \"500m\", \"memory\": \"128Mi\"}},"
	               " \"readinessProbe\": {\"httpGet\": {\"path\": \"/healthz\", \"port\": 80},"
	               "                      \"periodSeconds\": 10}}");
	expect_json(json_array_get(docs, 2),
	            "{\"apiVersion\": \"v1\", \"kind\": \"Service\","
	            " \"metadata\": {\"name\": \"nginx\", \"namespace\": \"web\"},"
	            " \"spec\": {\"ports\": [{\"port\": 80, \"targetPort\": 8080}],"
	            "          \"selector\": {\"app\": \"nginx\"}}}");
	free(roundtrip(docs));

	/* yj_parse reads the first document only. */
	d = parse(manifests);
	expect_json(
	    d,
	    "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"web\"}}");
	json_decref(d);
	json_decref(docs);

	/* Nothing at all: no documents, and a null document. */
	docs = yj_parse_all("", 0);
	expect_json(docs, "[]");
	json_decref(docs);
	docs = yj_parse_all("---\n# c\n---\n", 12);
	expect_json(docs, "[]");
	json_decref(docs);
	d = yj_parse("", 0);
	expect_json(d, "null");
	json_decref(d);
	d = parse("# only a comment\n");
	expect_json(d, "null");
	json_decref(d);
	d = parse("---\n");
	expect_json(d, "null");
	json_decref(d);

	/* Anchors belong to their document. */
	assert_null(yj_parse_all("a: &x 1\n---\nb: *x\n", 18));
	assert_non_null(strstr(err_msg(), "yaml: line 3: unknown anchor 'x' referenced"));
}

static void test_scalar_typing(void **state)
{
	static const struct {
		const char *yaml, *json;
	} table[] = {
	    {"\"true\"", "\"true\""},
	    {"'yes'", "\"yes\""},
	    {"true", "true"},
	    {"False", "false"},
	    {"yes", "true"},
	    {"No", "false"},
	    {"ON", "true"},
	    {"off", "false"},
	    {"y", "\"y\""}, /* YAML 1.1's y/n are left alone */
	    {"~", "null"},
	    {"null", "null"},
	    {"NULL", "null"},
	    {"", "null"},
	    {"0", "0"},
	    {"-42", "-42"},
	    {"+7", "7"},
	    {"1_000", "1000"},
	    {"0644", "420"},
	    {"010", "8"},
	    {"\"010\"", "\"010\""},
	    {"0o17", "15"},
	    {"0x1F", "31"},
	    {"-0x10", "-16"},
	    {"0b101", "5"},
	    {"08", "8.0"}, /* not octal, so go-yaml reads a float */
	    {"9223372036854775807", "9223372036854775807"},
	    {"-9223372036854775808", "-9223372036854775808"},
	    {"9223372036854775808", "9223372036854775808.0"},
	    {"99999999999999999999", "1e20"},
	    {"1e3", "1000.0"},
	    {"1.5", "1.5"},
	    {".5", "0.5"},
	    {"-1.25e-2", "-0.0125"},
	    {"1.", "1.0"},
	    {"1e400", "\"1e400\""},
	    {"!!str 123", "\"123\""},
	    {"!!str true", "\"true\""},
	    {"!!int \"12\"", "12"},
	    {"10s", "\"10s\""},
	    {"1.2.3", "\"1.2.3\""},
	    {"0x", "\"0x\""},
	    {"v1", "\"v1\""},
	    {"2001-12-14", "\"2001-12-14\""},
	    {"1:20", "\"1:20\""},
	    {"nginx:1.25", "\"nginx:1.25\""},
	    {"'it''s'", "\"it's\""},
	    {"\"caf\\u00e9\\n\"", "\"caf\\u00e9\\n\""},
	    {"|\n  a\n  b\n", "\"a\\nb\\n\""},
	    {">-\n  folded\n  line\n", "\"folded line\""},
	    {"[1, \"1\", one]", "[1, \"1\", \"one\"]"},
	};
	char doc[256];

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		json_t *v, *want;

		snprintf(doc, sizeof(doc), "v: %s\n", table[i].yaml);
		v = parse(doc);
		if (!json_is_object(v) || json_object_size(v) != 1)
			fail_msg("%s: not a one-key mapping", doc);
		want = J(table[i].json);
		if (!json_equal(json_object_get(v, "v"), want)) {
			char *got = json_dumps(json_object_get(v, "v"), JSON_ENCODE_ANY);
			print_error("v: %s\nread as %s, want %s\n", table[i].yaml, got,
			            table[i].json);
			free(got);
			fail();
		}
		json_decref(want);
		json_decref(v);
	}

	/* Keys are always strings, spelled as written. */
	{
		json_t *v = parse("on: 1\n0644: 2\n~: 3\n\"q\": 4\ntrue: 5\n");
		expect_json(v, "{\"on\": 1, \"0644\": 2, \"~\": 3, \"q\": 4, \"true\": 5}");
		json_decref(v);
	}
	/* JSON has no infinity or NaN. */
	assert_null(yj_parse("v: .inf\n", 8));
	assert_string_equal(err_msg(), "yaml: line 1: cannot represent .inf in JSON");
	assert_null(yj_parse("a: 1\nb: -.Inf\n", 14));
	assert_null(yj_parse("x: [.nan]\n", 10));
}

/* Each bad document is NULL with "yaml: line N: ..." naming the right line. */
static void expect_error(const char *yaml, const char *prefix)
{
	json_t *v;

	err_clear();
	v = yj_parse(yaml, strlen(yaml));
	if (v) {
		json_decref(v);
		fail_msg("parsed but should not have:\n%s", yaml);
	}
	if (!starts_with(err_msg(), prefix))
		fail_msg("error \"%s\" does not start with \"%s\"", err_msg(), prefix);
	v = yj_parse_all(yaml, strlen(yaml));
	assert_null(v);
}

static void test_errors(void **state)
{
	char *deep;

	/* A key dedented to no enclosing level. */
	expect_error("apiVersion: v1\nmetadata:\n  name: x\n labels: {}\n",
	             "yaml: line 4: did not find expected key");
	/* An unclosed quote is found at the end; the message says where it began. */
	expect_error("a: 1\nb: \"unclosed\nc: 3\n", "yaml: line 4: found unexpected end of stream"
	                                            " (while scanning a quoted scalar at line 2)");
	expect_error("spec:\n  replicas: 1\n\tselector: {}\n",
	             "yaml: line 3: found a tab character that violates indentation");
	expect_error("a: b: c\n", "yaml: line 1: mapping values are not allowed in this context");
	expect_error("x: 1\nports: [80, 443\nother: 1\n",
	             "yaml: line 3: did not find expected ',' or ']'");
	expect_error("x: 1\ny: *nope\n", "yaml: line 2: unknown anchor 'nope' referenced");
	expect_error("? [a, b]\n: 1\n", "yaml: line 1: mapping key must be a scalar");
	expect_error("a:\n  <<: 5\n",
	             "yaml: line 2: map merge requires map or sequence of maps as the value");
	expect_error("a: 1\nb: \xff\n", "yaml: line 2: invalid leading UTF-8 octet");

	/* Nesting deep enough to threaten the stack is refused. */
	deep = malloc(20001);
	memset(deep, '[', 10000);
	memset(deep + 10000, ']', 10000);
	deep[20000] = '\0';
	expect_error(deep, "yaml: line 1: exceeded max depth of 1000");
	free(deep);

	/* "Billion laughs": aliases may not blow up the document. */
	{
		char doc[1024];
		size_t n = (size_t)snprintf(doc, sizeof(doc), "a: &a [x,x,x,x,x,x,x,x,x,x]\n");
		for (char c = 'b'; c <= 'k'; c++)
			n += (size_t)snprintf(doc + n, sizeof(doc) - n,
			                      "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n",
			                      c, c, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1,
			                      c - 1, c - 1, c - 1);
		expect_error(doc, "yaml: line ");
		assert_non_null(strstr(err_msg(), "document contains excessive aliasing"));
	}

	/* An error in a later document fails the whole stream. */
	assert_null(yj_parse_all("a: 1\n---\nb: [\n", 13));
	assert_string_equal(err_msg(), "yaml: line 4: did not find expected node content");
}

static void test_emit_roundtrip(void **state)
{
	static const char *const risky[] = {
	    "true",
	    "false",
	    "yes",
	    "No",
	    "on",
	    "y",
	    "n",
	    "null",
	    "~",
	    "",
	    "123",
	    "-7",
	    "0644",
	    "0x1F",
	    "1.5",
	    "1e3",
	    ".5",
	    ".inf",
	    "-.nan",
	    "1_000",
	    "a: b",
	    "a:b",
	    "- x",
	    "-",
	    "#c",
	    "x #c",
	    " lead",
	    "trail ",
	    "\ttab",
	    "@at",
	    "`tick",
	    "!bang",
	    "&amp",
	    "*star",
	    "%pct",
	    "|bar",
	    ">gt",
	    "'sq'",
	    "\"dq\"",
	    "[a]",
	    "{b}",
	    "a, b",
	    "?",
	    "---",
	    "...",
	    "<<",
	    "2024-01-01T00:00:00Z",
	    "10:30",
	    "caf\xc3\xa9 \xe4\xb8\xad",
	    "ctl\x01",
	    "multi\nline\n",
	    "no\nnewline at end",
	    "\n",
	    "\n\n",
	    "  indented\nnext\n",
	    "trailing\n\n\n",
	    " \nx",
	    "line \nspace",
	    "10s",
	    "nginx:1.25.3",
	};
	json_t *v = json_object(), *list = json_array(), *nested;
	char *text;

	for (size_t i = 0; i < sizeof(risky) / sizeof(risky[0]); i++) {
		json_array_append_new(list, json_string(risky[i]));
		/* Risky strings as keys too. */
		json_object_set_new(v, risky[i], json_integer((json_int_t)i));
	}
	json_object_set_new(v, "list", list);
	json_object_set_new(v, "nul", json_stringn("a\0b", 3));
	nested = json_pack("{s:i, s:I, s:I, s:f, s:f, s:f, s:f, s:b, s:b, s:n, s:{}, s:[],"
	                   " s:[[i, [s]], {s:[]}], s:[{s:s, s:[{s:i}]}]}",
	                   "int", 42, "min", (json_int_t)INT64_MIN, "max", (json_int_t)INT64_MAX,
	                   "real", 1.0, "small", 1e-300, "big", 1e300, "third", 1.0 / 3, "t", 1,
	                   "f", 0, "null", "emptyObject", "emptyArray", "deep", 1, "x", "o",
	                   "containers", "name", "x", "ports", "containerPort", 80);
	json_object_set_new(v, "nested", nested);
	text = roundtrip(v);
	/* The kubectl look: a list of mappings starts "- key:" under its key. */
	assert_non_null(strstr(text, "\n  containers:\n  - name: x\n    ports:\n"
	                             "    - containerPort: 80\n"));
	assert_non_null(strstr(text, "\n  real: 1.0\n"));
	assert_non_null(strstr(text, "\n  emptyObject: {}\n  emptyArray: []\n"));
	free(text);
	json_decref(v);

	/* The exact text of a small document. */
	v = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}}", "apiVersion", "v1", "kind",
	              "ConfigMap", "data", "enabled", "true", "count", "3", "empty", "", "pair",
	              "a: b", "script", "#!/bin/sh\necho hi\n");
	text = roundtrip(v);
	assert_string_equal(text, "apiVersion: v1\n"
	                          "kind: ConfigMap\n"
	                          "data:\n"
	                          "  enabled: \"true\"\n"
	                          "  count: \"3\"\n"
	                          "  empty: \"\"\n"
	                          "  pair: 'a: b'\n"
	                          "  script: |\n"
	                          "    #!/bin/sh\n"
	                          "    echo hi\n");
	free(text);
	json_decref(v);

	/* Bare scalars as whole documents. */
	{
		static const char *const roots[] = {"\"just text\"", "\"123\"", "42", "-0.5",
		                                    "true",          "null",    "[]", "{}"};
		for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
			v = J(roots[i]);
			free(roundtrip(v));
			json_decref(v);
		}
	}
	assert_null(yj_emit(NULL));
}

static void test_load_file(void **state)
{
	json_t *v = (json_t *)1;

	err_clear();
	assert_null(yj_load_file("/nonexistent/cube/kubeconfig"));
	assert_string_equal(err_msg(),
	                    "open /nonexistent/cube/kubeconfig: No such file or directory");
	assert_int_equal(yj_load("/nonexistent/cube/kubeconfig", &v), ERR_NOTFOUND);
	assert_null(v);

	/* A directory opens but does not read. */
	assert_int_equal(yj_load("/", &v), ERR_IO);
	assert_string_equal(err_msg(), "read /: Is a directory");

	/* A parse error names the file, then the line. */
	{
		char path[] = "/tmp/test_yamljson_XXXXXX";
		int fd = mkstemp(path);
		char want[128];

		assert_true(fd >= 0);
		assert_int_equal(write(fd, "a: 1\n\tb: 2\n", 11), 11);
		close(fd);
		assert_int_equal(yj_load(path, &v), ERR_PARSE);
		snprintf(want, sizeof(want), "%s: yaml: line 2: ", path);
		assert_true(starts_with(err_msg(), want));
		unlink(path);
	}

	assert_int_equal(yj_load(data_path("kubeconfig.yaml"), &v), 0);
	assert_string_equal(json_string_value(json_object_get(v, "kind")), "Config");
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kubeconfig),      cmocka_unit_test(test_kubelet_config),
	    cmocka_unit_test(test_manifest_stream), cmocka_unit_test(test_scalar_typing),
	    cmocka_unit_test(test_errors),          cmocka_unit_test(test_emit_roundtrip),
	    cmocka_unit_test(test_load_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
