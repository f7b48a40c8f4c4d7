#include "cube/cluster.h"

#include "apiserver/apiserver.h"
#include "controllers/controllers.h"
#include "scheduler/scheduler.h"
#include "kubelet/kubelet.h"
#include "pki/cluster.h"
#include "pki/kubeconfig.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "base/loop.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One component on its own thread and loop. */
struct component {
	const char *name;
	pthread_t th;
	struct loop *loop;
	int (*start)(struct component *c);
	void (*stop)(struct component *c);
	void *state;
	struct cluster *cl;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready;
	int rc;
	char err[1024];
	struct log_scope log; /* <dir>/logs/<name>.log: this thread's lines */
};

struct cluster {
	struct cluster_opts o;
	char server[64];
	struct component api, cm, sched, kubelets;
	int port;
	char *controllers; /* the controller manager's --controllers now (NULL: "*") */
};

static char *path_in(struct cluster *cl, const char *rel);

static void *component_main(void *arg)
{
	struct component *c = arg;
	char *dir = path_in(c->cl, "logs"), *file;
	int rc;

	/* Everything this component's thread logs also goes to its own file
	 * (`cube logs <component>`); a kubelet's lines to its node's. */
	if (asprintf(&file, "%s/%s.log", dir, c->name) < 0)
		abort();
	c->log.fd = -1;
	if (file_mkdirs(dir, 0700) == 0 && log_scope_open(&c->log, file) == 0)
		log_scope_enter(&c->log);
	free(file);
	free(dir);
	c->loop = loop_new();
	rc = c->start(c);
	pthread_mutex_lock(&c->mu);
	c->rc = rc;
	if (rc < 0)
		snprintf(c->err, sizeof(c->err), "%s: %s", c->name, err_msg());
	c->ready = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (rc == 0)
		loop_run(c->loop);
	if (c->stop)
		c->stop(c);
	loop_free(c->loop);
	log_scope_enter(NULL);
	log_scope_close(&c->log);
	return NULL;
}

static int component_run(struct component *c, struct cluster *cl)
{
	c->cl = cl;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	pthread_create(&c->th, NULL, component_main, c);
	pthread_mutex_lock(&c->mu);
	while (!c->ready)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	if (c->rc < 0) {
		pthread_join(c->th, NULL);
		c->th = 0;
		return err_set(c->rc, "%s", c->err);
	}
	return 0;
}

static void stop_now(void *arg)
{
	loop_stop(arg);
}

static void component_halt(struct component *c)
{
	if (!c->th)
		return;
	/* Deferred, so a stop that races the start of loop_run is not lost. */
	loop_defer(c->loop, stop_now, c->loop);
	pthread_join(c->th, NULL);
	c->th = 0;
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

/* ---- the components --------------------------------------------------------- */

static char *path_in(struct cluster *cl, const char *rel)
{
	return file_join(cl->o.dir, rel);
}

static int api_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct apiserver_opts o;
	char *crt = path_in(cl, "pki/apiserver.crt"), *key = path_in(cl, "pki/apiserver.key");
	char *ca = path_in(cl, "pki/ca.crt"), *data = path_in(cl, "data");
	char *token = path_in(cl, "pki/bootstrap-token");
	char *sa_key = path_in(cl, "pki/sa.key"), *sa_pub = path_in(cl, "pki/sa.pub");
	char *kcrt = path_in(cl, "pki/apiserver-kubelet-client.crt");
	char *kkey = path_in(cl, "pki/apiserver-kubelet-client.key");

	apiserver_opts_default(&o);
	o.bind_address = cl->o.bind_address;
	o.secure_port = cl->o.port;
	o.tls_cert_file = crt;
	o.tls_private_key_file = key;
	o.client_ca_file = ca;
	o.data_dir = data;
	o.bootstrap_token_file = token;
	o.service_account_signing_key_file = sa_key;
	o.service_account_key_file = sa_pub;
	o.kubelet_client_certificate = kcrt;
	o.kubelet_client_key = kkey;
	/* The hollow nodes' Hostname resolves nowhere: their InternalIP first
	 * (metrics-server's usual setting). */
	o.kubelet_preferred_address_types = "InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP";
	if (cl->o.toleration_set[0])
		o.not_ready_toleration_s = cl->o.toleration_s[0];
	if (cl->o.toleration_set[1])
		o.unreachable_toleration_s = cl->o.toleration_s[1];
	c->state = apiserver_new(c->loop, &o);
	if (c->state)
		cl->port = apiserver_port(c->state);
	free(crt);
	free(key);
	free(ca);
	free(data);
	free(token);
	free(sa_key);
	free(sa_pub);
	free(kcrt);
	free(kkey);
	return c->state ? 0 : ERR_UNAVAILABLE;
}

