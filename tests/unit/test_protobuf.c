/* pb: Kubernetes protobuf bodies (as kubectl 1.32 sends them) decoded to JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/protobuf.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------------ */

static char *vector_path(const char *name)
{
	const char *dir = getenv("CUBE_VECTORS");
	char rel[256];

	if (!dir || !*dir)
		dir = "/work/main/tests/data/vectors";
	snprintf(rel, sizeof(rel), "%s", name);
	return file_join(dir, rel);
}

static unsigned char *load_vector(const char *name, size_t *len)
{
	char *path = vector_path(name), *data = NULL;
	int rc = file_read(path, &data, len, 1 << 20);

	if (rc)
		fail_msg("cannot read %s: %s", path, err_msg());
	free(path);
	return (unsigned char *)data;
}

static json_t *load_json(const char *name)
{
	char *path = vector_path(name);
	json_t *v = jx_load_file(path);

	if (!v)
		fail_msg("cannot load %s: %s", path, err_msg());
	free(path);
	return v;
}

static void assert_json_equal(json_t *got, json_t *want)
{
	if (!json_equal(got, want)) {
		char *g = jx_dump(got), *w = jx_dump(want);
		print_error("got:  %s\nwant: %s\n", g, w);
		free(g);
		free(w);
		fail();
	}
}

