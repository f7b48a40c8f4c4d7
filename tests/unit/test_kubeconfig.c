/* kubeconfig: written as kubectl writes it, read as kubectl reads it —
 * current-context → one cluster and one user, embedded data or files
 * resolved against the kubeconfig's directory, or a token. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/yamljson.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#define T0 (INT64_C(1796032800) * NS_PER_SEC) /* 2026-11-30T10:00:00Z */

#include "testassert.h"

/* Real PEM text, so what goes through base64 is what clients carry. */
static char *ca_pem, *cert_pem, *key_pem;

static int group_setup(void **state)
{
	EVP_PKEY *ca_key, *key;
	X509 *ca, *cert;
	static const char *const orgs[] = {"system:masters", NULL};
	struct pki_cert_spec spec = {
	    .cn = "kubernetes-admin",
	    .orgs = orgs,
	    .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_CLIENT_AUTH,
	    .not_before_ns = T0,
	    .not_after_ns = T0 + 365 * NS_PER_DAY,
	};

	clock_use_virtual(T0);
	ca_key = pki_key_new(PKI_KEY_ECDSA);
	key = pki_key_new(PKI_KEY_ECDSA);
	ca = pki_ca_new(ca_key, "kubernetes", 10 * 365 * NS_PER_DAY);
	cert = pki_cert_new(&spec, key, ca, ca_key);
	clock_use_real();
	if (!ca || !cert)
		return -1;
	ca_pem = pki_cert_pem(ca);
	cert_pem = pki_cert_pem(cert);
	key_pem = pki_key_pem(key);
	X509_free(ca);
	X509_free(cert);
	EVP_PKEY_free(ca_key);
	EVP_PKEY_free(key);
	return 0;
}

static int group_teardown(void **state)
{
	free(ca_pem);
	free(cert_pem);
	free(key_pem);
	return 0;
}

static int setup(void **state)
{
	char *dir = strdup("/tmp/test_kubeconfig.XXXXXX");

	if (!mkdtemp(dir))
		return -1;
	err_clear();
	*state = dir;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static int teardown(void **state)
{
	char *dir = *state;

	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
	return 0;
}

/* ---- helpers -------------------------------------------------------------- */

static char *pathf(const char *dir, const char *name)
{
	return file_join(dir, name);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Not inlined: GCC 12 at -O3 takes the returned heap pointer for &buf. */
__attribute__((noinline)) static char *read_text(const char *path)
{
	char *buf = NULL;
	if (file_read(path, &buf, NULL, 1 << 20) < 0)
		fail_msg("read %s: %s", path, err_msg());
	return buf;
}

/* The admin kubeconfig as cluster.c writes it (borrowed strings). */
static struct kubeconfig admin_embedded(void)
{
	struct kubeconfig kc = {
	    .cluster = "kubernetes",
	    .user = "kubernetes-admin",
	    .context = "kubernetes-admin@kubernetes",
	    .namespace = "kube-system",
	    .server = "https://127.0.0.1:6443",
	    .ca_data = ca_pem,
	    .cert_data = cert_pem,
	    .key_data = key_pem,
	};
	return kc;
}

static void assert_str_or_null(const char *got, const char *want, const char *what)
{
	if (!want && !got)
		return;
	if (!want || !got || strcmp(got, want) != 0)
		fail_msg("%s: got \"%s\", want \"%s\"", what, got ? got : "(null)",
		         want ? want : "(null)");
}

/* ---- tests ------------------------------------------------------------------ */

static void test_save_load_embedded(void **state)
{
	char *path = pathf(*state, "admin.conf"), *text;
	struct kubeconfig want = admin_embedded(), got;
	struct stat st;
	json_t *doc, *cluster, *user;

	assert_int_equal(kubeconfig_save(path, &want), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.cluster, "kubernetes", "cluster");
	assert_str_or_null(got.user, "kubernetes-admin", "user");
	assert_str_or_null(got.context, "kubernetes-admin@kubernetes", "context");
	assert_str_or_null(got.namespace, "kube-system", "namespace");
	assert_str_or_null(got.server, "https://127.0.0.1:6443", "server");
	assert_str_or_null(got.ca_data, ca_pem, "ca_data");
	assert_str_or_null(got.cert_data, cert_pem, "cert_data");
	assert_str_or_null(got.key_data, key_pem, "key_data");
	assert_null(got.ca_file);
	assert_null(got.cert_file);
	assert_null(got.key_file);
	assert_null(got.token);
	kubeconfig_free(&got);
	assert_null(got.key_data);

	/* The shape kubectl writes: *-data fields, base64, no raw PEM. */
	text = read_text(path);
	assert_null(strstr(text, "-----BEGIN"));
	assert_contains(text, "current-context: kubernetes-admin@kubernetes\n");
	assert_contains(text, "certificate-authority-data: LS0tLS1CRUdJTi");
	doc = yj_load_file(path);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "apiVersion")), "v1");
	assert_string_equal(json_string_value(json_object_get(doc, "kind")), "Config");
	cluster = json_object_get(json_array_get(json_object_get(doc, "clusters"), 0), "cluster");
	user = json_object_get(json_array_get(json_object_get(doc, "users"), 0), "user");
	assert_non_null(json_object_get(cluster, "certificate-authority-data"));
	assert_null(json_object_get(cluster, "certificate-authority"));
	assert_non_null(json_object_get(user, "client-certificate-data"));
	assert_non_null(json_object_get(user, "client-key-data"));
	assert_null(json_object_get(user, "token"));
	json_decref(doc);
	free(text);
	free(path);
}

