/* The REST client against a real in-process API server on loopback: plain
 * requests, a watch, and credentials swapped under a running client. Runs
 * under ASan too, which makes it the memory check of both ends. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "apiserver/apiserver.h"
#include "client/informer.h"
#include "client/rest.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/jx.h"
#include "base/loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct world {
	char dir[64];
	struct loop *loop;
	struct apiserver *api;
	struct rest_client *client;
	struct kubeconfig kc;
};

struct result {
	int status, done;
	json_t *body;
	char err[256];
};

static void on_result(void *arg, int status, json_t *body, const char *err)
{
	struct result *r = arg;
	r->status = status;
	r->body = json_incref(body);
	snprintf(r->err, sizeof(r->err), "%s", err ? err : "");
	r->done = 1;
}

static void spin_until(struct world *w, const int *flag)
{
	int64_t deadline = clock_mono() + 10 * NS_PER_SEC;
	while (!*flag && clock_mono() < deadline) {
		event_base_loop(loop_base(w->loop), EVLOOP_ONCE);
	}
	assert_true(*flag);
}

static void call(struct world *w, const char *method, const char *path, json_t *body,
		 struct result *r)
{
	memset(r, 0, sizeof(*r));
	rest_do(w->client, method, path, body, on_result, r);
	spin_until(w, &r->done);
}

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	struct cluster_pki_opts po = {.cluster_name = "kubernetes",
				      .server = "https://127.0.0.1:6443",
				      .key_type = PKI_KEY_ECDSA,
				      .ca_validity_ns = CLUSTER_CA_VALIDITY,
				      .validity_ns = CLUSTER_CERT_VALIDITY};
	struct apiserver_opts ao;
	char path[128], data[128], crt[128], key[128], ca[128], server[64];

	snprintf(w->dir, sizeof(w->dir), "/tmp/cube-rest-XXXXXX");
	assert_non_null(mkdtemp(w->dir));
	po.dir = w->dir;
	assert_int_equal(cluster_pki_init(&po), 0);
	w->loop = loop_new();
	apiserver_opts_default(&ao);
	snprintf(crt, sizeof(crt), "%s/pki/apiserver.crt", w->dir);
	snprintf(key, sizeof(key), "%s/pki/apiserver.key", w->dir);
	snprintf(ca, sizeof(ca), "%s/pki/ca.crt", w->dir);
	snprintf(data, sizeof(data), "%s/data", w->dir);
	ao.bind_address = "127.0.0.1";
	ao.secure_port = 0;
	ao.tls_cert_file = crt;
	ao.tls_private_key_file = key;
	ao.client_ca_file = ca;
	ao.data_dir = data;
	w->api = apiserver_new(w->loop, &ao);
	assert_non_null(w->api);
	snprintf(path, sizeof(path), "%s/admin.conf", w->dir);
	assert_int_equal(kubeconfig_load(path, &w->kc), 0);
	snprintf(server, sizeof(server), "https://127.0.0.1:%d", apiserver_port(w->api));
	free(w->kc.server);
	w->kc.server = strdup(server);
	w->client = rest_client_from_kubeconfig(w->loop, &w->kc, "test_rest");
	assert_non_null(w->client);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	char cmd[128];
	rest_client_free(w->client);
	apiserver_free(w->api);
	loop_free(w->loop);
	kubeconfig_free(&w->kc);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", w->dir);
	assert_int_equal(system(cmd), 0);
	free(w);
	return 0;
}

static void test_requests(void **state)
{
	struct world *w = *state;
	struct result r;
	json_t *cm = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind",
			       "ConfigMap", "metadata", "name", "one", "data", "k", "v");

	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "items")), 4);
	json_decref(r.body);

	call(w, "POST", "/api/v1/namespaces/default/configmaps", cm, &r);
	assert_int_equal(r.status, 201);
	assert_string_equal(jx_str(r.body, "metadata.name"), "one");
	json_decref(r.body);

	call(w, "POST", "/api/v1/namespaces/default/configmaps", cm, &r);
	assert_int_equal(r.status, 409);
	assert_string_equal(jx_str(r.body, "reason"), "AlreadyExists");
	json_decref(r.body);
	json_decref(cm);

	call(w, "GET", "/api/v1/namespaces/default/configmaps/nope", NULL, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(jx_str(r.body, "message"), "configmaps \"nope\" not found");
	json_decref(r.body);
}

struct watched {
	int added, ended, end_status;
	char types[32];
};

static void on_event(void *arg, const char *type, json_t *obj)
{
	struct watched *s = arg;
	size_t n = strlen(s->types);
	if (n < sizeof(s->types) - 1)
		s->types[n] = type[0];
	s->added += !strcmp(type, "ADDED");
}

static void on_end(void *arg, int status, const char *err)
{
	struct watched *s = arg;
	s->ended = 1;
	s->end_status = status;
}

static void test_watch_and_rotation(void **state)
{
	struct world *w = *state;
	struct watched s = {0};
	struct result r;
	json_t *cm = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			       "metadata", "name", "two");
	struct rest_watch *wa =
		rest_watch(w->client, "/api/v1/namespaces/default/configmaps?watch=true", on_event,
			   on_end, &s);

	assert_non_null(wa);
	call(w, "POST", "/api/v1/namespaces/default/configmaps", cm, &r);
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	json_decref(cm);
	spin_until(w, &s.added);
	assert_string_equal(s.types, "A");

	/* New credentials: every connection closes, the watch ends with it... */
	assert_int_equal(rest_set_client_cert(w->client, w->kc.cert_data, w->kc.key_data), 0);
	spin_until(w, &s.ended);
	assert_int_equal(s.end_status, 0);
	/* ...and the next request goes out on a new connection. */
	call(w, "GET", "/api/v1/namespaces/default/configmaps/two", NULL, &r);
	assert_int_equal(r.status, 200);
	json_decref(r.body);

	/* Without a certificate the server says 401, as upstream. */
	rest_clear_client_cert(w->client);
	call(w, "GET", "/api/v1/namespaces", NULL, &r);
	assert_int_equal(r.status, 401);
	json_decref(r.body);
}