static char *b64(const void *d, size_t n)
{
	char *o = malloc(4 * ((n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)o, d, (int)n);
	return o;
}

static void rfc3339(int64_t s, char *buf, size_t n)
{
	time_t t = (time_t)s;
	struct tm tm;

	assert_non_null(gmtime_r(&t, &tm));
	/* %Y does not pad years below 1000; pad by hand. */
	snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/*
 * The .json files next to each vector are a field-by-field dump of the Go
 * structs (envelope + object), not the JSON API form. To compare, this turns
 * such a dump into what the JSON API carries, i.e. what pb_decode promises:
 *
 *  1. apiVersion/kind move from envelope.typeMeta into the object;
 *     contentEncoding/contentType ("" in all vectors) are dropped.
 *  2. "", 0 and false are dropped: they are Go zero values that gogo writes for
 *     every non-pointer field; the server defaults an absent field exactly as
 *     it would a zero one. (None of the vectors has a pointer field set to a
 *     zero value; the hand-built tests below cover that case.)
 *  3. Time objects {"seconds":N,"nanos":M} become RFC 3339 strings (computed
 *     here with gmtime_r, independently of the decoder); an empty Time ({},
 *     Go's "creationTimestamp": null) is dropped.
 *  4. Objects left empty ("resources": {}, "strategy": {"type": ""}, a status
 *     of zeros, an all-empty metadata) are dropped: empty non-pointer
 *     structs carry nothing.
 *  5. []byte fields (CSR spec.request, status.certificate) are shown as text
 *     in the dump; the JSON API carries them base64-encoded.
 * List elements are normalised but never dropped.
 */
static json_t *normalise(json_t *v, const char *path);

static bool is_time(json_t *o)
{
	const char *k;
	json_t *x;

	if (!json_is_object(o) || !json_object_get(o, "seconds"))
		return false;
	json_object_foreach(o, k, x)
	{
		if (strcmp(k, "seconds") != 0 && strcmp(k, "nanos") != 0)
			return false;
	}
	return true;
}

static json_t *normalise_object(json_t *v, const char *path)
{
	json_t *out = json_object(), *x;
	const char *k;

	json_object_foreach(v, k, x)
	{
		char sub[256];
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", k);
		json_t *n = normalise(x, sub);
		if (n)
			json_object_set_new(out, k, n);
	}
	if (json_object_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

static json_t *normalise(json_t *v, const char *path)
{
	if (json_is_string(v)) {
		if (json_string_length(v) == 0)
			return NULL;
		if (strcmp(path, "spec.request") == 0 || strcmp(path, "status.certificate") == 0) {
			char *e = b64(json_string_value(v), json_string_length(v));
			json_t *s = json_string(e);
			free(e);
			return s;
		}
		return json_incref(v);
	}
	if (json_is_integer(v))
		return json_integer_value(v) ? json_incref(v) : NULL;
	if (json_is_boolean(v))
		return json_is_true(v) ? json_incref(v) : NULL;
	if (json_is_null(v))
		return NULL;
	if (is_time(v)) {
		char buf[64];
		int64_t s = json_integer_value(json_object_get(v, "seconds"));
		if (s == 0 && json_integer_value(json_object_get(v, "nanos")) == 0)
			return NULL;
		rfc3339(s, buf, sizeof(buf));
		return json_string(buf);
	}
	if (json_is_array(v)) {
		json_t *out = json_array(), *x;
		size_t i;
		json_array_foreach(v, i, x)
		{
			json_t *n = normalise(x, path);
			json_array_append_new(out, n ? n : json_object());
		}
		return out;
	}
	return normalise_object(v, path);
}

static json_t *expected_from_dump(json_t *dump)
{
	json_t *obj = normalise(json_object_get(dump, "object"), "");

	if (!obj)
		obj = json_object();
	json_object_set(obj, "apiVersion", jx_get(dump, "envelope.typeMeta.apiVersion"));
	json_object_set(obj, "kind", jx_get(dump, "envelope.typeMeta.kind"));
	return obj;
}

static json_t *decode_vector(const char *stem, unsigned char **bin, size_t *len)
{
	char name[128];
	json_t *obj;

	snprintf(name, sizeof(name), "%s.bin", stem);
	*bin = load_vector(name, len);
	obj = pb_decode(*bin, *len);
	if (!obj)
		fail_msg("%s: %s", stem, err_msg());
	return obj;
}

static void check_vector(const char *stem)
{
	char name[128];
	unsigned char *bin;
	size_t len;
	json_t *got = decode_vector(stem, &bin, &len), *dump, *want;

	snprintf(name, sizeof(name), "%s.json", stem);
	dump = load_json(name);
	want = expected_from_dump(dump);
	assert_json_equal(got, want);
	json_decref(want);
	json_decref(dump);
	json_decref(got);
	free(bin);
}

/* A tiny protobuf writer for hand-built messages. */
struct buf {
	unsigned char d[8192];
	size_t n;
};

static void put_raw(struct buf *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->d));
	memcpy(b->d + b->n, p, n);
	b->n += n;
}

static void put_varint(struct buf *b, uint64_t v)
{
	do {
		unsigned char c = (unsigned char)(v & 0x7f);
		v >>= 7;
		if (v)
			c |= 0x80;
		put_raw(b, &c, 1);
	} while (v);
}

static void put_tag(struct buf *b, uint32_t num, unsigned wt)
{
	put_varint(b, (uint64_t)num << 3 | wt);
}

static void put_uint(struct buf *b, uint32_t num, uint64_t v)
{
	put_tag(b, num, 0);
	put_varint(b, v);
}

/* int32/int64 negatives go on the wire as 10-byte two's complement varints. */
static void put_int(struct buf *b, uint32_t num, int64_t v)
{
	put_uint(b, num, (uint64_t)v);
}

static void put_bytes(struct buf *b, uint32_t num, const void *p, size_t n)
{
	put_tag(b, num, 2);
	put_varint(b, n);
	put_raw(b, p, n);
}

static void put_str(struct buf *b, uint32_t num, const char *s)
{
	put_bytes(b, num, s, strlen(s));
}

static void put_msg(struct buf *b, uint32_t num, const struct buf *m)
{
	put_bytes(b, num, m->d, m->n);
}

static void put_entry(struct buf *b, uint32_t num, const char *k, const char *v)
{
	struct buf e = {0};
	put_str(&e, 1, k);
	put_str(&e, 2, v);
	put_msg(b, num, &e);
}

static void envelope(struct buf *out, const char *av, const char *kind, const struct buf *raw)
{
	struct buf tm = {0};

	out->n = 0;
	put_raw(out, "k8s\0", 4);
	put_str(&tm, 1, av);
	put_str(&tm, 2, kind);
	put_msg(out, 1, &tm);
	put_msg(out, 2, raw);
	put_str(out, 3, "");
	put_str(out, 4, "");
}

static json_t *decode_ok(const char *av, const char *kind, const struct buf *raw)
{
	struct buf env;
	json_t *o = NULL;

	envelope(&env, av, kind, raw);
	int rc = pb_parse(env.d, env.n, &o);
	if (rc)
		fail_msg("%s %s: %s", av, kind, err_msg());
	assert_non_null(o);
	return o;
}

static int decode_err(const char *av, const char *kind, const struct buf *raw)
{
	struct buf env;
	json_t *o = (json_t *)1;

	envelope(&env, av, kind, raw);
	int rc = pb_parse(env.d, env.n, &o);
	assert_null(o);
	assert_true(rc < 0);
	assert_true(strlen(err_msg()) > 0);
	return rc;
}

static json_t *parse(const char *text)
{
	json_t *v = jx_parse(text, strlen(text));
	assert_non_null(v);
	return v;
}

/* ---- the captured vectors ----------------------------------------------- */

static void test_vector_deployment(void **state)
{
	check_vector("pb-POST-Deployment");
}

static void test_vector_csr(void **state)
{
	check_vector("pb-PUT-CertificateSigningRequest");
}

static void test_vector_selfsubjectreview(void **state)
{
	check_vector("pb-POST-SelfSubjectReview");
}

static void test_vector_deleteoptions(void **state)
{
	check_vector("pb-DELETE-DeleteOptions");
}

/* What `kubectl create deployment web2 --image=nginx --replicas=3` must yield. */
static void test_deployment_fields(void **state)
{
	unsigned char *bin;
	size_t len;
	json_t *o = decode_vector("pb-POST-Deployment", &bin, &len);

	assert_string_equal(jx_str(o, "apiVersion"), "apps/v1");
	assert_string_equal(jx_str(o, "kind"), "Deployment");
	assert_string_equal(jx_str(o, "metadata.name"), "web2");
	assert_string_equal(jx_str(o, "metadata.labels.app"), "web2");
	assert_int_equal(json_object_size(jx_get(o, "metadata.labels")), 1);
	assert_null(jx_get(o, "metadata.creationTimestamp"));
	assert_null(jx_get(o, "metadata.namespace"));
	assert_int_equal(jx_int(o, "spec.replicas", -1), 3);
	assert_string_equal(jx_str(o, "spec.selector.matchLabels.app"), "web2");
	assert_string_equal(jx_str(o, "spec.template.metadata.labels.app"), "web2");
	json_t *cs = jx_get(o, "spec.template.spec.containers");
	assert_true(json_is_array(cs));
	assert_int_equal(json_array_size(cs), 1);
	json_t *c0 = json_array_get(cs, 0);
	assert_string_equal(jx_str(c0, "name"), "nginx");
	assert_string_equal(jx_str(c0, "image"), "nginx");
	assert_null(jx_get(c0, "resources"));
	assert_null(jx_get(c0, "stdin"));
	assert_null(jx_get(o, "spec.strategy"));
	assert_null(jx_get(o, "spec.minReadySeconds"));
	assert_null(jx_get(o, "spec.paused"));
	assert_null(jx_get(o, "status"));
	json_decref(o);
	free(bin);
}

/* What `kubectl certificate approve` must yield: the appended condition. */
static void test_csr_fields(void **state)
{
	unsigned char *bin;
	size_t len;
	json_t *o = decode_vector("pb-PUT-CertificateSigningRequest", &bin, &len);

	assert_string_equal(jx_str(o, "apiVersion"), "certificates.k8s.io/v1");
	assert_string_equal(jx_str(o, "kind"), "CertificateSigningRequest");
	assert_string_equal(jx_str(o, "metadata.name"), "csr-abc12");
	assert_string_equal(jx_str(o, "metadata.uid"), "63a0cf81-6bf5-4215-bb12-eb00303f96a7");
	assert_string_equal(jx_str(o, "metadata.resourceVersion"), "1066");
	assert_string_equal(jx_str(o, "metadata.creationTimestamp"), "2026-11-30T09:56:23Z");
	assert_string_equal(jx_str(o, "spec.request"),
	                    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlJQgotLS0tLUVORCBD"
	                    "RVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K");
	assert_string_equal(jx_str(o, "spec.signerName"),
	                    "kubernetes.io/kube-apiserver-client-kubelet");
	assert_string_equal(jx_str(o, "spec.username"), "system:bootstrap:abcdef");
	json_t *want_usages = parse("[\"digital signature\",\"client auth\"]");
	assert_json_equal(jx_get(o, "spec.usages"), want_usages);
	json_decref(want_usages);
	json_t *want_groups = parse("[\"system:bootstrappers\",\"system:authenticated\"]");
	assert_json_equal(jx_get(o, "spec.groups"), want_groups);
	json_decref(want_groups);
	assert_null(jx_get(o, "spec.uid"));
	assert_null(jx_get(o, "spec.expirationSeconds"));

	json_t *conds = jx_get(o, "status.conditions");
	assert_int_equal(json_array_size(conds), 1);
	json_t *c = json_array_get(conds, 0);
	assert_string_equal(jx_str(c, "type"), "Approved");
	assert_string_equal(jx_str(c, "status"), "True");
	assert_string_equal(jx_str(c, "reason"), "KubectlApprove");
	assert_string_equal(jx_str(c, "message"),
	                    "This CSR was approved by kubectl certificate approve.");
	assert_string_equal(jx_str(c, "lastUpdateTime"), "2026-11-30T09:58:23Z");
	assert_null(jx_get(c, "lastTransitionTime"));
	assert_null(jx_get(o, "status.certificate"));
	json_decref(o);
	free(bin);
}

/* The two bodies kubectl sends that carry nothing: just the type. */
static void test_empty_bodies(void **state)
{
	unsigned char *bin;
	size_t len;
	json_t *o = decode_vector("pb-POST-SelfSubjectReview", &bin, &len);
	json_t *want = parse("{\"apiVersion\":\"authentication.k8s.io/v1\","
	                     "\"kind\":\"SelfSubjectReview\"}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);
	free(bin);

	o = decode_vector("pb-DELETE-DeleteOptions", &bin, &len);
	want = parse("{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\"}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);
	free(bin);
}

/* ---- malformed input ---------------------------------------------------- */

static void test_bad_magic(void **state)
{
	static const struct {
		const char *d;
		size_t n;
	} bodies[] = {{"", 0},
	              {"k", 1},
	              {"k8s", 3},
	              {"k8s\1\n\0\0\0", 7},
	              {"K8s\0", 4},
	              {"{\"kind\":\"Pod\"}", 14},
	              {"\x0a\x13\x0a\x02v1", 6}};
	json_t *o;

	assert_int_equal(pb_parse(NULL, 0, &o), ERR_INVALID);
	assert_null(o);
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		const unsigned char *d = (const unsigned char *)bodies[i].d;
		o = (json_t *)1;
		assert_int_equal(pb_parse(d, bodies[i].n, &o), ERR_INVALID);
		assert_null(o);
		assert_non_null(strstr(err_msg(), "magic"));
		assert_null(pb_decode(d, bodies[i].n));
	}
	assert_false(pb_has_magic((const unsigned char *)"k8s", 3));
	assert_true(pb_has_magic((const unsigned char *)"k8s\0", 4));
	/* Magic and nothing else: an envelope without a kind. */
	assert_int_equal(pb_parse((const unsigned char *)"k8s\0", 4, &o), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "no kind"));
}

/* Length of a varint-prefixed field starting at p (tag byte, length varint). */
static size_t field_end(const unsigned char *p, size_t at)
{
	size_t i = at + 1, len = 0;
	unsigned shift = 0;

	for (;;) {
		unsigned char b = p[i++];
		len |= (size_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return i + len;
}

/*
 * Every prefix of every vector. A prefix is valid protobuf only when it ends
 * on a field boundary of the envelope: after typeMeta (T: the type with no
 * object), after raw (R: the whole object), after contentEncoding (R+2).
 * Everything else must fail with ERR_INVALID, and ASan checks no read
 * strays past the prefix (each prefix is copied to an exact-size buffer).
 */
static void test_truncations(void **state)
{
	static const char *stems[] = {"pb-POST-Deployment", "pb-PUT-CertificateSigningRequest",
	                              "pb-POST-SelfSubjectReview", "pb-DELETE-DeleteOptions"};

	for (size_t s = 0; s < sizeof(stems) / sizeof(stems[0]); s++) {
		unsigned char *bin;
		size_t len;
		json_t *full = decode_vector(stems[s], &bin, &len);
		size_t t_end = field_end(bin, 4), r_end = field_end(bin, t_end);
		json_t *type_only =
		    json_pack("{s:O,s:O}", "apiVersion", json_object_get(full, "apiVersion"),
		              "kind", json_object_get(full, "kind"));

		assert_int_equal(r_end + 4, len);
		for (size_t n = 0; n < len; n++) {
			unsigned char *cut = malloc(n ? n : 1);
			json_t *o = (json_t *)1;
			memcpy(cut, bin, n);
			int rc = pb_parse(cut, n, &o);
			if (n == t_end || n == r_end || n == r_end + 2) {
				if (rc)
					fail_msg("%s prefix %zu: %s", stems[s], n, err_msg());
				assert_json_equal(o, n == t_end ? type_only : full);
				json_decref(o);
			} else {
				if (rc != ERR_INVALID)
					fail_msg("%s prefix %zu: rc %d", stems[s], n, rc);
				assert_null(o);
			}
			free(cut);
		}
		json_decref(type_only);
		json_decref(full);
		free(bin);
	}
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rng(void)
{
	/* xorshift64*: fixed seed, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dULL) >> 32);
}

static void fuzz_one(const unsigned char *d, size_t n, int *ok)
{
	unsigned char *copy = malloc(n ? n : 1);
	json_t *o = (json_t *)1;
	int rc;

	memcpy(copy, d, n);
	rc = pb_parse(copy, n, &o);
	if (rc == 0) {
		assert_non_null(o);
		assert_true(json_is_object(o));
		char *s = jx_dump(o);
		assert_non_null(s);
		free(s);
		json_decref(o);
		(*ok)++;
	} else {
		assert_true(rc == ERR_INVALID || rc == ERR_UNSUPPORTED);
		assert_null(o);
		assert_true(strlen(err_msg()) > 0);
	}
	free(copy);
}

/* Random bytes, with and without the magic: never a crash, leak or stray read. */
static void test_random_bytes(void **state)
{
	unsigned char d[512];
	int ok = 0;

	for (int i = 0; i < 20000; i++) {
		size_t n = rng() % sizeof(d), at = 0;
		if (i % 2 == 0 && n >= 4) {
			memcpy(d, "k8s\0", 4);
			at = 4;
		}
		for (size_t j = at; j < n; j++)
			d[j] = (unsigned char)rng();
		fuzz_one(d, n, &ok);
	}
}

/* The vectors with a few bytes changed: the decoder gets deep before failing. */
static void test_mutated_vectors(void **state)
{
	static const char *stems[] = {"pb-POST-Deployment", "pb-PUT-CertificateSigningRequest",
	                              "pb-POST-SelfSubjectReview"};
	int ok = 0;

	for (size_t s = 0; s < sizeof(stems) / sizeof(stems[0]); s++) {
		char name[128];
		size_t len;
		snprintf(name, sizeof(name), "%s.bin", stems[s]);
		unsigned char *bin = load_vector(name, &len), d[1024];
		assert_true(len <= sizeof(d));
		for (int i = 0; i < 5000; i++) {
			memcpy(d, bin, len);
			int flips = 1 + (int)(rng() % 4);
			for (int f = 0; f < flips; f++) {
				size_t at = 4 + rng() % (len - 4);
				switch (rng() % 3) {
				case 0:
					d[at] = (unsigned char)rng();
					break;
				case 1:
					d[at] ^= (unsigned char)(1u << (rng() % 8));
					break;
				default:
					d[at] = (unsigned char)(d[at] + 1);
					break;
				}
			}
			fuzz_one(d, len, &ok);
		}
		free(bin);
	}
	/* Some mutations land in string bytes and still decode. */
	assert_true(ok > 0);
}

static void test_unknown_kind(void **state)
{
	struct buf raw = {0}, env;
	json_t *o;

	put_str(&raw, 1, "ignored");
	assert_int_equal(decode_err("v1", "PersistentVolume", &raw), ERR_UNSUPPORTED);
	assert_non_null(strstr(err_msg(), "PersistentVolume"));
	assert_int_equal(decode_err("apps/v1beta2", "Deployment", &raw), ERR_UNSUPPORTED);
	assert_non_null(strstr(err_msg(), "apps/v1beta2"));
	assert_int_equal(decode_err("v1", "", &raw), ERR_INVALID);

	/* A content encoding (gzip) is not something the server can decode. */
	struct buf tm = {0};
	env.n = 0;
	put_raw(&env, "k8s\0", 4);
	put_str(&tm, 1, "v1");
	put_str(&tm, 2, "Pod");
	put_msg(&env, 1, &tm);
	put_msg(&env, 2, &raw);
	put_str(&env, 3, "gzip");
	assert_int_equal(pb_parse(env.d, env.n, &o), ERR_UNSUPPORTED);
	assert_null(o);
	assert_non_null(strstr(err_msg(), "gzip"));

	assert_true(pb_kind_supported("apps/v1", "Deployment"));
	assert_true(pb_kind_supported("certificates.k8s.io/v1", "CertificateSigningRequest"));
	assert_true(pb_kind_supported("apps/v1", "DeleteOptions"));
	assert_true(pb_kind_supported("v1", "Secret"));
	assert_false(pb_kind_supported("v1", "PersistentVolume"));
	assert_false(pb_kind_supported(NULL, "Pod"));
}

static void test_malformed(void **state)
{
	struct buf raw = {0}, spec = {0};

	/* replicas (varint) sent length-delimited: wrong wire type, named by path. */
	put_str(&spec, 1, "3");
	put_msg(&raw, 2, &spec);
	assert_int_equal(decode_err("apps/v1", "Deployment", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "Deployment.spec.replicas"));
	assert_non_null(strstr(err_msg(), "wire type"));

	/* a string field sent as a varint */
	raw.n = spec.n = 0;
	put_uint(&spec, 1, 7);
	put_msg(&raw, 1, &spec);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "Pod.metadata.name"));

	/* groups (wire types 3 and 4), and the undefined wire types 6 and 7 */
	for (unsigned wt = 3; wt <= 7; wt++) {
		if (wt == 5)
			continue;
		raw.n = 0;
		put_tag(&raw, 50, wt);
		put_uint(&raw, 1, 0);
		assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
	}
	raw.n = 0;
	put_tag(&raw, 50, 3);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "groups"));

	/* field number 0 */
	raw.n = 0;
	put_uint(&raw, 0, 1);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);

	/* an 11-byte varint, and a 10-byte one overflowing 64 bits */
	static const unsigned char long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                            0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	static const unsigned char big_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
	                                           0xff, 0xff, 0xff, 0xff, 0x02};
	raw.n = spec.n = 0;
	put_raw(&spec, long_varint, sizeof(long_varint));
	put_msg(&raw, 2, &spec);
	assert_int_equal(decode_err("apps/v1", "Deployment", &raw), ERR_INVALID);
	raw.n = spec.n = 0;
	put_raw(&spec, big_varint, sizeof(big_varint));
	put_msg(&raw, 2, &spec);
	assert_int_equal(decode_err("apps/v1", "Deployment", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "overflow"));

	/* a length past the end of the enclosing message */
	raw.n = 0;
	put_tag(&raw, 1, 2);
	put_varint(&raw, 1000);
	put_str(&raw, 9, "x");
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "past the end"));
	/* a huge length must not wrap a pointer */
	raw.n = 0;
	put_tag(&raw, 1, 2);
	put_varint(&raw, UINT64_MAX);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);

	/* invalid UTF-8 in a string, and in a map key */
	raw.n = spec.n = 0;
	put_str(&spec, 1, "bad\xff");
	put_msg(&raw, 1, &spec);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "UTF-8"));
	raw.n = spec.n = 0;
	put_entry(&spec, 11, "\xc0\xaf", "v");
	put_msg(&raw, 1, &spec);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "Pod.metadata.labels"));

	/* an IntOrString of an unknown type */
	struct buf ios = {0}, ru = {0}, strat = {0};
	put_uint(&ios, 1, 2);
	put_msg(&ru, 1, &ios);
	put_msg(&strat, 2, &ru);
	spec.n = raw.n = 0;
	put_msg(&spec, 4, &strat);
	put_msg(&raw, 2, &spec);
	assert_int_equal(decode_err("apps/v1", "Deployment", &raw), ERR_INVALID);
	assert_non_null(strstr(err_msg(), "Deployment.spec.strategy.rollingUpdate.maxUnavailable"));

	/* Times outside years 1..9999, and nanos out of range */
	int64_t bad_secs[] = {-62135596801LL, 253402300800LL, INT64_MIN, INT64_MAX};
	for (size_t i = 0; i < 4; i++) {
		struct buf ts = {0}, meta = {0};
		put_int(&ts, 1, bad_secs[i]);
		put_msg(&meta, 8, &ts);
		raw.n = 0;
		put_msg(&raw, 1, &meta);
		assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
		assert_non_null(strstr(err_msg(), "creationTimestamp"));
	}
	struct buf ts = {0}, meta = {0};
	put_int(&ts, 1, 100);
	put_int(&ts, 2, -1);
	put_msg(&meta, 8, &ts);
	raw.n = 0;
	put_msg(&raw, 1, &meta);
	assert_int_equal(decode_err("v1", "Pod", &raw), ERR_INVALID);
}