static void test_save_overwrites(void **state)
{
	char *path = pathf(*state, "admin.conf");
	struct kubeconfig kc = admin_embedded(), got;

	assert_int_equal(kubeconfig_save(path, &kc), 0);
	kc.server = "https://10.0.0.1:6443";
	kc.namespace = NULL;
	assert_int_equal(kubeconfig_save(path, &kc), 0);
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.server, "https://10.0.0.1:6443", "server");
	assert_null(got.namespace);
	kubeconfig_free(&got);
	free(path);
}

static void test_save_load_files(void **state)
{
	char *dir = *state, *sub = pathf(dir, "pki"), *path = pathf(dir, "kubelet.conf");
	char *ca = pathf(dir, "pki/ca.crt"), *crt = pathf(dir, "kubelet-client.crt");
	char *key = pathf(dir, "kubelet-client.key"), *text;
	struct kubeconfig want = {
	    .cluster = "default-cluster",
	    .user = "default-auth",
	    .context = "default-context",
	    .namespace = "default",
	    .server = "https://127.0.0.1:6443",
	    /* Files win over data. */
	    .ca_data = "ignored",
	    .ca_file = "pki/ca.crt", /* relative: against the kubeconfig's dir */
	    .cert_file = crt,        /* absolute */
	    .key_file = "kubelet-client.key",
	};
	struct kubeconfig got;
	json_t *doc, *cluster, *user;

	assert_int_equal(mkdir(sub, 0755), 0);
	write_text(ca, ca_pem);
	write_text(crt, cert_pem);
	write_text(key, key_pem);
	assert_int_equal(kubeconfig_save(path, &want), 0);

	/* Written as paths, exactly as given. */
	text = read_text(path);
	assert_null(strstr(text, "-data"));
	doc = yj_load_file(path);
	cluster = json_object_get(json_array_get(json_object_get(doc, "clusters"), 0), "cluster");
	user = json_object_get(json_array_get(json_object_get(doc, "users"), 0), "user");
	assert_string_equal(json_string_value(json_object_get(cluster, "certificate-authority")),
	                    "pki/ca.crt");
	assert_string_equal(json_string_value(json_object_get(user, "client-certificate")), crt);
	assert_string_equal(json_string_value(json_object_get(user, "client-key")),
	                    "kubelet-client.key");
	json_decref(doc);
	free(text);

	/* Read back with the files' contents. */
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.ca_file, ca, "ca_file");
	assert_str_or_null(got.ca_data, ca_pem, "ca_data");
	assert_str_or_null(got.cert_file, crt, "cert_file");
	assert_str_or_null(got.cert_data, cert_pem, "cert_data");
	assert_str_or_null(got.key_file, key, "key_file");
	assert_str_or_null(got.key_data, key_pem, "key_data");
	assert_str_or_null(got.namespace, "default", "namespace");
	kubeconfig_free(&got);

	free(sub);
	free(path);
	free(ca);
	free(crt);
	free(key);
}

