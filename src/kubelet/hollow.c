/*
 * Hollow kubelets: many independent kubelets on one loop. Each has its own
 * directory (<root-dir>/<name>/, certificates in pki/, kubelet.conf), key,
 * certificates, rest client and TLS connections, Lease, status and pods;
 * they share nothing but the loop and the process.
 *
 * Each directory also holds kubelet.log — every line this kubelet logs, as
 * journalctl -u kubelet shows one node's (its timers and REST calls carry
 * its log scope, base/log.h) — and config.yaml, the KubeletConfiguration that
 * kubelet runs with (written from the pool's settings when the pool
 * starts), as /var/lib/kubelet/config.yaml holds a kubeadm node's: the
 * runbook's `grep -i rotate .../config.yaml` reads it, and an edit takes
 * effect when that kubelet restarts after an exit, as a real one's does
 * (the pool's next start writes it afresh from its settings).
 *
 * Where one kubelet would end its process (the expired-certificate
 * watchdog), the pool logs the same line and restarts that kubelet alone
 * ten seconds later — what systemd's Restart=always with kubeadm's
 * RestartSec=10 does for a real one — so the rest keep running.
 */
#include "kubelet/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESTART_NS (10 * NS_PER_SEC)

struct slot {
	struct kubelet_pool *pool;
	struct kubelet_config cfg;
	char *config_file;    /* <root-dir>/<name>/config.yaml */
	struct log_scope log; /* <root-dir>/<name>/kubelet.log: this kubelet's lines */
	struct kubelet *k;    /* NULL while stopped */
	struct timer *restart;
	int want_port;        /* the port config.yaml asks for (-1: any) */
	int last_port;        /* the HTTPS port its last run served on */
	bool unreachable;     /* partitioned from the API server */
};

struct kubelet_pool {
	struct loop *loop;
	int n;
	struct slot *slots;
};

static void pool_on_exit(void *arg, struct kubelet *k, int status)
{
	struct slot *s = arg;
	LOG_ERROR("\"Hollow kubelet exited; restarting it\" node=\"%s\" status=%d in=\"10s\"",
		  kubelet_name(k), status);
	/* Not now: the kubelet is inside one of its own callbacks. */
	timer_after(s->restart, RESTART_NS);
}

/* A restart reads config.yaml again, as a real kubelet's start does; a
 * file that no longer loads keeps the settings it ran with. */
static void reload_config(struct slot *s)
{
	struct kubelet_config c;

	kubelet_config_copy(&c, &s->cfg);
	if (kubelet_config_load(&c, s->config_file) < 0) {
		LOG_ERROR("\"Hollow kubelet keeps its configuration\" node=\"%s\" err=\"%s\"",
			  s->cfg.node_name, err_msg());
		kubelet_config_free(&c);
		return;
	}
	kubelet_config_free(&s->cfg);
	s->cfg = c;
}

static void restart(void *arg);

/* The slot's directory, config.yaml, kubelet.log and kubelet; what it
 * makes (the restart timer, the kubelet's timers) is in its log scope. */
static int slot_open(struct slot *s)
{
	char *log = file_join(s->cfg.root_dir, "kubelet.log");
	const struct log_scope *prev;
	int rc;

	log_scope_init_path(&s->log, log);
	free(log);
	if ((rc = file_mkdirs(s->cfg.root_dir, 0700)) < 0 ||
	    (rc = kubelet_config_write(&s->cfg, s->config_file)) < 0)
		return rc;
	prev = log_scope_enter(&s->log);
	s->restart = loop_timer(s->pool->loop, restart, s);
	s->k = kubelet_new(s->pool->loop, &s->cfg);
	log_scope_enter(prev);
	return s->k ? 0 : ERR_INVALID;
}

static void slot_stop(struct slot *s)
{
	timer_cancel(s->restart);
	if (s->k && kubelet_port(s->k) > 0)
		s->last_port = kubelet_port(s->k);
	kubelet_free(s->k);
	s->k = NULL;
}

static void restart(void *arg)
{
	struct slot *s = arg;
	bool any_port;

	slot_stop(s);
	/* The configured port, kept apart from the one pinned below, so that
	 * a config.yaml that no longer loads does not pin it for good. */
	s->cfg.port = s->want_port;
	reload_config(s);
	s->want_port = s->cfg.port;
	/* "Any port" serves again on the one it had, as a node's kubelet on
	 * 10250, so the API server's proxy finds it before the next status
	 * update; a port gone meanwhile makes the retry take any. */
	any_port = s->want_port < 0;
	s->cfg.port = any_port && s->last_port > 0 ? s->last_port : s->want_port;
	s->k = kubelet_new(s->pool->loop, &s->cfg);
	if (s->k)
		kubelet_set_unreachable(s->k, s->unreachable);
	if (any_port)
		s->last_port = 0;
	if (!s->k || kubelet_start(s->k) < 0) {
		LOG_ERROR("\"Hollow kubelet failed to start; retrying\" node=\"%s\" err=\"%s\"",
			  s->cfg.node_name, err_msg());
		timer_after(s->restart, RESTART_NS);
	}
}