static void api_stop(struct component *c)
{
	apiserver_free(c->state);
}

static int cm_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct controller_manager_opts o;
	char *kc = path_in(cl, "controller-manager.conf"), *crt = path_in(cl, "pki/ca.crt");
	char *key = path_in(cl, "pki/ca.key");

	controller_manager_opts_default(&o);
	o.serving.port = 0; /* in one process: no component ports */
	o.kubeconfig = kc;
	o.server = cl->server;
	o.cluster_signing_cert_file = crt;
	o.cluster_signing_key_file = key;
	if (cl->o.cert_ttl_ns > 0)
		o.cluster_signing_duration_ns = cl->o.cert_ttl_ns;
	o.approve_kubelet_serving = cl->o.approve_kubelet_serving;
	o.use_service_account_credentials = true; /* as kubeadm's manifest */
	if (cl->controllers)
		o.controllers = cl->controllers;
	if (cl->o.node_monitor_period_ns > 0)
		o.nlc.node_monitor_period_ns = cl->o.node_monitor_period_ns;
	if (cl->o.node_monitor_grace_period_ns > 0)
		o.nlc.node_monitor_grace_period_ns = cl->o.node_monitor_grace_period_ns;
	c->state = controller_manager_new(c->loop, &o);
	free(kc);
	free(crt);
	free(key);
	return c->state ? 0 : ERR_UNAVAILABLE;
}

static void cm_stop(struct component *c)
{
	controller_manager_free(c->state);
}

static int sched_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct scheduler_opts o;
	char *kc = path_in(cl, "scheduler.conf");

	scheduler_opts_default(&o);
	o.serving.port = 0;
	o.kubeconfig = kc;
	o.server = cl->server;
	if (cl->o.pod_initial_backoff_ns > 0)
		o.pod_initial_backoff_ns = cl->o.pod_initial_backoff_ns;
	if (cl->o.pod_max_backoff_ns > 0)
		o.pod_max_backoff_ns = cl->o.pod_max_backoff_ns;
	if (o.pod_max_backoff_ns < o.pod_initial_backoff_ns)
		o.pod_max_backoff_ns = o.pod_initial_backoff_ns;
	c->state = scheduler_new(c->loop, &o);
	free(kc);
	return c->state ? 0 : ERR_UNAVAILABLE;
}

static void sched_stop(struct component *c)
{
	scheduler_free(c->state);
}