static void test_relative_paths_from_elsewhere(void **state)
{
	/* The directory is the kubeconfig's, not the process's. */
	char *dir = *state, *confdir = pathf(dir, "etc/kubernetes"), *path, *ca;
	char *cwd = getcwd(NULL, 0);
	struct kubeconfig got;

	assert_int_equal(file_mkdirs(confdir, 0755), 0);
	path = pathf(confdir, "kubelet.conf");
	ca = pathf(dir, "etc/ca.crt");
	write_text(ca, ca_pem);
	write_text(path, "apiVersion: v1\n"
	                 "kind: Config\n"
	                 "clusters:\n"
	                 "- name: c\n"
	                 "  cluster:\n"
	                 "    server: https://127.0.0.1:6443\n"
	                 "    certificate-authority: ../ca.crt\n"
	                 "contexts:\n"
	                 "- name: x\n"
	                 "  context: {cluster: c, user: u}\n"
	                 "current-context: x\n"
	                 "users:\n"
	                 "- name: u\n"
	                 "  user: {token: abcdef.0123456789abcdef}\n");
	assert_int_equal(chdir("/"), 0);
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_int_equal(chdir(cwd), 0);
	assert_str_or_null(got.ca_data, ca_pem, "ca_data");
	assert_contains(got.ca_file, "etc/kubernetes/../ca.crt");
	assert_str_or_null(got.token, "abcdef.0123456789abcdef", "token");
	kubeconfig_free(&got);
	free(cwd);
	free(confdir);
	free(path);
	free(ca);
}

static void test_missing_referenced_file(void **state)
{
	char *path = pathf(*state, "kubelet.conf");
	struct kubeconfig kc = admin_embedded(), got;

	kc.cert_file = "does-not-exist.pem";
	assert_int_equal(kubeconfig_save(path, &kc), 0);
	assert_int_equal(kubeconfig_load(path, &got), ERR_NOTFOUND);
	assert_contains(err_msg(), "does-not-exist.pem");
	/* Nothing half-filled is left behind. */
	assert_null(got.server);
	assert_null(got.ca_data);
	kubeconfig_free(&got);
	free(path);
}

static void test_token_user(void **state)
{
	char *path = pathf(*state, "bootstrap-kubelet.conf"), *text;
	struct kubeconfig want = {
	    .cluster = "kubernetes",
	    .user = "tls-bootstrap-token-user",
	    .context = "tls-bootstrap-token-user@kubernetes",
	    .server = "https://127.0.0.1:6443",
	    .ca_data = ca_pem,
	    .token = "abcdef.0123456789abcdef",
	};
	struct kubeconfig got;

	assert_int_equal(kubeconfig_save(path, &want), 0);
	text = read_text(path);
	assert_contains(text, "token: abcdef.0123456789abcdef");
	assert_null(strstr(text, "client-certificate"));
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.token, "abcdef.0123456789abcdef", "token");
	assert_str_or_null(got.user, "tls-bootstrap-token-user", "user");
	assert_str_or_null(got.ca_data, ca_pem, "ca_data");
	assert_null(got.cert_data);
	assert_null(got.key_data);
	assert_null(got.namespace);
	kubeconfig_free(&got);
	free(text);
	free(path);
}

