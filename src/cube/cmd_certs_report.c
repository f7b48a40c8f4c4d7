/*
 * cube certs report — the seeds' monthly inspection from the API alone:
 * every node's client and serving certificate, read where the kubelet
 * tells it (its kubelet_certificate_manager_*_ttl_seconds metrics through
 * the API server's node proxy), else from the newest certificate the API
 * issued the node (its CSRs); beside them the control plane's as a client
 * sees them (the API server's serving certificate from the handshake, the
 * CA and client certificate of the kubeconfig). Exits 1 naming each
 * certificate inside the window.
 */
#include "cube/cli.h"

#include "client/rest.h"
#include "pki/kubeconfig.h"
#include "pki/pki.h"

#include "base/alloc.h"
#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/loop.h"
#include "base/timeutil.h"

#include <event2/http.h>
#include <getopt.h>
#include <math.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

const char certs_report_usage[] =
    "Usage: cube certs report [--kubeconfig F] [--warn-within 30d] [-o table|json]\n"
    "\n"
    "Every node's client and serving certificate expiry from the API alone: what\n"
    "each kubelet reports (kubelet_certificate_manager_client_ttl_seconds and\n"
    "_server_ttl_seconds at /api/v1/nodes/<node>/proxy/metrics), else — the kubelet\n"
    "unreachable — the newest certificate the API issued the node (its CSRs);\n"
    "beside them the control plane's as this client sees them: the API server's\n"
    "serving certificate (from the TLS handshake), the kubeconfig's CA and client\n"
    "certificate. Exits 1 naming each certificate expired or inside the window, 4 when\n"
    "the cluster cannot be read.\n"
    "\n"
    "Flags:\n"
    "      --kubeconfig F      the cluster (default $KUBECONFIG, else ~/.kube/config)\n"
    "      --warn-within DUR   warning window (default 30d)\n"
    "  -o, --output FORMAT     table (default) or json\n";

#define SIGNER_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define SIGNER_SERVING "kubernetes.io/kubelet-serving"

struct cert_row {
	char *owner;          /* "node-1", "apiserver", ... */
	char *what;           /* "client", "serving", "ca" */
	char *source;         /* where the date came from */
	int64_t not_after_ns; /* 0: unknown */
	bool control_plane;
};

struct report {
	struct {
		struct cert_row *v;
		size_t n, cap;
	} rows;
	int64_t now, warn_ns;
};

static struct cert_row *add(struct report *r, const char *owner, const char *what,
                            int64_t not_after, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static struct cert_row *add(struct report *r, const char *owner, const char *what,
                            int64_t not_after, const char *fmt, ...)
{
	struct cert_row *row = VEC_PUSH(r->rows);
	va_list ap;

	row->owner = xstrdup(owner);
	row->what = xstrdup(what);
	row->not_after_ns = not_after;
	va_start(ap, fmt);
	if (vasprintf(&row->source, fmt, ap) < 0)
		abort();
	va_end(ap);
	return row;
}

/* ---- the kubelets, through the node proxy --------------------------------------- */

struct raw_reply {
	struct loop *loop;
	bool done;
	int status;
	char *body, *err;
};

static void on_raw(void *arg, int status, const char *ct, const char *body, size_t len,
                   const char *err)
{
	struct raw_reply *r = arg;
	(void)ct;
	r->status = status;
	r->body = xmemdup(body ? body : "", body ? len : 0);
	r->err = err ? xstrdup(err) : NULL;
	r->done = true;
	loop_stop(r->loop);
}

/* A gauge's value in Prometheus text (NAN: absent). */
static double gauge(const char *text, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, name, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	}
	return NAN;
}

