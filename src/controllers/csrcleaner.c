/*
 * csrcleaner — upstream's CSR garbage collector. Every pollingInterval
 * (1 h upstream) it looks at every CSR in the informer's cache and deletes,
 * through the API server, one that is
 *   approved and issued, the Approved condition updated more than 1 h ago;
 *   denied, the Denied condition updated more than 1 h ago;
 *   failed, the Failed condition updated more than 1 h ago;
 *   pending (no conditions at all) and created more than 24 h ago;
 *   approved and issued with a certificate whose NotAfter has passed.
 * Ages are read from the process clock, so a shifted clock ages CSRs.
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

#define APPROVED_EXPIRATION NS_PER_HOUR
#define DENIED_EXPIRATION NS_PER_HOUR
#define PENDING_EXPIRATION (24 * NS_PER_HOUR)

struct csrcleaner {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct timer *tick;
	struct job_list deletes; /* DELETEs in flight */
};

/* upstream's isOlderThan: a set time more than d before now. */
static bool older_than(const char *rfc3339, int64_t d)
{
	int64_t t;
	if (!rfc3339 || !*rfc3339 || time_parse_rfc3339(rfc3339, &t) < 0)
		return false;
	return t - clock_now() < -d;
}

/* A condition of this type whose lastUpdateTime is older than d. */
static bool condition_older(const json_t *csr, const char *type, int64_t d)
{
	json_t *c;
	size_t i;
	json_array_foreach(jx_get(csr, "status.conditions"), i, c)
	{
		const char *t = jx_str(c, "type");
		if (t && !strcmp(t, type) && older_than(jx_str(c, "lastUpdateTime"), d))
			return true;
	}
	return false;
}

static bool cert_expired(const json_t *csr)
{
	size_t len;
	char *pem = csr_certificate_pem(csr, &len);
	X509 *cert = pem ? pki_cert_parse(pem, len) : NULL;
	bool expired = cert && clock_now() > pki_cert_not_after(cert);
	X509_free(cert);
	free(pem);
	return expired;
}

/* Why this CSR should go (logging upstream's line), or false. */
static bool should_clean(const json_t *csr)
{
	const char *name = jx_str(csr, "metadata.name") ?: "";
	char d[DURATION_BUF];
	bool issued = csr_issued(csr);

	if (issued && condition_older(csr, "Approved", APPROVED_EXPIRATION)) {
		LOG_INFO("\"Cleaning CSR as it is more than approvedExpiration duration old and "
			 "approved.\" csr=\"%s\" approvedExpiration=\"%s\"",
			 name, duration_format(APPROVED_EXPIRATION, d));
		return true;
	}
	if (condition_older(csr, "Denied", DENIED_EXPIRATION)) {
		LOG_INFO("\"Cleaning CSR as it is more than deniedExpiration duration old and "
			 "denied.\" csr=\"%s\" deniedExpiration=\"%s\"",
			 name, duration_format(DENIED_EXPIRATION, d));
		return true;
	}
	if (condition_older(csr, "Failed", DENIED_EXPIRATION)) {
		LOG_INFO("\"Cleaning CSR as it is more than deniedExpiration duration old and "
			 "failed.\" csr=\"%s\" deniedExpiration=\"%s\"",
			 name, duration_format(DENIED_EXPIRATION, d));
		return true;
	}
	if (json_array_size(jx_get(csr, "status.conditions")) == 0 &&
	    older_than(jx_str(csr, "metadata.creationTimestamp"), PENDING_EXPIRATION)) {
		LOG_INFO("\"Cleaning CSR as it is more than pendingExpiration duration old and "
			 "unhandled.\" csr=\"%s\" pendingExpiration=\"%s\"",
			 name, duration_format(PENDING_EXPIRATION, d));
		return true;
	}
	if (issued && csr_has_condition(csr, "Approved") && cert_expired(csr)) {
		LOG_INFO("\"Cleaning CSR as the associated certificate is expired.\" csr=\"%s\"",
			 name);
		return true;
	}
	return false;
}

static void on_deleted(void *arg, int status, json_t *body, const char *err)
{
	struct job *j = arg;
	struct csrcleaner *c = j->ctl;
	char why[900], msg[1100], q[1200];

	if (status != 200 && status != 202) {
		snprintf(msg, sizeof(msg), "unable to delete CSR \"%s\": %s", j->key,
			 api_error(why, sizeof(why), status, body, err));
		log_quote(q, sizeof(q), msg);
		LOG_ERROR("\"Error while attempting to clean CSR\" err=\"%s\" csr=\"%s\"", q, j->key);
	}
	job_done(&c->deletes, j, false);
}

static bool deleting(const struct csrcleaner *c, const char *name)
{
	for (const struct job *j = c->deletes.head; j; j = j->next)
		if (!strcmp(j->key, name))
			return true;
	return false;
}

static void on_tick(void *arg)
{
	struct csrcleaner *c = arg;
	json_t **all;
	size_t n;

	if (!informer_synced(c->m->csrs)) {
		timer_after(c->tick, 100 * NS_PER_MS);
		return;
	}
	n = informer_list(c->m->csrs, &all);
	for (size_t i = 0; i < n; i++) {
		const char *name = jx_str(all[i], "metadata.name");
		char path[512];
		if (!name || deleting(c, name) || !should_clean(all[i]))
			continue;
		rest_do(c->rest, "DELETE", csr_path(path, sizeof(path), name, NULL), NULL,
			on_deleted, job_new(&c->deletes, NULL, name, c));
	}
	free(all);
	timer_after(c->tick, c->m->cleaner_period_ns);
}

struct csrcleaner *csrcleaner_new(struct controller_manager *m)
{
	struct csrcleaner *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->rest = cm_client(m, "certificate-controller");
	c->m = m;
	c->tick = loop_timer(m->loop, on_tick, c);
	LOG_INFO("\"Starting CSR cleaner controller\"");
	/* wait.Until runs the first pass at once (here: once the cache has listed). */
	timer_after(c->tick, 0);
	return c;
}

void csrcleaner_free(struct csrcleaner *c)
{
	if (!c)
		return;
	LOG_INFO("\"Shutting down CSR cleaner controller\"");
	timer_free(c->tick);
	job_list_free(&c->deletes);
	free(c);
}