static void test_kubectl_written_file(void **state)
{
	/* Several of each, as kubectl leaves them; current-context picks one. */
	char *path = pathf(*state, "config");
	struct kubeconfig got;

	write_text(path, "apiVersion: v1\n"
	                 "clusters:\n"
	                 "- cluster:\n"
	                 "    server: https://staging.example.com:6443\n"
	                 "    insecure-skip-tls-verify: true\n"
	                 "  name: staging\n"
	                 "- cluster:\n"
	                 "    certificate-authority-data: SGVsbG8sIENBIQ==\n"
	                 "    server: \"https://127.0.0.1:6443\"\n"
	                 "  name: kind-kind\n"
	                 "contexts:\n"
	                 "- context:\n"
	                 "    cluster: staging\n"
	                 "    user: admin\n"
	                 "  name: staging-admin\n"
	                 "- context:\n"
	                 "    cluster: kind-kind\n"
	                 "    namespace: dev\n"
	                 "    user: kind-kind\n"
	                 "  name: kind-kind\n"
	                 "current-context: kind-kind\n"
	                 "kind: Config\n"
	                 "preferences: {}\n"
	                 "users:\n"
	                 "- name: admin\n"
	                 "  user:\n"
	                 "    token: \"0123456789\"\n"
	                 "- name: kind-kind\n"
	                 "  user:\n"
	                 "    client-certificate-data: Y2VydA==\n"
	                 "    client-key-data: a2V5IQ==\n");
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.context, "kind-kind", "context");
	assert_str_or_null(got.cluster, "kind-kind", "cluster");
	assert_str_or_null(got.user, "kind-kind", "user");
	assert_str_or_null(got.namespace, "dev", "namespace");
	assert_str_or_null(got.server, "https://127.0.0.1:6443", "server");
	/* base64 with one and two padding characters. */
	assert_str_or_null(got.ca_data, "Hello, CA!", "ca_data");
	assert_str_or_null(got.cert_data, "cert", "cert_data");
	assert_str_or_null(got.key_data, "key!", "key_data");
	assert_null(got.token);
	kubeconfig_free(&got);
	free(path);
}

static void test_single_context_without_current(void **state)
{
	char *path = pathf(*state, "config");
	struct kubeconfig got;

	write_text(path, "apiVersion: v1\n"
	                 "kind: Config\n"
	                 "clusters:\n"
	                 "- name: only\n"
	                 "  cluster: {server: https://10.0.0.1:6443}\n"
	                 "contexts:\n"
	                 "- name: the-one\n"
	                 "  context: {cluster: only, user: me}\n"
	                 "users:\n"
	                 "- name: me\n"
	                 "  user: {token: t0k3n}\n");
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.context, "the-one", "context");
	assert_str_or_null(got.server, "https://10.0.0.1:6443", "server");
	assert_str_or_null(got.token, "t0k3n", "token");
	kubeconfig_free(&got);

	/* An empty current-context counts as none. */
	write_text(path, "clusters:\n"
	                 "- name: only\n"
	                 "  cluster: {server: https://10.0.0.2:6443}\n"
	                 "contexts:\n"
	                 "- name: the-one\n"
	                 "  context: {cluster: only, user: me}\n"
	                 "current-context: \"\"\n");
	assert_int_equal(kubeconfig_load(path, &got), 0);
	assert_str_or_null(got.server, "https://10.0.0.2:6443", "server");
	assert_null(got.token);
	kubeconfig_free(&got);
	free(path);
}

static void test_ambiguous_without_current(void **state)
{
	char *path = pathf(*state, "config");
	struct kubeconfig got;

	write_text(path, "clusters:\n"
	                 "- name: c\n"
	                 "  cluster: {server: https://10.0.0.1:6443}\n"
	                 "contexts:\n"
	                 "- name: a\n"
	                 "  context: {cluster: c, user: me}\n"
	                 "- name: b\n"
	                 "  context: {cluster: c, user: me}\n");
	assert_true(kubeconfig_load(path, &got) < 0);
	assert_contains(err_msg(), path);
	kubeconfig_free(&got);
	free(path);
}

static void test_unknown_context(void **state)
{
	char *path = pathf(*state, "config");
	struct kubeconfig kc = admin_embedded(), got;

	kc.context = "kubernetes-admin@kubernetes";
	assert_int_equal(kubeconfig_save(path, &kc), 0);
	/* Point current-context somewhere that does not exist. */
	{
		char *text = read_text(path), *p = strstr(text, "current-context: ");
		char *fixed;
		assert_non_null(p);
		*p = '\0';
		if (asprintf(&fixed, "%scurrent-context: nope\n%s", text, strchr(p + 1, '\n') + 1) <
		    0)
			abort();
		write_text(path, fixed);
		free(fixed);
		free(text);
	}
	assert_int_equal(kubeconfig_load(path, &got), ERR_INVALID);
	assert_contains(err_msg(), "context \"nope\" does not exist");
	assert_contains(err_msg(), path);
	assert_null(got.context);
	kubeconfig_free(&got);
	free(path);
}