/* The newest certificate the API issued node with signer: its CSR. */
static const json_t *newest_csr(const json_t *csrs, const char *node, const char *signer,
                                int64_t *not_after)
{
	const json_t *csr, *best = NULL;
	size_t i;
	char user[300];

	snprintf(user, sizeof(user), "system:node:%s", node);
	*not_after = 0;
	json_array_foreach(csrs, i, csr)
	{
		const char *pem64 = jx_str(csr, "status.certificate");
		size_t len;
		unsigned char *pem;
		X509 *cert;
		char *cn = NULL;
		if (!pem64 || strcmp(jx_str(csr, "spec.signerName") ?: "", signer))
			continue;
		pem = b64_decode(pem64, &len);
		cert = pem ? pki_cert_parse((const char *)pem, len) : NULL;
		if (cert) {
			/* Bootstrap CSRs come from a token: the certificate names the node. */
			pki_name_read(X509_get_subject_name(cert), &cn, NULL);
			if (!strcmp(cn, user) && pki_cert_not_after(cert) > *not_after) {
				*not_after = pki_cert_not_after(cert);
				best = csr;
			}
			free(cn);
			X509_free(cert);
		}
		free(pem);
	}
	return best;
}

static void node_rows(struct report *r, struct rest_client *c, struct loop *loop, const char *node,
                      const json_t *csrs)
{
	static const char *const kinds[][3] = {
	    {"client", "kubelet_certificate_manager_client_ttl_seconds", SIGNER_CLIENT},
	    {"serving", "kubelet_certificate_manager_server_ttl_seconds", SIGNER_SERVING}};
	struct raw_reply rep = {.loop = loop};
	char path[400], why[600] = "";

	snprintf(path, sizeof(path), "/api/v1/nodes/%s/proxy/metrics", node);
	rest_do_raw(c, "GET", path, "text/plain", NULL, NULL, on_raw, &rep);
	while (!rep.done)
		loop_run(loop);
	if (rep.status != 200) {
		json_t *st = rep.status ? jx_parse(rep.body, strlen(rep.body)) : NULL;
		snprintf(why, sizeof(why), "kubelet unreachable: %s",
		         rep.status ? jx_str(st, "message") ?: "error"
		         : rep.err  ? rep.err
		                    : "failed");
		json_decref(st);
	}
	for (size_t k = 0; k < 2; k++) {
		double ttl = *why ? NAN : gauge(rep.body, kinds[k][1]);
		int64_t na;
		const json_t *csr;
		/* A kubelet exports the series only with the certificate manager
		 * that rotates it: rotateCertificates, serverTLSBootstrap. */
		const char *note =
		    *why         ? why
		    : isinf(ttl) ? "the kubelet reports no valid certificate (+Inf)"
		    : k          ? "no serving TTL: serverTLSBootstrap is off (a self-signed or "
		                   "file serving certificate)"
		                 : "no client TTL: rotateCertificates is off";
		if (isfinite(ttl)) {
			add(r, node, kinds[k][0], r->now + (int64_t)(ttl * 1e9), "kubelet metrics");
		} else if ((csr = newest_csr(csrs, node, kinds[k][2], &na))) {
			add(r, node, kinds[k][0], na, "CSR %s (%s)", jx_str(csr, "metadata.name"),
			    note);
		} else {
			add(r, node, kinds[k][0], 0, "%s", note);
		}
	}
	free(rep.body);
	free(rep.err);
}

/* ---- the control plane, as this client sees it ---------------------------------- */

/* The API server's serving certificate, from a handshake with it. */
static X509 *server_certificate(const char *server)
{
	struct evhttp_uri *u = evhttp_uri_parse(server);
	const char *host = u ? evhttp_uri_get_host(u) : NULL;
	int port = u && evhttp_uri_get_port(u) > 0 ? evhttp_uri_get_port(u) : 443;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	BIO *bio = NULL;
	SSL *ssl = NULL;
	X509 *cert = NULL;
	char addr[300];

	if (host && ctx) {
		/* libevent gives an IPv6 literal with its brackets. */
		snprintf(addr, sizeof(addr), "%s:%d", host, port);
		bio = BIO_new_ssl_connect(ctx);
		BIO_get_ssl(bio, &ssl);
		if (ssl && !strchr(host, ':'))
			SSL_set_tlsext_host_name(ssl, host);
		BIO_set_conn_hostname(bio, addr);
		if (BIO_do_connect(bio) == 1) {
			/* A server that accepts and says nothing must not hang us. */
			struct timeval tv = {.tv_sec = 10};
			int fd = (int)BIO_get_fd(bio, NULL);
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			if (BIO_do_handshake(bio) == 1)
				cert = SSL_get1_peer_certificate(ssl);
		}
	}
	ERR_clear_error();
	BIO_free_all(bio);
	SSL_CTX_free(ctx);
	if (u)
		evhttp_uri_free(u);
	return cert;
}