/*
 * Node n's own loopback address, 127.1.0.2 onwards (250 a /24, never .0,
 * .1 or the top ones): its connections to an API server on loopback start
 * there, so the server sees each node as its own peer, as it sees real
 * machines — in its logs, and for its per-peer limit on connections
 * without credentials, which ten thousand kubelets bootstrapping from
 * 127.0.0.1 would share.
 */
static void node_source_address(struct kubelet_config *c, int n)
{
	char ip[INET_ADDRSTRLEN];

	snprintf(ip, sizeof(ip), "127.%d.%d.%d", 1 + n / (250 * 256), (n / 250) % 256,
		 2 + n % 250);
	kubelet_config_set(&c->source_address, ip);
}

struct kubelet_pool *kubelet_pool_new(struct loop *loop, const struct kubelet_config *tmpl, int n,
				      const char *prefix, int first)
{
	struct kubelet_pool *p = calloc(1, sizeof(*p));

	if (!p || n < 0 || first < 0 ||
	    !(p->slots = calloc((size_t)(n ? n : 1), sizeof(*p->slots))))
		abort();
	p->loop = loop;
	p->n = n;
	timers_set_slack(loop_timers(loop), HOLLOW_TIMER_SLACK_NS);
	for (int i = 0; i < n; i++)
		p->slots[i].log.fd = -1; /* what pool_free may close */
	for (int i = 0; i < n; i++) {
		struct slot *s = &p->slots[i];
		char name[256], *dir, *sub;

		snprintf(name, sizeof(name), "%s%d", prefix, first + i);
		kubelet_config_copy(&s->cfg, tmpl);
		kubelet_config_set(&s->cfg.node_name, name);
		dir = file_join(tmpl->root_dir, name);
		kubelet_config_set(&s->cfg.root_dir, dir);
		sub = file_join(dir, "pki");
		kubelet_config_set(&s->cfg.cert_dir, sub);
		free(sub);
		sub = file_join(dir, "kubelet.conf");
		kubelet_config_set(&s->cfg.kubeconfig, sub);
		free(sub);
		free(dir);
		/* One port each when asked for ports at all, counted within the
		 * pool: a pool is one machine's port range. */
		if (tmpl->port > 0)
			s->cfg.port = tmpl->port + i;
		s->want_port = s->cfg.port;
		if (!tmpl->source_address)
			node_source_address(&s->cfg, first + i);
		s->cfg.name_in_logs = true;
		s->cfg.random_phase = true;
		s->cfg.on_exit = pool_on_exit;
		s->cfg.on_exit_arg = s;
		s->pool = p;
		s->config_file = file_join(s->cfg.root_dir, "config.yaml");
		if (slot_open(s) < 0) {
			kubelet_pool_free(p);
			return NULL;
		}
	}
	return p;
}

int kubelet_pool_start(struct kubelet_pool *p)
{
	int rc = 0;
	for (int i = 0; i < p->n && rc == 0; i++) {
		const struct log_scope *prev = log_scope_enter(&p->slots[i].log);
		if ((rc = kubelet_start(p->slots[i].k)) < 0)
			rc = err_wrap(rc, "%s", kubelet_name(p->slots[i].k));
		log_scope_enter(prev);
	}
	if (rc < 0)
		return rc;
	LOG_INFO("\"Started hollow kubelets\" count=%d", p->n);
	return 0;
}

long kubelet_pool_fds_per_node(bool serving, bool server_here)
{
	return KUBELET_HOLLOW_CONNS * (server_here ? 2 : 1) + (serving ? 1 : 0);
}

int kubelet_pool_size(const struct kubelet_pool *p)
{
	return p->n;
}

struct kubelet *kubelet_pool_get(const struct kubelet_pool *p, int i)
{
	return i >= 0 && i < p->n ? p->slots[i].k : NULL;
}

static struct slot *slot_named(const struct kubelet_pool *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (!strcmp(p->slots[i].cfg.node_name, name))
			return &p->slots[i];
	return NULL;
}

