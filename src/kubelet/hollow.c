/*
 * Hollow kubelets: many independent kubelets on one loop. Each has its own
 * directory (<root-dir>/<name>/, certificates in pki/, kubelet.conf), key,
 * certificates, rest client and TLS connections, Lease, status and pods;
 * they share nothing but the loop and the process.
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
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESTART_NS (10 * NS_PER_SEC)

struct slot {
	struct kubelet_pool *pool;
	struct kubelet_config cfg;
	struct kubelet *k;
	struct timer *restart;
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

static void restart(void *arg)
{
	struct slot *s = arg;

	kubelet_free(s->k);
	s->k = kubelet_new(s->pool->loop, &s->cfg);
	if (!s->k || kubelet_start(s->k) < 0) {
		LOG_ERROR("\"Hollow kubelet failed to start; retrying\" node=\"%s\" err=\"%s\"",
			  s->cfg.node_name, err_msg());
		timer_after(s->restart, RESTART_NS);
	}
}

struct kubelet_pool *kubelet_pool_new(struct loop *loop, const struct kubelet_config *tmpl, int n,
				      const char *prefix)
{
	struct kubelet_pool *p = calloc(1, sizeof(*p));

	if (!p || n < 0 || !(p->slots = calloc((size_t)(n ? n : 1), sizeof(*p->slots))))
		abort();
	p->loop = loop;
	p->n = n;
	for (int i = 0; i < n; i++) {
		struct slot *s = &p->slots[i];
		char name[256], *dir, *sub;

		snprintf(name, sizeof(name), "%s%d", prefix, i);
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
		/* One port each when asked for ports at all. */
		if (tmpl->port > 0)
			s->cfg.port = tmpl->port + i;
		s->cfg.name_in_logs = true;
		s->cfg.on_exit = pool_on_exit;
		s->cfg.on_exit_arg = s;
		s->pool = p;
		s->restart = loop_timer(loop, restart, s);
		if (!(s->k = kubelet_new(loop, &s->cfg))) {
			kubelet_pool_free(p);
			return NULL;
		}
	}
	return p;
}

int kubelet_pool_start(struct kubelet_pool *p)
{
	int rc;
	for (int i = 0; i < p->n; i++)
		if ((rc = kubelet_start(p->slots[i].k)) < 0)
			return err_wrap(rc, "%s", kubelet_name(p->slots[i].k));
	LOG_INFO("\"Started hollow kubelets\" count=%d", p->n);
	return 0;
}

int kubelet_pool_size(const struct kubelet_pool *p)
{
	return p->n;
}

struct kubelet *kubelet_pool_get(const struct kubelet_pool *p, int i)
{
	return i >= 0 && i < p->n ? p->slots[i].k : NULL;
}

void kubelet_pool_free(struct kubelet_pool *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++) {
		kubelet_free(p->slots[i].k);
		timer_free(p->slots[i].restart);
		kubelet_config_free(&p->slots[i].cfg);
	}
	free(p->slots);
	free(p);
}