static void test_stop_watch_from_owner(void **state)
{
	struct world *w = *state;
	struct watched s = {0};
	struct rest_watch *wa = rest_watch(w->client, "/api/v1/namespaces?watch=true", on_event,
					   on_end, &s);
	spin_until(w, &s.added); /* the synthetic ADDED for existing namespaces */
	rest_watch_stop(wa);
	/* A stopped watch calls nothing back; let the loop close it. */
	for (int i = 0; i < 20; i++)
		event_base_loop(loop_base(w->loop), EVLOOP_NONBLOCK);
	assert_int_equal(s.ended, 0);
}

struct changes {
	int adds, updates, deletes;
};

static void inf_add(void *arg, json_t *obj)
{
	((struct changes *)arg)->adds++;
}

static void inf_update(void *arg, json_t *old, json_t *obj)
{
	((struct changes *)arg)->updates++;
}

static void inf_delete(void *arg, json_t *obj)
{
	((struct changes *)arg)->deletes++;
}

static void test_informer(void **state)
{
	struct world *w = *state;
	struct changes ch = {0};
	struct informer_handlers h = {inf_add, inf_update, inf_delete, &ch};
	struct informer *inf = informer_new(w->loop, w->client, "/api/v1/namespaces", NULL, &h);
	json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
			       "metadata", "name", "team-a");
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "x", "y");
	struct result r;
	int want;

	informer_start(inf);
	want = 4;
	while (ch.adds < want)
		event_base_loop(loop_base(w->loop), EVLOOP_ONCE);
	assert_true(informer_synced(inf));
	assert_non_null(informer_get(inf, "kube-system"));
	call(w, "POST", "/api/v1/namespaces", ns, &r);
	json_decref(r.body);
	while (ch.adds < 5)
		event_base_loop(loop_base(w->loop), EVLOOP_ONCE);
	memset(&r, 0, sizeof(r));
	rest_do_ct(w->client, "PATCH", "/api/v1/namespaces/team-a",
		   "application/merge-patch+json", patch, on_result, &r);
	spin_until(w, &r.done);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	while (ch.updates < 1)
		event_base_loop(loop_base(w->loop), EVLOOP_ONCE);
	assert_string_equal(jx_str(informer_get(inf, "team-a"), "metadata.labels.x"), "y");
	call(w, "DELETE", "/api/v1/namespaces/team-a", NULL, &r);
	json_decref(r.body);
	while (ch.deletes < 1)
		event_base_loop(loop_base(w->loop), EVLOOP_ONCE);
	assert_null(informer_get(inf, "team-a"));
	informer_free(inf);
	json_decref(ns);
	json_decref(patch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watch_and_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_watch_from_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_informer, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