int kubelet_pool_control(struct kubelet_pool *p, const char *name, enum kubelet_pool_op op,
			 int64_t arg)
{
	struct slot *s = slot_named(p, name);
	const struct log_scope *prev;

	if (!s)
		return err_set(ERR_NOTFOUND, "no kubelet for node \"%s\" here", name);
	prev = log_scope_enter(&s->log);
	switch (op) {
	case KUBELET_POOL_STOP:
		LOG_INFO("\"Stopping kubelet\" node=\"%s\"", name);
		slot_stop(s);
		break;
	case KUBELET_POOL_START:
		if (!s->k) {
			LOG_INFO("\"Starting kubelet\" node=\"%s\"", name);
			restart(s);
		}
		break;
	case KUBELET_POOL_RESTART:
		/* systemctl restart: stop, then start with config.yaml read again. */
		LOG_INFO("\"Restarting kubelet\" node=\"%s\"", name);
		restart(s);
		break;
	case KUBELET_POOL_PARTITION:
	case KUBELET_POOL_HEAL:
		s->unreachable = op == KUBELET_POOL_PARTITION;
		LOG_INFO("\"%s\" node=\"%s\"",
			 s->unreachable ? "Network partition: the API server is unreachable"
					: "Network partition healed", name);
		if (s->k)
			kubelet_set_unreachable(s->k, s->unreachable);
		break;
	case KUBELET_POOL_CLOCK_SKEW:
		s->log.clock_skew_ns = arg;
		break;
	}
	log_scope_enter(prev);
	return 0;
}

json_t *kubelet_pool_status(const struct kubelet_pool *p)
{
	json_t *out = json_array();

	for (int i = 0; i < p->n; i++) {
		const struct slot *s = &p->slots[i];
		const struct log_scope *prev = log_scope_enter(&s->log);
		char now[TIME_BUF];

		/* What `date` on the node would say: its own clock. */
		time_format_rfc3339_micro(clock_now(), now);
		log_scope_enter(prev);
		json_array_append_new(out, json_pack("{s:s, s:b, s:b, s:I, s:s}", "name",
						     s->cfg.node_name, "active", s->k != NULL,
						     "partitioned", s->unreachable, "clockSkewSeconds",
						     (json_int_t)(s->log.clock_skew_ns / NS_PER_SEC),
						     "time", now));
	}
	return out;
}

/* ---- the operator's words (control.h requests) ------------------------------------ */


static const struct {
	const char *verb, *op; /* op: the second word, NULL when the node is */
	enum kubelet_pool_op code;
} pool_ops[] = {
	{"kubelet", "stop", KUBELET_POOL_STOP},
	{"kubelet", "start", KUBELET_POOL_START},
	{"kubelet", "restart", KUBELET_POOL_RESTART},
	{"partition", NULL, KUBELET_POOL_PARTITION},
	{"heal", NULL, KUBELET_POOL_HEAL},
	{"clock-skew", NULL, KUBELET_POOL_CLOCK_SKEW},
};

const char *kubelet_pool_command_node(const json_t *words)
{
	const char *verb = jx_array_str(words, 0);

	if (!verb || !strcmp(verb, "nodes"))
		return NULL;
	return jx_array_str(words, !strcmp(verb, "kubelet") ? 2 : 1);
}

json_t *kubelet_pool_command(struct kubelet_pool *p, const json_t *words)
{
	const char *verb = jx_array_str(words, 0) ?: "", *node = kubelet_pool_command_node(words);
	const char *arg = jx_array_str(words, 2);

	if (!strcmp(verb, "nodes"))
		return json_pack("{s:o}", "nodes", kubelet_pool_status(p));
	for (size_t i = 0; i < sizeof(pool_ops) / sizeof(pool_ops[0]); i++) {
		int64_t n = 0;
		if (strcmp(pool_ops[i].verb, verb) ||
		    (pool_ops[i].op && strcmp(pool_ops[i].op, jx_array_str(words, 1) ?: "")))
			continue;
		if (!node)
			return jx_error("%s: which node?", verb);
		if (pool_ops[i].code == KUBELET_POOL_CLOCK_SKEW) {
			char *end;
			n = arg ? strtoll(arg, &end, 10) : 0;
			if (!arg || !*arg || *end)
				return jx_error("clock-skew: the skew in ns, not \"%s\"", arg ?: "");
		}
		if (kubelet_pool_control(p, node, pool_ops[i].code, n) < 0)
			return jx_error("%s", err_msg());
		return json_pack("{s:b}", "ok", true);
	}
	if (!strcmp(verb, "kubelet"))
		return jx_error("kubelet: stop, start or restart, not \"%s\"", jx_array_str(words, 1) ?: "");
	return jx_error("unknown command \"%s\"", verb);
}

void kubelet_pool_free(struct kubelet_pool *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++) {
		const struct log_scope *prev = log_scope_enter(&p->slots[i].log);
		kubelet_free(p->slots[i].k);
		timer_free(p->slots[i].restart);
		log_scope_enter(prev);
		log_scope_close(&p->slots[i].log);
		kubelet_config_free(&p->slots[i].cfg);
		free(p->slots[i].config_file);
	}
	free(p->slots);
	free(p);
}