static void pem_row(struct report *r, const char *owner, const char *what, const char *pem,
                    const char *source)
{
	X509 *cert = pem ? pki_cert_parse(pem, strlen(pem)) : NULL;
	if (!cert)
		return;
	add(r, owner, what, pki_cert_not_after(cert), "%s", source)->control_plane = true;
	X509_free(cert);
}

static void control_plane_rows(struct report *r, const struct kubeconfig *kc)
{
	X509 *cert = server_certificate(kc->server);

	if (cert) {
		add(r, "apiserver", "serving", pki_cert_not_after(cert), "TLS handshake with %s",
		    kc->server)
		    ->control_plane = true;
		X509_free(cert);
	} else {
		add(r, "apiserver", "serving", 0, "no TLS handshake with %s", kc->server)
		    ->control_plane = true;
	}
	pem_row(r, kc->user ? kc->user : "kubeconfig user", "client", kc->cert_data,
	        "this kubeconfig");
	pem_row(r, "ca", "ca", kc->ca_data, "this kubeconfig");
}

/* ---- output ----------------------------------------------------------------------- */

static const char *status_of(const struct report *r, const struct cert_row *row)
{
	if (!row->not_after_ns)
		return "unknown";
	if (row->not_after_ns <= r->now)
		return "expired";
	return row->not_after_ns - r->now <= r->warn_ns ? "warning" : "ok";
}

static void print_table(const struct report *r, bool control_plane)
{
	static const char *const head[] = {"NODE", "CERTIFICATE", "EXPIRES", "RESIDUAL TIME",
	                                   "SOURCE"};
	static const char *const cp_head[] = {"CONTROL PLANE", "CERTIFICATE", "EXPIRES",
	                                      "RESIDUAL TIME", "SOURCE"};
	struct cli_table t = {STRV_INIT, 5};

	cli_table_row(&t, control_plane ? cp_head : head);
	for (size_t i = 0; i < r->rows.n; i++) {
		const struct cert_row *row = &r->rows.v[i];
		char exp[64] = "-", left[DURATION_BUF] = "-";
		if (row->control_plane != control_plane)
			continue;
		if (row->not_after_ns) {
			cli_expires(row->not_after_ns, exp, sizeof(exp));
			duration_short_human(row->not_after_ns - r->now, left);
		}
		const char *cells[] = {row->owner, row->what, exp, left, row->source};
		cli_table_row(&t, cells);
	}
	cli_table_print(&t);
}

static int print_findings(const struct report *r, const char *window)
{
	int bad = 0;
	for (size_t i = 0; i < r->rows.n; i++) {
		const struct cert_row *row = &r->rows.v[i];
		const char *st = status_of(r, row);
		char exp[64], left[DURATION_BUF];
		if (strcmp(st, "warning") && strcmp(st, "expired"))
			continue;
		if (bad++ == 0)
			printf("\n");
		cli_expires(row->not_after_ns, exp, sizeof(exp));
		if (!strcmp(st, "expired"))
			printf("EXPIRED: %s's %s certificate expired %s ago (%s)\n", row->owner,
			       row->what, duration_short_human(r->now - row->not_after_ns, left),
			       exp);
		else
			printf("WARNING: %s's %s certificate expires in %s (%s), inside the %s "
			       "warning window\n",
			       row->owner, row->what,
			       duration_short_human(row->not_after_ns - r->now, left), exp, window);
	}
	return bad;
}

