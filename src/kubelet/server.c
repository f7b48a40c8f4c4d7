/*
 * The kubelet's HTTPS server: /healthz, /metrics (this kubelet's registry:
 * the certificate manager's TTL gauges and renewal counters), /configz (the
 * KubeletConfiguration it runs with), /pods (the pods bound to the node,
 * as the informer sees them) and /containerLogs/<ns>/<pod>/<container>.
 *
 * Its certificate, as upstream picks it: with serverTLSBootstrap, the serving
 * certificate manager's current one, chosen at each handshake — until one
 * is issued there is none, and the handshake fails ("no serving certificate
 * available for the kubelet"); else tlsCertFile/tlsPrivateKeyFile when
 * configured; else a self-signed kubelet.crt / kubelet.key in the cert dir,
 * made on first start.
 *
 * With a client CA (authentication.x509.clientCAFile) every request but
 * /healthz needs a certificate it signed, as kubeadm's anonymous: false;
 * authorization (upstream's webhook SubjectAccessReview) is not done: any
 * such certificate may read everything. Without one it serves anyone.
 */
#include "kubelet/internal.h"

#include "net/httpd.h"
#include "net/tls.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SELF_SIGNED_VALIDITY (365 * NS_PER_DAY)

struct kserver {
	struct kubelet *k;
	SSL_CTX *ctx; /* the process's for this client CA, shared (tls_server_ctx_shared) */
	/* The certificate (its chain after it) and key served, as text, when
	 * they are not the serving certificate manager's: parsed at each
	 * handshake (pick_cert). */
	char *cert_pem, *key_pem;
	struct httpd *h;
};

/* ---- replies ------------------------------------------------------------------------ */

/* /containerLogs/<namespace>/<pod>/<container>?timestamps=&tailLines= */
static void container_logs(struct kserver *s, struct evhttp_request *req, const char *rest)
{
	char ns[256], pod[256], container[256], *text = NULL;
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *q = u ? evhttp_uri_get_query(u) : NULL, *v;
	struct evkeyvalq params;
	bool timestamps = false;
	long tail = -1;
	int rc;

	if (sscanf(rest, "%255[^/]/%255[^/]/%255[^/?]", ns, pod, container) != 3) {
		httpd_reply(req, 404, "Not Found", "text/plain; charset=utf-8",
		            "404 page not found\n");
		return;
	}
	TAILQ_INIT(&params);
	if (q && evhttp_parse_query_str(q, &params) == 0) {
		timestamps = (v = evhttp_find_header(&params, "timestamps")) && !strcmp(v, "true");
		if ((v = evhttp_find_header(&params, "tailLines")))
			tail = strtol(v, NULL, 10);
	}
	evhttp_clear_headers(&params);
	rc = pods_container_log(s->k->pods, ns, pod, container, timestamps, tail, &text);
	if (rc < 0)
		httpd_reply(req, rc == ERR_NOTFOUND ? 404 : 400,
		            rc == ERR_NOTFOUND ? "Not Found" : "Bad Request",
		            "text/plain; charset=utf-8", err_msg());
	else
		httpd_reply(req, 200, "OK", "text/plain", text);
	free(text);
}

static void handle(struct evhttp_request *req, void *arg)
{
	struct kserver *s = arg;
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	enum evhttp_cmd_type m = evhttp_request_get_command(req);

	if (!path)
		path = "/";
	/* x509 authentication, anonymous off (kubeadm's): a certificate the
	 * client CA signed, but for /healthz. Who may do what is not asked
	 * (upstream's webhook authorization): the CA's word is enough. */
	if (s->k->cfg.client_ca_file && strcmp(path, "/healthz")) {
		SSL *ssl = httpd_ssl(req);
		const struct tls_identity *id = ssl ? tls_peer_identity(ssl, clock_now()) : NULL;
		if (!id || !id->present || id->verify_err) {
			httpd_reply(req, 401, "Unauthorized", "text/plain; charset=utf-8",
				    "Unauthorized");
			return;
		}
	}
	if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		httpd_reply(req, 405, "Method Not Allowed", "text/plain; charset=utf-8",
		            "405 method not allowed\n");
		return;
	}
	if (!strcmp(path, "/healthz")) {
		httpd_reply(req, 200, "OK", "text/plain; charset=utf-8", "ok");
	} else if (!strcmp(path, "/metrics")) {
		char *text = metrics_render(s->k->metrics);
		httpd_reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text);
		free(text);
	} else if (!strcmp(path, "/configz")) {
		/* upstream's configz: the running KubeletConfiguration under
		 * "kubeletconfig", without apiVersion and kind. */
		json_t *cfg = kubelet_config_json(&s->k->cfg), *doc;
		char *text;
		json_object_del(cfg, "apiVersion");
		json_object_del(cfg, "kind");
		/* The port it serves on, not "any" (-1). */
		json_object_set_new(cfg, "port", json_integer(kserver_port(s)));
		doc = json_pack("{s:o}", "kubeletconfig", cfg);
		text = jx_dump(doc);
		httpd_reply(req, 200, "OK", "application/json", text);
		free(text);
		json_decref(doc);
	} else if (!strcmp(path, "/pods") || !strcmp(path, "/pods/")) {
		json_t *list = s->k->pods ? pods_list(s->k->pods)
		                          : json_pack("{s:s,s:s,s:{},s:[]}", "kind", "PodList",
		                                      "apiVersion", "v1", "metadata", "items");
		char *text = jx_dump(list);
		httpd_reply(req, 200, "OK", "application/json", text);
		free(text);
		json_decref(list);
	} else if (!strncmp(path, "/containerLogs/", 15)) {
		container_logs(s, req, path + 15);
	} else {
		httpd_reply(req, 404, "Not Found", "text/plain; charset=utf-8",
		            "404 page not found\n");
	}
}