static int kubelets_start(struct component *c)
{
	struct cluster *cl = c->cl;
	struct kubelet_config t;
	char *root = path_in(cl, "nodes"), *boot = path_in(cl, "bootstrap-kubelet.conf");
	char *ca = path_in(cl, "pki/ca.crt");
	int rc;

	kubelet_config_init(&t);
	kubelet_config_set(&t.root_dir, root);
	kubelet_config_set(&t.bootstrap_kubeconfig, boot);
	t.rotate_certificates = true;
	t.server_tls_bootstrap = cl->o.server_tls_bootstrap;
	t.self_heal = cl->o.self_heal;
	t.certificate_condition = cl->o.certificate_condition;
	/* Each node serves its HTTPS API on a port of its own on loopback,
	 * reported in status.daemonEndpoints: the API server's nodes/proxy
	 * and pods/log reach it there. */
	t.port = -1;
	kubelet_config_set(&t.address, "127.0.0.1");
	kubelet_config_set(&t.client_ca_file, ca);
	if (cl->o.status_update_ns > 0) {
		t.node_status_update_frequency_ns = cl->o.status_update_ns;
		t.update_frequency_set = true;
	}
	if (cl->o.lease_duration_s > 0)
		t.node_lease_duration_s = (int)cl->o.lease_duration_s;
	if (cl->o.pod_start_delay_ns > 0)
		t.pod_start_delay_ns = cl->o.pod_start_delay_ns;
	if (cl->o.exit_after_ns > 0)
		t.exit_after_ns = cl->o.exit_after_ns;
	c->state = kubelet_pool_new(c->loop, &t, cl->o.nodes, cl->o.node_prefix);
	rc = c->state ? kubelet_pool_start(c->state) : ERR_INVALID;
	kubelet_config_free(&t);
	free(root);
	free(boot);
	free(ca);
	return rc;
}

static void kubelets_stop(struct component *c)
{
	kubelet_pool_free(c->state);
}

/* Point a kubeconfig at the server actually bound (port 0, or a resumed
 * cluster on another port). Missing files are fine. */
static void repoint(const char *path, const char *server)
{
	struct kubeconfig kc;
	if (!file_exists(path) || kubeconfig_load(path, &kc) < 0)
		return;
	if (!kc.server || strcmp(kc.server, server)) {
		free(kc.server);
		kc.server = strdup(server);
		/* Keep file references as files: the kubelet's points at its store. */
		if (kc.cert_file) {
			free(kc.cert_data);
			kc.cert_data = NULL;
		}
		if (kc.key_file) {
			free(kc.key_data);
			kc.key_data = NULL;
		}
		if (kc.ca_file) {
			free(kc.ca_data);
			kc.ca_data = NULL;
		}
		if (kubeconfig_save(path, &kc) < 0)
			LOG_ERROR("rewrite %s: %s", path, err_msg());
	}
	kubeconfig_free(&kc);
}

static void repoint_all(struct cluster *cl)
{
	static const char *const confs[] = {"admin.conf", "controller-manager.conf",
					    "scheduler.conf", "bootstrap-kubelet.conf"};
	char *nodes = path_in(cl, "nodes");
	DIR *d;
	struct dirent *e;

	for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
		char *p = path_in(cl, confs[i]);
		repoint(p, cl->server);
		free(p);
	}
	if ((d = opendir(nodes))) {
		while ((e = readdir(d))) {
			char rel[512], *p;
			if (e->d_name[0] == '.')
				continue;
			snprintf(rel, sizeof(rel), "nodes/%s/kubelet.conf", e->d_name);
			p = path_in(cl, rel);
			repoint(p, cl->server);
			free(p);
		}
		closedir(d);
	}
	free(nodes);
}

static void say(void *arg, const char *line)
{
	LOG_V(1, "%s", line);
}

struct cluster *cluster_start(const struct cluster_opts *o)
{
	struct cluster *cl = calloc(1, sizeof(*cl));
	struct cluster_pki_opts po = {
		.dir = o->dir,
		.cluster_name = "kubernetes",
		.server = "https://127.0.0.1:6443",
		.key_type = PKI_KEY_ECDSA,
		.ca_validity_ns = CLUSTER_CA_VALIDITY,
		.validity_ns = CLUSTER_CERT_VALIDITY,
		.say = say,
	};