static int print_json(const struct report *r)
{
	json_t *rows = json_array();
	int bad = 0;

	for (size_t i = 0; i < r->rows.n; i++) {
		const struct cert_row *row = &r->rows.v[i];
		const char *st = status_of(r, row);
		char when[TIME_BUF];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "owner", row->owner, "certificate",
		                      row->what, "source", row->source, "status", st);
		if (row->not_after_ns) {
			json_object_set_new(
			    o, "expirationDate",
			    json_string(time_format_rfc3339(row->not_after_ns, when)));
			json_object_set_new(o, "residualTime",
			                    json_integer(row->not_after_ns - r->now));
		}
		bad += !strcmp(st, "warning") || !strcmp(st, "expired");
		json_array_append_new(rows, o);
	}
	json_t *doc = json_pack("{s:o}", "certificates", rows);
	json_dumpf(doc, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(doc);
	return bad;
}

int certs_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"warn-within", required_argument, NULL, 'w'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *path = NULL, *window = "30d", *output = "table", *env = getenv("KUBECONFIG");
	struct report r = {.now = clock_now(), .warn_ns = 30 * NS_PER_DAY};
	struct kubeconfig kc = {0};
	struct loop *loop = NULL;
	struct rest_client *c = NULL;
	json_t *nodes = NULL, *csrs = NULL;
	char *owned = NULL, *err = NULL;
	int ch, rc = 0;

	while ((ch = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (ch) {
		case 'k':
			path = optarg;
			break;
		case 'w':
			window = optarg;
			if (duration_parse(optarg, &r.warn_ns) < 0 || r.warn_ns < 0)
				return cli_usage_error("certs report",
				                       "invalid --warn-within \"%s\"", optarg);
			break;
		case 'o':
			output = optarg;
			break;
		case 'h':
			return cli_help(certs_report_usage);
		default:
			return cli_bad_flag("certs report", argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("certs report", "unexpected argument \"%s\"", argv[optind]);
	if (strcmp(output, "table") && strcmp(output, "json"))
		return cli_usage_error("certs report",
		                       "unknown output format \"%s\" (want table or "
		                       "json)",
		                       output);
	if (!path)
		path = owned = env && *env ? xstrndup(env, strcspn(env, ":"))
		                           : str_printf("%s/.kube/config", getenv("HOME") ?: ".");
	if (kubeconfig_load(path, &kc) < 0) {
		cli_fail("%s", err_msg());
		rc = 4;
		goto out;
	}
	loop = loop_new();
	if (!(c = rest_client_from_kubeconfig(loop, &kc, "cube-certs-report"))) {
		cli_fail("%s: %s", path, err_msg());
		rc = 4;
		goto out;
	}
	if (rest_do_sync(c, "GET", "/api/v1/nodes", NULL, &nodes, &err) != 200) {
		cli_fail("GET /api/v1/nodes: %s",
		              err ? err : jx_str(nodes, "message") ?: "refused");
		rc = 4;
		goto out;
	}
	rest_do_sync(c, "GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests", NULL,
	             &csrs, NULL);
	const json_t *node;
	size_t i;
	json_array_foreach(json_object_get(nodes, "items"), i, node) node_rows(
	    &r, c, loop, jx_str(node, "metadata.name") ?: "", json_object_get(csrs, "items"));
	control_plane_rows(&r, &kc);
	if (!strcmp(output, "json")) {
		rc = print_json(&r) ? 1 : 0;
	} else {
		print_table(&r, false);
		printf("\n");
		print_table(&r, true);
		rc = print_findings(&r, window) ? 1 : 0;
	}
out:
	for (size_t k = 0; k < r.rows.n; k++) {
		free(r.rows.v[k].owner);
		free(r.rows.v[k].what);
		free(r.rows.v[k].source);
	}
	free(r.rows.v);
	json_decref(nodes);
	json_decref(csrs);
	free(err);
	rest_client_free(c);
	if (loop)
		loop_free(loop);
	kubeconfig_free(&kc);
	free(owned);
	return rc;
}
