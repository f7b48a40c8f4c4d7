/*
 * secureserve — the HTTPS endpoint kube-controller-manager and
 * kube-scheduler serve on their --secure-port (10257, 10259): /healthz,
 * /livez and /readyz for anyone (upstream's --authorization-always-allow-
 * paths), /metrics (the component's registry, Prometheus text) for clients
 * with a certificate the --client-ca-file trusts; anyone else gets upstream's
 * 403 Status (`forbidden: User "system:anonymous" cannot get path
 * "/metrics"`). cube has no RBAC yet (issue 9): every verified client
 * certificate may read /metrics.
 *
 * The serving certificate: --tls-cert-file/--tls-private-key-file, else
 * a self-signed one for "localhost" and 127.0.0.1 — in --cert-dir as
 * <name>.crt/.key when given (kept across restarts), else in memory, as
 * upstream's MaybeDefaultWithSelfSignedCerts.
 *
 * Ownership: the server is the caller's; the registry is borrowed and must
 * outlive it; strings in opts are copied. Threads: the loop's.
 */
#ifndef CUBE_NET_SECURESERVE_H
#define CUBE_NET_SECURESERVE_H

#include "base/loop.h"

struct metrics;

struct secure_serving_opts {
	const char *bind_address;   /* --bind-address, default 0.0.0.0 */
	int port;                   /* --secure-port; 0: do not serve (upstream) */
	const char *cert_dir;       /* --cert-dir */
	const char *tls_cert_file;  /* --tls-cert-file */
	const char *tls_key_file;   /* --tls-private-key-file */
	const char *client_ca_file; /* --client-ca-file: who may read /metrics */
	const char *name;           /* "kube-controller-manager": file names, log */
	struct metrics *metrics;
};

struct secure_server;

/* NULL when port is 0 (not an error: err_msg() empty), or NULL with
 * err_msg() when the certificate or the port cannot be had. */
struct secure_server *secure_server_new(struct loop *loop, const struct secure_serving_opts *o);
int secure_server_port(const struct secure_server *s);
void secure_server_free(struct secure_server *s);

#endif