	if (!cl)
		abort();
	cl->o = *o;
	cl->controllers = o->controllers ? strdup(o->controllers) : NULL;
	cl->api = (struct component){.name = "apiserver", .start = api_start, .stop = api_stop};
	cl->cm = (struct component){.name = "controller-manager", .start = cm_start,
				    .stop = cm_stop};
	cl->sched = (struct component){.name = "scheduler", .start = sched_start,
				       .stop = sched_stop};
	cl->kubelets = (struct component){.name = "kubelet", .start = kubelets_start,
					  .stop = kubelets_stop};
	/* The kubeconfigs name the server; keep the one they name if we do not
	 * know the port yet, so a rerun does not regenerate them for nothing. */
	char want[64], *admin = path_in(cl, "admin.conf");
	struct kubeconfig have;
	if (o->port > 0) {
		snprintf(want, sizeof(want), "https://127.0.0.1:%d", o->port);
	} else if (file_exists(admin) && kubeconfig_load(admin, &have) == 0) {
		snprintf(want, sizeof(want), "%s", have.server ? have.server : po.server);
		kubeconfig_free(&have);
	} else {
		snprintf(want, sizeof(want), "%s", po.server);
	}
	free(admin);
	po.server = want;
	if (file_mkdirs(o->dir, 0700) < 0 || cluster_pki_init(&po) < 0)
		goto fail;
	if (component_run(&cl->api, cl) < 0)
		goto fail;
	snprintf(cl->server, sizeof(cl->server), "https://127.0.0.1:%d", cl->port);
	repoint_all(cl);
	if (component_run(&cl->cm, cl) < 0 || component_run(&cl->sched, cl) < 0)
		goto fail;
	if (o->nodes > 0 && component_run(&cl->kubelets, cl) < 0)
		goto fail;
	return cl;
fail:
	cluster_stop(cl);
	return NULL;
}

long cluster_fds_per_node(void)
{
	/* kubelets_start: every node serves (port -1); the API server is here. */
	return kubelet_pool_fds_per_node(true, true);
}

int cluster_port(const struct cluster *c)
{
	return c->port;
}

void cluster_stop(struct cluster *c)
{
	if (!c)
		return;
	component_halt(&c->kubelets);
	component_halt(&c->sched);
	component_halt(&c->cm);
	component_halt(&c->api);
	free(c->controllers);
	free(c);
}

/* ---- the supervisor: what cube fault and cube restart ask for ---------------- */

/* Stop a component and start it again with what cl says now. */
static int component_restart(struct component *c)
{
	struct cluster *cl = c->cl;

	component_halt(c);
	c->ready = false;
	c->rc = 0;
	c->state = NULL;
	return component_run(c, cl);
}

/* A call run on a component's own thread, the caller waiting for it. */
struct on_thread {
	struct component *c;
	json_t *(*fn)(struct component *c, const json_t *words);
	const json_t *words;
	json_t *reply;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void on_thread_run(void *arg)
{
	struct on_thread *t = arg;
	json_t *r = t->fn(t->c, t->words);

	pthread_mutex_lock(&t->mu);
	t->reply = r;
	t->done = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static json_t *run_on_thread(struct component *c,
			     json_t *(*fn)(struct component *c, const json_t *words),
			     const json_t *words)
{
	struct on_thread t = {.c = c, .fn = fn, .words = words};

	pthread_mutex_init(&t.mu, NULL);
	pthread_cond_init(&t.cv, NULL);
	loop_defer(c->loop, on_thread_run, &t);
	pthread_mutex_lock(&t.mu);
	while (!t.done)
		pthread_cond_wait(&t.cv, &t.mu);
	pthread_mutex_unlock(&t.mu);
	pthread_mutex_destroy(&t.mu);
	pthread_cond_destroy(&t.cv);
	return t.reply;
}

static json_t *fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s}", "error", msg);
}

static const char *word(const json_t *words, size_t i)
{
	return json_string_value(json_array_get(words, i));
}

/* On the kubelets' thread: ["kubelet", op, NODE], ["partition"|"heal", NODE],
 * ["clock-skew", NODE, NS], ["nodes"]. */
