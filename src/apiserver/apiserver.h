/*
 * apiserver — the hub every other component talks through: the Kubernetes
 * API over HTTPS with mutual TLS, served from the in-memory cache in front
 * of the durable store, with discovery, server-side Tables, watch, the three
 * patch types, Status errors, x509 and bootstrap-token authentication, the
 * Node authorizer, and NodeRestriction / DefaultTolerationSeconds /
 * NamespaceLifecycle admission.
 *
 * Requests also come in process (apiserver_exchange): the same routing,
 * authentication, admission and storage as HTTPS, with no socket — what the
 * unit tests of src/apiserver drive.
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
	int secure_port; /* --secure-port, default 6443; 0 picks one; -1: no listener */
	const char *tls_cert_file; /* --tls-cert-file */
	const char *tls_private_key_file;
	const char *client_ca_file; /* --client-ca-file */
	const char *data_dir;       /* --data-dir: holds state.db */
	enum store_sync sync;       /* --storage-sync normal|full */
	bool etcd;                  /* --storage-backend etcd3 (default sqlite) */
	struct store_etcd_opts etcd_opts; /* --etcd-servers, --etcd-prefix, ... */
	struct store *store; /* made by the caller (tests): used instead of either,
	                      * and owned by the server from apiserver_new on */
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
	/* The way to the kubelets (nodes/proxy, pods/log): the client pair
	 * (kubeadm's apiserver-kubelet-client), the CA their serving
	 * certificates are verified with (NULL: not verified, as upstream),
	 * and the order of node address types (default Hostname,InternalDNS,
	 * InternalIP,ExternalDNS,ExternalIP). */
	const char *kubelet_client_certificate;
	const char *kubelet_client_key;
	const char *kubelet_certificate_authority;
	const char *kubelet_preferred_address_types;
	/* --serving-threads: threads that serve the secure port's connections
	 * (TLS, HTTP/1.1, HTTP/2), the requests staying on the server's loop;
	 * 0: that loop serves them too; -1: one per CPU but the loop's, from
	 * 4 CPUs on (0 below). Never on the virtual clock. */
	int serving_threads;
};

/* kubeadm's --service-account-issuer. */
#define APISERVER_DEFAULT_ISSUER "https://kubernetes.default.svc.cluster.local"


void apiserver_opts_default(struct apiserver_opts *o);

struct apiserver;

struct apiserver *apiserver_new(struct loop *loop, const struct apiserver_opts *o);
int apiserver_port(const struct apiserver *s); /* -1 without a listener */
/* Writes on their way to disk (their requests not yet answered). */
size_t apiserver_writes_inflight(const struct apiserver *s);
void apiserver_free(struct apiserver *s);

/* ---- in-process requests -------------------------------------------------- */

struct apiserver_request {
	const char *method;         /* "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE" */
	const char *target;         /* path and query, as on a request line */
	const char *const *headers; /* name, value, name, value, ..., NULL; or NULL */
	const char *body;           /* NULL: none */
	size_t body_len;            /* 0: strlen(body) */
	/* Who asks, as a verified client certificate would say it: CN and
	 * the O's (NULL-terminated). user NULL: no certificate — a bearer
	 * token in headers, or anonymous. */
	const char *user;
	const char *const *groups;
};

/* One request and its answer, in memory. */
struct apiserver_exchange;

/* Starts rq (copied). The answer comes as the loop runs (a write waits
 * for its commit); a request the server refuses at once is answered before
 * this returns. The exchange is the caller's. */
struct apiserver_exchange *apiserver_exchange(struct apiserver *s,
					      const struct apiserver_request *rq);
/* The status code once a reply (or a stream) has begun; else 0. */
int apiserver_exchange_status(const struct apiserver_exchange *x);
/* The reply complete (a stream ended by the server). */
bool apiserver_exchange_done(const struct apiserver_exchange *x);
/* The i-th reply header of that name (case-insensitive), or NULL. */
const char *apiserver_exchange_header(const struct apiserver_exchange *x, const char *name,
				      size_t i);
/* The body received so far (a stream's grows), NUL-terminated. */
const char *apiserver_exchange_body(const struct apiserver_exchange *x, size_t *len);
/* A reader that stops reading (stall true): a stream's data waits unsent,
 * as in a full socket, until stall false delivers it. */
void apiserver_exchange_stall(struct apiserver_exchange *x, bool stall);
/* Frees x; a request or stream still open sees its client go away. */
void apiserver_exchange_free(struct apiserver_exchange *x);

#endif