/* ---- the certificate ------------------------------------------------------------------ */

/* upstream's GenerateSelfSignedCertKey, with an ECDSA key: "<host>@<unix
 * time>", saved as crt and key_path and kept as the server's text. The files
 * are replaced whole but not fsynced: upstream's WriteCert and WriteKey do not
 * fsync either, and ten thousand nodes' first start is then not four fsyncs
 * each on the loop. cube's: a pair a crash loses or truncates fails load_pair
 * and is made again, where upstream's kubelet would fail to serve. */
static int self_signed(struct kserver *s, const char *crt, const char *key_path)
{
	struct kubelet *k = s->k;
	const char *dns[2] = {NULL}, *ips[2] = {NULL};
	unsigned char buf[16];
	char cn[300];
	EVP_PKEY *key = pki_key_new(PKI_KEY_ECDSA);
	struct pki_cert_spec spec = {.cn = cn,
	                             .dns = dns,
	                             .ips = ips,
	                             .usages = PKI_U_DIGITAL_SIGNATURE | PKI_U_KEY_ENCIPHERMENT |
	                                       PKI_U_SERVER_AUTH,
	                             .not_before_ns = clock_now(),
	                             .not_after_ns = clock_now() + SELF_SIGNED_VALIDITY};
	X509 *cert;
	int rc;

	snprintf(cn, sizeof(cn), "%s@%lld", k->cfg.node_name, (long long)clock_now_sec());
	if (inet_pton(AF_INET, k->cfg.node_name, buf) == 1 ||
	    inet_pton(AF_INET6, k->cfg.node_name, buf) == 1)
		ips[0] = k->cfg.node_name;
	else
		dns[0] = k->cfg.node_name;
	if (!key || !(cert = pki_cert_new(&spec, key, NULL, key))) {
		EVP_PKEY_free(key);
		return err_wrap(ERR_CRYPTO, "unable to generate self signed cert");
	}
	/* Encoded once: the text is both the files and what the server keeps. */
	if (!(s->cert_pem = pki_cert_pem(cert)) || !(s->key_pem = pki_key_pem(key)))
		rc = err_set(ERR_CRYPTO, "unable to generate self signed cert");
	else if ((rc = file_replace(crt, s->cert_pem, strlen(s->cert_pem), 0644)) == 0)
		rc = file_replace(key_path, s->key_pem, strlen(s->key_pem), 0600);
	if (rc == 0)
		LOG_V(4, "\"Using self-signed cert\" TLSCertFile=\"%s\" TLSPrivateKeyFile=\"%s\"",
		      crt, key_path);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

/* crt and key_path as the server's text, if they hold a certificate (its
 * chain after it) and the key that matches it. */
static int load_pair(struct kserver *s, const char *crt, const char *key_path)
{
	size_t n;
	X509 *cert;
	EVP_PKEY *key;
	int rc;

	if ((rc = file_read(crt, &s->cert_pem, &n, 1 << 20)) < 0 ||
	    (rc = file_read(key_path, &s->key_pem, &n, 1 << 20)) < 0 ||
	    (rc = tls_client_cert_parse(s->cert_pem, s->key_pem, &cert, &key)) < 0) {
		free(s->cert_pem);
		pki_secret_free(s->key_pem);
		s->cert_pem = s->key_pem = NULL;
		return rc;
	}
	X509_free(cert);
	EVP_PKEY_free(key);
	return 0;
}

/* What Go's http.Server logs through klog for a failed handshake. */
static void log_no_cert(struct kserver *s, SSL *ssl, const char *why)
{
	struct sockaddr_storage peer = {0};
	socklen_t len = sizeof(peer);
	char host[INET6_ADDRSTRLEN] = "", port[8] = "";

	if (getpeername(SSL_get_fd(ssl), (struct sockaddr *)&peer, &len) == 0)
		getnameinfo((struct sockaddr *)&peer, len, host, sizeof(host), port, sizeof(port),
		            NI_NUMERICHOST | NI_NUMERICSERV);
	LOG_INFO("http: TLS handshake error from %s%s%s%s: %s%s",
	         peer.ss_family == AF_INET6 ? "[" : "", host,
	         peer.ss_family == AF_INET6 ? "]:" : ":", port, why, s->k->log_kv);
}

/*
 * The connection's certificate, picked at its handshake: the serving
 * certificate manager's current one (upstream's serverTLSBootstrap
 * GetCertificate), else the server's pair, parsed now. A kubelet's server
 * sees a handshake now and then (the API server's proxy, a scrape), and ten
 * thousand hollow kubelets would hold 7 KB each parsed, and a context each.
 */
static int pick_cert(SSL *ssl, void *arg)
{
	struct kserver *s = arg;
	struct certmgr *m = s->k->serving_cm;
	STACK_OF(X509) *certs = NULL;
	EVP_PKEY *key = NULL;
	int ok;

	if (s->k->cfg.server_tls_bootstrap) {
		X509 *cert = m ? certmgr_current(m) : NULL;
		if (cert)
			return SSL_use_certificate(ssl, cert) == 1 &&
			       SSL_use_PrivateKey(ssl, certmgr_current_key(m)) == 1;
		log_no_cert(s, ssl, "no serving certificate available for the kubelet");
		return 0;
	}
	ok = s->cert_pem && pki_certs_parse(s->cert_pem, strlen(s->cert_pem), &certs) == 0 &&
	     (key = pki_key_parse(s->key_pem, strlen(s->key_pem))) &&
	     SSL_use_certificate(ssl, sk_X509_value(certs, 0)) == 1 &&
	     SSL_use_PrivateKey(ssl, key) == 1;
	for (int i = 1; ok && i < sk_X509_num(certs); i++)
		ok = SSL_add1_chain_cert(ssl, sk_X509_value(certs, i)) == 1;
	sk_X509_pop_free(certs, X509_free);
	EVP_PKEY_free(key);
	return ok;
}

/* The process's context for the client CA (read now: a restart sees a
 * new one), and the pair to serve unless the manager has it: the
 * configured files, else kubelet.crt / kubelet.key, made if they are not
 * there or not a pair. */
static int serving_setup(struct kserver *s)
{
	struct kubelet *k = s->k;
	char *ca = NULL, *crt, *key;
	size_t n;
	int rc;

	if (k->cfg.client_ca_file && (rc = file_read(k->cfg.client_ca_file, &ca, &n, 4 << 20)) < 0)
		return rc;
	s->ctx = tls_server_ctx_shared(ca);
	free(ca);
	if (!s->ctx)
		return err_set(ERR_INVALID, "client CA file %s: no usable certificates",
			       k->cfg.client_ca_file);
	if (k->cfg.server_tls_bootstrap)
		return 0;
	if (k->cfg.tls_cert_file && k->cfg.tls_private_key_file)
		return load_pair(s, k->cfg.tls_cert_file, k->cfg.tls_private_key_file);
	crt = file_join(k->cfg.cert_dir, "kubelet.crt");
	key = file_join(k->cfg.cert_dir, "kubelet.key");
	rc = 0;
	if (!file_exists(crt) || !file_exists(key) || load_pair(s, crt, key) < 0)
		rc = self_signed(s, crt, key);
	free(crt);
	free(key);
	return rc;
}

/* ---- the server ------------------------------------------------------------------------ */

struct kserver *kserver_new(struct kubelet *k)
{
	struct kserver *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->k = k;
	return s;
}

int kserver_start(struct kserver *s)
{
	struct kubelet *k = s->k;
	struct httpd_opts o = {.bind_address = k->cfg.address,
	                       .port = k->cfg.port > 0 ? k->cfg.port : 0,
	                       .max_body = 1 << 20,
	                       .max_headers = 64 << 10,
	                       .idle_timeout_s = 90,
	                       .cert_cb = pick_cert,
	                       .cert_arg = s};

	if (serving_setup(s) < 0)
		return err_wrap(ERR_INVALID, "kubelet serving certificate");
	if (!(s->h = httpd_new(k->loop, s->ctx, &o, handle, s)))
		return err_wrap(ERR_IO, "listen on %s:%d", o.bind_address, o.port);
	LOG_INFO("\"Starting to listen\" address=\"%s\" port=%d", o.bind_address, httpd_port(s->h));
	return 0;
}

int kserver_port(const struct kserver *s)
{
	return s->h ? httpd_port(s->h) : 0;
}

void kserver_free(struct kserver *s)
{
	if (!s)
		return;
	httpd_free(s->h);
	SSL_CTX_free(s->ctx);
	free(s->cert_pem);
	pki_secret_free(s->key_pem);
	free(s);
}
