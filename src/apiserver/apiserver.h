/*
 * apiserver — the hub every other component talks through: the Kubernetes
 * API over HTTPS with mutual TLS, served from the in-memory cache in front
 * of the durable store, with discovery, server-side Tables, watch, the three
 * patch types, Status errors, x509 and bootstrap-token authentication, the
 * Node authorizer, and NodeRestriction / DefaultTolerationSeconds /
 * NamespaceLifecycle admission.
 *
 * Ownership: the server is the caller's; apiserver_free stops it gracefully
 * (ends watches, waits for queued writes). Threads: the loop's thread.
 */
#ifndef CUBE_APISERVER_APISERVER_H
#define CUBE_APISERVER_APISERVER_H

#include "storage/store.h"

#include "base/loop.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct apiserver_opts {
	const char *bind_address;  /* --bind-address, default 0.0.0.0 */
	int secure_port;           /* --secure-port, default 6443; 0 picks one */
	const char *tls_cert_file; /* --tls-cert-file */
	const char *tls_private_key_file;
	const char *client_ca_file; /* --client-ca-file */
	const char *data_dir;       /* --data-dir: holds state.db */
	enum store_sync sync;       /* --storage-sync normal|full */
	bool enable_bootstrap_token_auth;
	bool anonymous_auth;
	int64_t not_ready_toleration_s;   /* --default-not-ready-toleration-seconds */
	int64_t unreachable_toleration_s; /* --default-unreachable-toleration-seconds */
	size_t max_body;                  /* --max-request-body-bytes, default 3 MiB */
	size_t watch_window;              /* events kept for watch resume */
	const char *bootstrap_token_file; /* seed Secret bootstrap-token-<id> from it */
	/* Service account tokens: the key TokenRequest signs with (sa.key), the
	 * one tokens are verified with (sa.pub; default: the signing key), the
	 * issuer (default APISERVER_DEFAULT_ISSUER), --api-audiences
	 * (comma-separated; default the issuer) and the longest token issued
	 * (0: no limit). */
	const char *service_account_signing_key_file;
	const char *service_account_key_file;
	const char *service_account_issuer;
	const char *api_audiences;
	int64_t service_account_max_token_expiration_s;
};

/* kubeadm's --service-account-issuer. */
#define APISERVER_DEFAULT_ISSUER "https://kubernetes.default.svc.cluster.local"


void apiserver_opts_default(struct apiserver_opts *o);

struct apiserver;

struct apiserver *apiserver_new(struct loop *loop, const struct apiserver_opts *o);
int apiserver_port(const struct apiserver *s);
/* Writes on their way to disk (their requests not yet answered). */
size_t apiserver_writes_inflight(const struct apiserver *s);
void apiserver_free(struct apiserver *s);

#endif