static json_t *kubelet_command(struct component *c, const json_t *words)
{
	static const struct {
		const char *verb, *op;
		enum kubelet_pool_op code;
	} ops[] = {
	    {"kubelet", "stop", KUBELET_POOL_STOP},
	    {"kubelet", "start", KUBELET_POOL_START},
	    {"kubelet", "restart", KUBELET_POOL_RESTART},
	    {"partition", NULL, KUBELET_POOL_PARTITION},
	    {"heal", NULL, KUBELET_POOL_HEAL},
	    {"clock-skew", NULL, KUBELET_POOL_CLOCK_SKEW},
	};
	const char *verb = word(words, 0);
	size_t at = !strcmp(verb, "kubelet") ? 2 : 1;
	const char *node = word(words, at), *arg = word(words, at + 1);

	if (!strcmp(verb, "nodes"))
		return json_pack("{s:o}", "nodes", kubelet_pool_status(c->state));
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		int64_t n = 0;
		if (strcmp(ops[i].verb, verb) || (ops[i].op && strcmp(ops[i].op, word(words, 1) ?: "")))
			continue;
		if (!node)
			return fail("%s: which node?", verb);
		if (ops[i].code == KUBELET_POOL_CLOCK_SKEW) {
			char *end;
			n = arg ? strtoll(arg, &end, 10) : 0;
			if (!arg || !*arg || *end)
				return fail("clock-skew: the skew in ns, not \"%s\"", arg ?: "");
		}
		if (kubelet_pool_control(c->state, node, ops[i].code, n) < 0)
			return fail("%s", err_msg());
		return json_pack("{s:b}", "ok", true);
	}
	return fail("kubelet: stop, start or restart, not \"%s\"", word(words, 1) ?: "");
}

static json_t *status(struct cluster *cl)
{
	json_t *r = json_pack("{s:i, s:s}", "port", cl->port, "controllers",
			      cl->controllers ? cl->controllers : "*");
	if (cl->kubelets.th) {
		json_t *words = json_pack("[s]", "nodes"), *nodes =
		    run_on_thread(&cl->kubelets, kubelet_command, words);
		json_object_set(r, "nodes", json_object_get(nodes, "nodes"));
		json_decref(nodes);
		json_decref(words);
	}
	return r;
}

/* ["controller-manager", "restart", CONTROLLERS?]: CONTROLLERS replaces
 * --controllers (what editing its manifest does); "" is the default. */
static json_t *restart_cm(struct cluster *cl, const char *controllers)
{
	if (controllers) {
		if (*controllers && controller_manager_check_controllers(controllers) < 0)
			return fail("%s", err_msg());
		free(cl->controllers);
		cl->controllers = *controllers ? strdup(controllers) : NULL;
	}
	LOG_INFO("\"Restarting the controller manager\" controllers=\"%s\"",
		 cl->controllers ? cl->controllers : "*");
	if (component_restart(&cl->cm) < 0)
		return fail("%s", err_msg());
	return json_pack("{s:b, s:s}", "ok", true, "controllers",
			 cl->controllers ? cl->controllers : "*");
}

json_t *cluster_control(struct cluster *cl, const json_t *words)
{
	const char *verb = word(words, 0);

	if (!strcmp(verb, "ping"))
		return json_pack("{s:b}", "ok", true);
	if (!strcmp(verb, "status"))
		return status(cl);
	if (!strcmp(verb, "controller-manager") && !strcmp(word(words, 1) ?: "", "restart"))
		return restart_cm(cl, word(words, 2));
	if (!strcmp(verb, "scheduler") && !strcmp(word(words, 1) ?: "", "restart"))
		return component_restart(&cl->sched) < 0 ? fail("%s", err_msg())
							 : json_pack("{s:b}", "ok", true);
	if (!strcmp(verb, "kubelet") || !strcmp(verb, "partition") || !strcmp(verb, "heal") ||
	    !strcmp(verb, "clock-skew")) {
		if (!cl->kubelets.th)
			return fail("this cluster runs no kubelets");
		return run_on_thread(&cl->kubelets, kubelet_command, words);
	}
	return fail("unknown command \"%s\"", verb);
}
