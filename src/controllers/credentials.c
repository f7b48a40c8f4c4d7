/*
 * Each controller's own identity (--use-service-account-credentials), as
 * upstream's DynamicControllerClientBuilder gives it: a service account in
 * kube-system named after the controller (created by the manager, as
 * itself, when missing), and a REST client that carries a token from the
 * TokenRequest API — 3600 s asked, renewed when 20 % of its life is left
 * (a lifetime under 10 minutes is taken as 10, as upstream's clock-skew
 * guard), fetched anew after a 401. Requests made before the first token
 * wait for it (rest_hold); a failed fetch is retried after 0.5, 1, 2, 4 s
 * and then every 4 s with upstream's "get token failed" warning, and each
 * fourth failure fails the requests waiting ("failed to get token for
 * kube-system/<name>: timed out waiting for the condition"), as upstream's
 * four tries per request do.
 *
 * Without the flag every controller is the manager itself (m->rest), as
 * upstream: then the manager needs more than system:kube-controller-manager
 * grants.
 */
#include "controllers/internal.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SA_NS "kube-system"
#define EXPIRATION_S 3600
#define LEEWAY_PERCENT 20
#define MIN_LIFETIME_NS (10 * 60 * NS_PER_SEC)
#define BACKOFF_NS (500 * NS_PER_MS)
#define BACKOFF_STEPS 4

struct sa_client {
	struct controller_manager *m;
	char *name;
	struct rest_client *rest;
	struct timer *timer;
	struct rest_call *call; /* the get, create or token request in flight */
	int failures;
	bool has_token;
};

static void fetch(void *arg);

static const char *sa_path(char *buf, size_t n, const char *name, const char *sub)
{
	snprintf(buf, n, "/api/v1/namespaces/" SA_NS "/serviceaccounts%s%s%s%s", name ? "/" : "",
	         name ? name : "", sub ? "/" : "", sub ? sub : "");
	return buf;
}

static void retry(struct sa_client *sc, const char *what, int status, const json_t *body,
                  const char *err)
{
	char msg[512];
	int64_t wait =
	    BACKOFF_NS << (sc->failures < BACKOFF_STEPS - 1 ? sc->failures : BACKOFF_STEPS - 1);

	sc->call = NULL;
	sc->failures++;
	api_error(msg, sizeof(msg), status, body, err);
	LOG_WARN("%s failed: %s", what, msg);
	if (sc->failures % BACKOFF_STEPS == 0) {
		/* Upstream's token source gives up after four tries and the
		 * request fails with this; the next one tries again. */
		char why[600];
		snprintf(why, sizeof(why),
		         "failed to get token for " SA_NS
		         "/%s: timed out waiting for the condition",
		         sc->name);
		rest_fail_held(sc->rest, why);
	}
	timer_after(sc->timer, wait);
}

static void on_token(void *arg, int status, json_t *body, const char *err)
{
	struct sa_client *sc = arg;
	const char *token = jx_str(body, "status.token");
	const char *exp = jx_str(body, "status.expirationTimestamp");
	int64_t expires, lifetime, now = clock_now();

	if (status != 201 || !token || !exp || time_parse_rfc3339(exp, &expires) < 0) {
		retry(sc, "get token", status, body, err);
		return;
	}
	sc->call = NULL;
	sc->failures = 0;
	lifetime = expires - now;
	if (lifetime < MIN_LIFETIME_NS)
		lifetime = MIN_LIFETIME_NS; /* possible clock skew: upstream's floor */
	rest_set_token(sc->rest, token);
	if (!sc->has_token)
		LOG_V(2,
		      "\"Got a token for the controller's service account\" "
		      "serviceAccount=\"" SA_NS "/%s\"",
		      sc->name);
	sc->has_token = true;
	rest_hold(sc->rest, false);
	timer_after(sc->timer, lifetime - lifetime * LEEWAY_PERCENT / 100);
}

static void request_token(struct sa_client *sc)
{
	char path[256];
	json_t *req = json_pack("{s:s,s:s,s:{s:i}}", "apiVersion", "authentication.k8s.io/v1",
	                        "kind", "TokenRequest", "spec", "expirationSeconds", EXPIRATION_S);
	sc->call = rest_do(sc->m->rest, "POST", sa_path(path, sizeof(path), sc->name, "token"), req,
	                   on_token, sc);
	json_decref(req);
}

static void on_created(void *arg, int status, json_t *body, const char *err)
{
	struct sa_client *sc = arg;
	/* Someone else made it first: as good. */
	if (status != 201 && status != 409) {
		retry(sc, "get or create service account", status, body, err);
		return;
	}
	request_token(sc);
}

static void on_got(void *arg, int status, json_t *body, const char *err)
{
	struct sa_client *sc = arg;
	char path[256];
	json_t *sa;

	if (status == 200) {
		request_token(sc);
		return;
	}
	if (status != 404) {
		retry(sc, "get or create service account", status, body, err);
		return;
	}
	sa = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "v1", "kind", "ServiceAccount",
	               "metadata", "name", sc->name, "namespace", SA_NS);
	sc->call = rest_do(sc->m->rest, "POST", sa_path(path, sizeof(path), NULL, NULL), sa,
	                   on_created, sc);
	json_decref(sa);
}

/* Get (or create) the service account, then a token for it. */
static void fetch(void *arg)
{
	struct sa_client *sc = arg;
	char path[256];
	if (sc->call)
		return;
	sc->call = rest_do(sc->m->rest, "GET", sa_path(path, sizeof(path), sc->name, NULL), NULL,
	                   on_got, sc);
}

/* A 401 with the token: it was revoked (service account recreated, key
 * rotated). Upstream's resettable token source fetches a new one for the
 * next request; so do we, holding requests until it comes. */
static void on_unauthorized(void *arg)
{
	struct sa_client *sc = arg;
	if (sc->call)
		return;
	LOG_V(2, "\"Token rejected, getting a new one\" serviceAccount=\"" SA_NS "/%s\"", sc->name);
	rest_hold(sc->rest, true);
	timer_after(sc->timer, 0);
}

struct rest_client *cm_client(struct controller_manager *m, const char *sa_name)
{
	struct sa_client *sc;
	char ua[256];

	if (!m->use_sa_credentials)
		return m->rest;
	if ((sc = hmap_get(&m->sa_clients, sa_name)))
		return sc->rest;
	if (!(sc = calloc(1, sizeof(*sc))) || !(sc->name = strdup(sa_name)))
		abort();
	sc->m = m;
	snprintf(ua, sizeof(ua), "%s/system:serviceaccount:" SA_NS ":%s", CM_USER_AGENT, sa_name);
	if (!(sc->rest = rest_client_derive(m->rest, ua)))
		abort(); /* m->rest was made from the same server and CA */
	rest_hold(sc->rest, true);
	rest_on_unauthorized(sc->rest, on_unauthorized, sc);
	sc->timer = loop_timer(m->loop, fetch, sc);
	hmap_put(&m->sa_clients, sa_name, sc);
	timer_after(sc->timer, 0);
	return sc->rest;
}

/* With m->rest already gone: no callback of ours runs again. */
void cm_clients_free(struct controller_manager *m)
{
	const char *k;
	void *v;
	for (size_t it = 0; hmap_next(&m->sa_clients, &it, &k, &v);) {
		struct sa_client *sc = v;
		timer_free(sc->timer);
		rest_client_free(sc->rest);
		free(sc->name);
		free(sc);
	}
	hmap_free(&m->sa_clients);
}