static void test_unknown_cluster(void **state)
{
	char *path = pathf(*state, "config");
	struct kubeconfig got;

	write_text(path, "clusters:\n"
	                 "- name: real\n"
	                 "  cluster: {server: https://10.0.0.1:6443}\n"
	                 "contexts:\n"
	                 "- name: x\n"
	                 "  context: {cluster: imaginary, user: me}\n"
	                 "current-context: x\n");
	assert_int_equal(kubeconfig_load(path, &got), ERR_INVALID);
	assert_contains(err_msg(), "cluster \"imaginary\" does not exist");
	kubeconfig_free(&got);
	free(path);
}

static void test_missing_file(void **state)
{
	char *path = pathf(*state, "nope.conf");
	struct kubeconfig got;
	int r = kubeconfig_load(path, &got);

	assert_true(r < 0);
	assert_contains(err_msg(), path);
	assert_contains(err_msg(), "No such file or directory");
	assert_null(got.server);
	kubeconfig_free(&got);
	free(path);
}

static void test_malformed_yaml(void **state)
{
	char *path = pathf(*state, "config");
	struct kubeconfig got;

	write_text(path, "apiVersion: v1\n"
	                 "clusters:\n"
	                 "- name: c\n"
	                 "  cluster: {server: [unclosed\n"
	                 "current-context: x\n");
	assert_true(kubeconfig_load(path, &got) < 0);
	assert_contains(err_msg(), "yaml: line ");
	assert_contains(err_msg(), path);
	kubeconfig_free(&got);

	/* Valid YAML that is not a kubeconfig at all. */
	write_text(path, "- just\n- a\n- list\n");
	assert_true(kubeconfig_load(path, &got) < 0);
	kubeconfig_free(&got);
	free(path);
}

static void test_bad_base64(void **state)
{
	static const char *const bodies[] = {
	    "    certificate-authority-data: not*base64!\n",
	    "    certificate-authority-data: QUJD=\n", /* length not a multiple of 4 */
	    NULL,
	};
	char *path = pathf(*state, "config");
	struct kubeconfig got;

	for (size_t i = 0; bodies[i]; i++) {
		char *text;
		if (asprintf(&text,
		             "clusters:\n"
		             "- name: c\n"
		             "  cluster:\n"
		             "    server: https://10.0.0.1:6443\n"
		             "%s"
		             "contexts:\n"
		             "- name: x\n"
		             "  context: {cluster: c, user: u}\n"
		             "current-context: x\n",
		             bodies[i]) < 0)
			abort();
		write_text(path, text);
		free(text);
		if (kubeconfig_load(path, &got) >= 0)
			fail_msg("case %zu loaded", i);
		assert_contains(err_msg(), "illegal base64 data");
		assert_contains(err_msg(), "certificate-authority-data");
		kubeconfig_free(&got);
	}

	/* In the user too. */
	write_text(path, "clusters:\n"
	                 "- name: c\n"
	                 "  cluster: {server: https://10.0.0.1:6443}\n"
	                 "contexts:\n"
	                 "- name: x\n"
	                 "  context: {cluster: c, user: u}\n"
	                 "current-context: x\n"
	                 "users:\n"
	                 "- name: u\n"
	                 "  user:\n"
	                 "    client-key-data: '%%%%'\n");
	assert_true(kubeconfig_load(path, &got) < 0);
	assert_contains(err_msg(), "client-key-data");
	kubeconfig_free(&got);
	free(path);
}

static void test_free_empty(void **state)
{
	struct kubeconfig kc;

	memset(&kc, 0, sizeof(kc));
	kubeconfig_free(&kc);
	kubeconfig_free(&kc);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_save_load_embedded),
	    T(test_save_overwrites),
	    T(test_save_load_files),
	    T(test_relative_paths_from_elsewhere),
	    T(test_missing_referenced_file),
	    T(test_token_user),
	    T(test_kubectl_written_file),
	    T(test_single_context_without_current),
	    T(test_ambiguous_without_current),
	    T(test_unknown_context),
	    T(test_unknown_cluster),
	    T(test_missing_file),
	    T(test_malformed_yaml),
	    T(test_bad_base64),
	    T(test_free_empty),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