/* ---- hand-built messages ------------------------------------------------ */

/* Negative int32s, maps, pointer zeros, IntOrString, Quantity, unknown fields. */
static void test_handbuilt_deployment(void **state)
{
	struct buf raw = {0}, meta = {0}, spec = {0}, sel = {0}, tmpl = {0}, pod = {0}, c = {0},
	           port = {0}, res = {0}, q = {0}, strat = {0}, ru = {0}, ios = {0};

	put_str(&meta, 1, "neg");
	put_entry(&meta, 11, "app", "web");
	put_entry(&meta, 11, "empty", "");
	put_entry(&meta, 12, "note", "first");
	put_entry(&meta, 12, "note", "second");
	put_uint(&meta, 99, 12345); /* unknown varint */
	put_tag(&meta, 98, 1);      /* unknown fixed64 */
	put_raw(&meta, "\1\2\3\4\5\6\7\x8", 8);
	put_tag(&meta, 97, 5); /* unknown fixed32 */
	put_raw(&meta, "\1\2\3\4", 4);
	put_str(&meta, 96, "unknown bytes"); /* unknown length-delimited */
	put_msg(&raw, 1, &meta);

	put_int(&spec, 1, -1); /* replicas: a 10-byte varint */
	put_entry(&sel, 1, "app", "web");
	put_msg(&spec, 2, &sel);
	put_str(&c, 1, "app");
	put_str(&c, 2, "nginx:1.27");
	put_str(&c, 3, "sh");
	put_str(&c, 3, ""); /* empty list elements are kept */
	put_uint(&port, 3, 80);
	put_str(&port, 4, "TCP");
	put_msg(&c, 6, &port);
	put_str(&q, 1, "500m");
	{
		struct buf e = {0};
		put_str(&e, 1, "cpu");
		put_msg(&e, 2, &q);
		put_msg(&res, 1, &e);
		struct buf e2 = {0}, q0 = {0};
		put_str(&e2, 1, "memory");
		put_msg(&e2, 2, &q0); /* empty Quantity is "0" */
		put_msg(&res, 2, &e2);
	}
	put_msg(&c, 8, &res);
	put_msg(&pod, 2, &c);
	put_int(&pod, 25, -5); /* priority: negative int32 */
	put_int(&pod, 4, 0);   /* terminationGracePeriodSeconds: pointer 0 */
	put_msg(&tmpl, 2, &pod);
	put_msg(&spec, 3, &tmpl);
	put_uint(&ios, 1, 1);
	put_str(&ios, 3, "25%");
	put_msg(&ru, 1, &ios);
	ios.n = 0;
	put_uint(&ios, 1, 0);
	put_int(&ios, 2, 1);
	put_msg(&ru, 2, &ios);
	put_str(&strat, 1, "RollingUpdate");
	put_msg(&strat, 2, &ru);
	put_msg(&spec, 4, &strat);
	put_int(&spec, 5, 0); /* minReadySeconds: not a pointer, dropped */
	put_int(&spec, 6, 0); /* revisionHistoryLimit: pointer, kept */
	put_uint(&spec, 7, 1);
	put_int(&spec, 9, 600);
	put_msg(&raw, 2, &spec);

	json_t *o = decode_ok("apps/v1", "Deployment", &raw);
	json_t *want = parse(
	    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
	    "\"metadata\":{\"name\":\"neg\",\"labels\":{\"app\":\"web\",\"empty\":\"\"},"
	    "\"annotations\":{\"note\":\"second\"}},"
	    "\"spec\":{\"replicas\":-1,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
	    "\"template\":{\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"nginx:1.27\","
	    "\"command\":[\"sh\",\"\"],\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}],"
	    "\"resources\":{\"limits\":{\"cpu\":\"500m\"},\"requests\":{\"memory\":\"0\"}}}],"
	    "\"priority\":-5,\"terminationGracePeriodSeconds\":0}},"
	    "\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":"
	    "{\"maxUnavailable\":\"25%\",\"maxSurge\":1}},"
	    "\"revisionHistoryLimit\":0,\"paused\":true,\"progressDeadlineSeconds\":600}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);
}

static void test_handbuilt_pod(void **state)
{
	struct buf raw = {0}, meta = {0}, spec = {0}, tol = {0}, sc = {0}, st = {0}, cond = {0},
	           ts = {0}, own = {0}, c = {0};

	put_str(&meta, 1, "p");
	put_str(&meta, 3, "default");
	put_str(&own, 5, "apps/v1");
	put_str(&own, 1, "ReplicaSet");
	put_str(&own, 3, "rs");
	put_str(&own, 4, "u-1");
	put_uint(&own, 6, 1);
	put_uint(&own, 7, 0); /* blockOwnerDeletion: pointer false, kept */
	put_msg(&meta, 13, &own);
	put_str(&meta, 14, "example.com/fin");
	put_msg(&raw, 1, &meta);

	put_str(&c, 1, "c");
	put_msg(&spec, 2, &c);
	put_str(&spec, 10, "node-1");
	put_entry(&spec, 7, "disk", "ssd");
	put_str(&tol, 1, "node.kubernetes.io/unreachable");
	put_str(&tol, 2, "Exists");
	put_str(&tol, 4, "NoExecute");
	put_int(&tol, 5, -1); /* int64 negative */
	put_msg(&spec, 22, &tol);
	/* supplementalGroups, once packed and once not: both append */
	{
		struct buf packed = {0};
		put_varint(&packed, 1);
		put_varint(&packed, 2);
		put_bytes(&sc, 4, packed.d, packed.n);
		put_int(&sc, 4, 3);
	}
	put_msg(&spec, 14, &sc);
	put_msg(&raw, 2, &spec);

	put_str(&st, 1, "Running");
	put_str(&cond, 1, "Ready");
	put_str(&cond, 2, "True");
	put_int(&ts, 1, 951782400); /* 2000-02-29T00:00:00Z */
	put_int(&ts, 2, 999999999); /* Time keeps whole seconds */
	put_msg(&cond, 4, &ts);
	put_msg(&st, 2, &cond);
	put_str(&st, 6, "10.0.0.5");
	put_msg(&raw, 3, &st);

	json_t *o = decode_ok("v1", "Pod", &raw);
	json_t *want = parse(
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
	    "\"namespace\":\"default\",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
	    "\"kind\":\"ReplicaSet\",\"name\":\"rs\",\"uid\":\"u-1\",\"controller\":true,"
	    "\"blockOwnerDeletion\":false}],\"finalizers\":[\"example.com/fin\"]},"
	    "\"spec\":{\"containers\":[{\"name\":\"c\"}],\"nodeName\":\"node-1\","
	    "\"nodeSelector\":{\"disk\":\"ssd\"},\"tolerations\":[{\"key\":"
	    "\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
	    "\"tolerationSeconds\":-1}],\"securityContext\":{\"supplementalGroups\":[1,2,3]}},"
	    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
	    "\"True\",\"lastTransitionTime\":\"2000-02-29T00:00:00Z\"}],\"podIP\":\"10.0.0.5\"}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);

	/* An empty securityContext is a pointer to an empty struct: kept as {}. */
	raw.n = spec.n = sc.n = 0;
	put_msg(&spec, 14, &sc);
	put_msg(&raw, 2, &spec);
	o = decode_ok("v1", "Pod", &raw);
	want = parse("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"spec\":{\"securityContext\":{}}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);
}

static void test_handbuilt_csr_extra_and_bytes(void **state)
{
	struct buf raw = {0}, spec = {0}, status = {0}, ev = {0}, e = {0};
	unsigned char all[256];

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	put_bytes(&spec, 1, all, sizeof(all));
	put_int(&spec, 8, 0); /* expirationSeconds: pointer 0, kept */
	put_str(&ev, 1, "a");
	put_str(&ev, 1, "b");
	put_str(&e, 1, "scopes");
	put_msg(&e, 2, &ev);
	put_msg(&spec, 6, &e);
	e.n = 0;
	put_str(&e, 1, "none"); /* an entry without a value */
	put_msg(&spec, 6, &e);
	put_msg(&raw, 2, &spec);
	put_bytes(&status, 2, all, 1);
	put_msg(&raw, 3, &status);

	json_t *o = decode_ok("certificates.k8s.io/v1", "CertificateSigningRequest", &raw);
	char *want_req = b64(all, sizeof(all));
	assert_string_equal(jx_str(o, "spec.request"), want_req);
	free(want_req);
	assert_string_equal(jx_str(o, "status.certificate"), "AA==");
	assert_int_equal(jx_int(o, "spec.expirationSeconds", -1), 0);
	json_t *want_extra = parse("{\"scopes\":[\"a\",\"b\"],\"none\":[]}");
	assert_json_equal(jx_get(o, "spec.extra"), want_extra);
	json_decref(want_extra);
	json_decref(o);

	/* base64 padding for every length mod 3 */
	for (size_t n = 0; n < 8; n++) {
		raw.n = spec.n = 0;
		put_bytes(&spec, 1, "abcdefgh", n);
		put_msg(&raw, 2, &spec);
		o = decode_ok("certificates.k8s.io/v1", "CertificateSigningRequest", &raw);
		char *w = b64("abcdefgh", n);
		if (n == 0)
			assert_null(jx_get(o, "spec.request"));
		else
			assert_string_equal(jx_str(o, "spec.request"), w);
		free(w);
		json_decref(o);
	}
}

static void test_handbuilt_lease_and_options(void **state)
{
	struct buf raw = {0}, spec = {0}, ts = {0}, pre = {0}, opts = {0};

	put_str(&spec, 1, ""); /* holderIdentity: *string, kept */
	put_int(&spec, 2, 40);
	put_int(&ts, 1, 1796032583);
	put_int(&ts, 2, 123456789);
	put_msg(&spec, 4, &ts);
	put_msg(&spec, 3, &(struct buf){0}); /* zero MicroTime: unset */
	put_int(&spec, 5, 0);
	put_msg(&raw, 2, &spec);
	json_t *o = decode_ok("coordination.k8s.io/v1", "Lease", &raw);
	json_t *want =
	    parse("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
	          "\"spec\":{\"holderIdentity\":\"\",\"leaseDurationSeconds\":40,"
	          "\"renewTime\":\"2026-11-30T09:56:23.123456Z\",\"leaseTransitions\":0}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);

	raw.n = 0;
	put_int(&raw, 1, 0); /* gracePeriodSeconds 0: delete now */
	put_str(&pre, 1, "u-1");
	put_msg(&raw, 2, &pre);
	put_str(&raw, 4, "Foreground");
	put_str(&raw, 5, "All");
	o = decode_ok("v1", "DeleteOptions", &raw);
	want = parse("{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"gracePeriodSeconds\":0,"
	             "\"preconditions\":{\"uid\":\"u-1\"},\"propagationPolicy\":\"Foreground\","
	             "\"dryRun\":[\"All\"]}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);

	struct buf meta = {0};
	put_str(&meta, 1, "p");
	put_str(&meta, 3, "ns");
	opts.n = 0;
	put_int(&opts, 1, 30);
	raw.n = 0;
	put_msg(&raw, 1, &meta);
	put_msg(&raw, 2, &opts);
	o = decode_ok("policy/v1", "Eviction", &raw);
	want = parse("{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":"
	             "{\"name\":\"p\",\"namespace\":\"ns\"},\"deleteOptions\":"
	             "{\"gracePeriodSeconds\":30}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);
}

static void test_handbuilt_node_and_sets(void **state)
{
	struct buf raw = {0}, spec = {0}, taint = {0}, ts = {0};

	put_str(&spec, 1, "10.244.0.0/24");
	put_str(&spec, 7, "10.244.0.0/24");
	put_uint(&spec, 4, 1);
	put_str(&taint, 1, "k");
	put_str(&taint, 2, "v");
	put_str(&taint, 3, "NoSchedule");
	put_int(&ts, 1, 0);
	put_msg(&taint, 4, &ts); /* zero Time: unset */
	put_msg(&spec, 5, &taint);
	put_msg(&raw, 2, &spec);
	json_t *o = decode_ok("v1", "Node", &raw);
	json_t *want = parse("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"spec\":{\"podCIDR\":"
	                     "\"10.244.0.0/24\",\"podCIDRs\":[\"10.244.0.0/24\"],\"unschedulable\":"
	                     "true,\"taints\":[{\"key\":\"k\",\"value\":\"v\",\"effect\":"
	                     "\"NoSchedule\"}]}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);

	static const char *kinds[] = {"ReplicaSet", "StatefulSet", "DaemonSet"};
	for (size_t i = 0; i < 3; i++) {
		struct buf s = {0}, sel = {0};
		put_entry(&sel, 1, "app", "x");
		if (i < 2)
			put_int(&s, 1, 0); /* replicas 0: a pointer, kept */
		put_msg(&s, i < 2 ? 2 : 1, &sel);
		raw.n = 0;
		put_msg(&raw, 2, &s);
		o = decode_ok("apps/v1", kinds[i], &raw);
		assert_string_equal(jx_str(o, "kind"), kinds[i]);
		assert_string_equal(jx_str(o, "spec.selector.matchLabels.app"), "x");
		if (i < 2)
			assert_int_equal(jx_int(o, "spec.replicas", -1), 0);
		json_decref(o);
	}
}

/* Repeated singular fields: last scalar wins, messages merge. */
static void test_merge_semantics(void **state)
{
	struct buf raw = {0}, m1 = {0}, m2 = {0};

	put_str(&m1, 1, "first");
	put_str(&m1, 3, "ns");
	put_str(&m2, 1, "second");
	put_str(&m2, 3, ""); /* a later zero unsets */
	put_entry(&m2, 11, "a", "b");
	put_msg(&raw, 1, &m1);
	put_msg(&raw, 1, &m2);
	json_t *o = decode_ok("v1", "Pod", &raw);
	json_t *want = parse("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":"
	                     "{\"name\":\"second\",\"labels\":{\"a\":\"b\"}}}");
	assert_json_equal(o, want);
	json_decref(want);
	json_decref(o);
}

/* Time formatting against gmtime_r over the whole range Go accepts. */
static void test_time_range(void **state)
{
	int64_t fixed[] = {-62135596800LL, 253402300799LL, -1,        1, 86399, 86400, 951782400,
	                   4107542400LL,   -2208988800LL,  1796032703};
	char want[64];

	for (int i = 0; i < 2000 + 10; i++) {
		int64_t s;
		if (i < 10)
			s = fixed[i];
		else
			s = -62135596800LL +
			    (int64_t)(((uint64_t)rng() << 32 | rng()) % 315537897600ULL);
		struct buf raw = {0}, meta = {0}, ts = {0};
		put_int(&ts, 1, s);
		put_msg(&meta, 8, &ts);
		put_msg(&raw, 1, &meta);
		json_t *o = decode_ok("v1", "Pod", &raw);
		rfc3339(s, want, sizeof(want));
		if (strcmp(jx_str(o, "metadata.creationTimestamp"), want) != 0)
			fail_msg("%lld: got %s want %s", (long long)s,
			         jx_str(o, "metadata.creationTimestamp"), want);
		json_decref(o);
	}
	/* the ends of the range, spelled out */
	struct buf raw = {0}, meta = {0}, ts = {0};
	put_int(&ts, 1, -62135596800LL);
	put_msg(&meta, 8, &ts);
	ts.n = 0;
	put_int(&ts, 1, 253402300799LL);
	put_msg(&meta, 9, &ts);
	put_msg(&raw, 1, &meta);
	json_t *o = decode_ok("v1", "Pod", &raw);
	assert_string_equal(jx_str(o, "metadata.creationTimestamp"), "0001-01-01T00:00:00Z");
	assert_string_equal(jx_str(o, "metadata.deletionTimestamp"), "9999-12-31T23:59:59Z");
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vector_deployment),
	    cmocka_unit_test(test_vector_csr),
	    cmocka_unit_test(test_vector_selfsubjectreview),
	    cmocka_unit_test(test_vector_deleteoptions),
	    cmocka_unit_test(test_deployment_fields),
	    cmocka_unit_test(test_csr_fields),
	    cmocka_unit_test(test_empty_bodies),
	    cmocka_unit_test(test_bad_magic),
	    cmocka_unit_test(test_truncations),
	    cmocka_unit_test(test_random_bytes),
	    cmocka_unit_test(test_mutated_vectors),
	    cmocka_unit_test(test_unknown_kind),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_handbuilt_deployment),
	    cmocka_unit_test(test_handbuilt_pod),
	    cmocka_unit_test(test_handbuilt_csr_extra_and_bytes),
	    cmocka_unit_test(test_handbuilt_lease_and_options),
	    cmocka_unit_test(test_handbuilt_node_and_sets),
	    cmocka_unit_test(test_merge_semantics),
	    cmocka_unit_test(test_time_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
