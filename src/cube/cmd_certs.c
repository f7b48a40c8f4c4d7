/*
 * cube certs — check-expiration, inspect, verify, sign-csr: the runbook's
 * certificate commands, without needing openssl (though its files are the
 * ones openssl reads).
 */
#include "cube/cli.h"

#include "pki/cluster.h"
#include "pki/expiry.h"
#include "pki/pki.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/timeutil.h"

#include <getopt.h>
#include <inttypes.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- check-expiration ------------------------------------------------------ */

static const char check_usage[] =
	"Usage: cube certs check-expiration [--dir DIR] [--kubelet-dir DIR ...] [flags]\n"
	"\n"
	"Report when each certificate of a cluster expires, as 'kubeadm certs\n"
	"check-expiration' does, plus the kubelets' client and serving certificates\n"
	"(kubelet-client-current.pem, following the symlink). When DIR/pki/etcd exists\n"
	"(a local etcd, as 'cube pki init' makes) its certificates are rows too, under\n"
	"kubeadm's names: apiserver-etcd-client, etcd-healthcheck-client, etcd-peer,\n"
	"etcd-server (CERTIFICATE AUTHORITY etcd-ca) and the CA etcd-ca.\n"
	"Exits 1 when any certificate is expired, inside the warning window, missing\n"
	"or not signed by its CA, and says which.\n"
	"\n"
	"Flags:\n"
	"      --dir DIR           cluster directory from 'cube pki init' (default /etc/kubernetes)\n"
	"      --kubelet-dir DIR   a kubelet cert dir, root dir, or a directory of node dirs\n"
	"                          (repeatable)\n"
	"      --warn-within DUR   warning window (default 30d)\n"
	"  -o, --output FORMAT     text (default) or json\n";

static json_t *row_json(const struct expiry_row *row, int64_t now)
{
	char when[TIME_BUF];
	json_t *o = json_object();

	json_object_set_new(o, "name", json_string(row->name));
	json_object_set_new(o, "path", json_string(row->path));
	if (row->not_after_ns) {
		json_object_set_new(o, "expirationDate",
				    json_string(time_format_rfc3339(row->not_after_ns, when)));
		json_object_set_new(o, "residualTime", json_integer(row->not_after_ns - now));
	}
	if (!row->is_ca)
		json_object_set_new(o, "certificateAuthority", json_string(row->ca ? row->ca : ""));
	json_object_set_new(o, "externallyManaged", json_boolean(row->external));
	json_object_set_new(o, "missing", json_boolean(row->status == EXPIRY_MISSING));
	json_object_set_new(o, "status", json_string(expiry_status_name(row->status)));
	if (row->error)
		json_object_set_new(o, "error", json_string(row->error));
	return o;
}

static void print_json(const struct expiry_report *rep, int64_t now)
{
	json_t *root = json_pack("{s:s,s:s}", "kind", "CertificateExpirationInfo", "apiVersion",
				 "output.kubeadm.k8s.io/v1alpha3");
	json_t *certs = json_array(), *cas = json_array();
	char *text;

	for (size_t i = 0; i < rep->n; i++)
		json_array_append_new(rep->rows[i].is_ca ? cas : certs,
				      row_json(&rep->rows[i], now));
	json_object_set_new(root, "certificates", certs);
	json_object_set_new(root, "certificateAuthorities", cas);
	text = json_dumps(root, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
	printf("%s\n", text);
	free(text);
	json_decref(root);
}

static void print_tables(const struct expiry_report *rep, int64_t now)
{
	static const char *const h1[] = {"CERTIFICATE", "EXPIRES", "RESIDUAL TIME",
					 "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED"};
	static const char *const h2[] = {"CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME",
					 "EXTERNALLY MANAGED"};
	struct cli_table certs = {STRV_INIT, 5}, cas = {STRV_INIT, 4};
	bool any_ca = false;

	cli_table_row(&certs, h1);
	cli_table_row(&cas, h2);
	for (size_t i = 0; i < rep->n; i++) {
		const struct expiry_row *row = &rep->rows[i];
		char name[512], exp[64] = "", left[DURATION_BUF] = "";
		if (row->status == EXPIRY_MISSING || !row->not_after_ns) {
			snprintf(name, sizeof(name), "%s %s",
				 row->status == EXPIRY_MISSING ? "!MISSING!" : "!INVALID!",
				 row->name);
		} else {
			snprintf(name, sizeof(name), "%s", row->name);
			cli_expires(row->not_after_ns, exp, sizeof(exp));
			duration_short_human(row->not_after_ns - now, left);
		}
		const char *ext = row->external ? "yes" : "no";
		if (row->is_ca) {
			const char *cells[] = {name, exp, left, ext};
			cli_table_row(&cas, cells);
			any_ca = true;
		} else {
			const char *cells[] = {name, exp, left, row->ca, ext};
			cli_table_row(&certs, cells);
		}
	}
	cli_table_print(&certs);
	if (any_ca) {
		printf("\n");
		cli_table_print(&cas);
	} else {
		strv_free(&cas.cells);
	}
}

/* One line per certificate that needs attention; returns how many. */
static int print_findings(const struct expiry_report *rep, int64_t now, const char *window)
{
	int bad = 0;

	for (size_t i = 0; i < rep->n; i++) {
		const struct expiry_row *row = &rep->rows[i];
		char exp[64], left[DURATION_BUF];
		const char *kind = row->is_ca ? "certificate authority" : "certificate";

		if (row->status == EXPIRY_OK)
			continue;
		if (bad++ == 0)
			printf("\n");
		if (row->not_after_ns)
			cli_expires(row->not_after_ns, exp, sizeof(exp));
		switch (row->status) {
		case EXPIRY_WARNING:
			printf("WARNING: %s \"%s\" expires in %s (%s), inside the %s warning "
			       "window: %s\n",
			       kind, row->name, duration_short_human(row->not_after_ns - now, left),
			       exp, window, row->path);
			break;
		case EXPIRY_EXPIRED:
			printf("EXPIRED: %s \"%s\" expired %s ago (%s): %s\n", kind, row->name,
			       duration_short_human(now - row->not_after_ns, left), exp, row->path);
			break;
		case EXPIRY_MISSING:
			printf("MISSING: %s \"%s\": %s: %s\n", kind, row->name, row->error,
			       row->path);
			break;
		default:
			printf("INVALID: %s \"%s\": %s\n", kind, row->name, row->error);
			break;
		}
	}
	return bad;
}

static int certs_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dir", required_argument, NULL, 'd'},
		{"kubelet-dir", required_argument, NULL, 'k'},
		{"warn-within", required_argument, NULL, 'w'},
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct strv kdirs = STRV_INIT;
	const char *dir = NULL, *window = "30d", *output = "text";
	struct expiry_report rep;
	int64_t warn = 30 * NS_PER_DAY, now = clock_now();
	int c, r = 0, bad;

	while (r == 0 && (c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'k': strv_push(&kdirs, optarg); break;
		case 'w':
			window = optarg;
			if (duration_parse(optarg, &warn) < 0 || warn < 0)
				r = cli_usage_error("certs check-expiration",
						    "invalid --warn-within \"%s\"", optarg);
			break;
		case 'o': output = optarg; break;
		case 'h': strv_free(&kdirs); return cli_help(check_usage);
		default: r = cli_bad_flag("certs check-expiration", argv); break;
		}
	}
	if (r == 0 && optind < argc)
		r = cli_usage_error("certs check-expiration", "unexpected argument \"%s\"",
				    argv[optind]);
	if (r == 0 && strcmp(output, "text") && strcmp(output, "json"))
		r = cli_usage_error("certs check-expiration",
				    "unknown output format \"%s\" (want text or json)", output);
	if (r == 0 && !dir) {
		dir = "/etc/kubernetes";
		/* The default is only a guess; without it, kubelet dirs alone are fine. */
		if (!file_exists(dir) && kdirs.n)
			dir = NULL;
	}
	if (r == 0 && dir && !file_exists(dir))
		r = cli_fail("cluster directory %s does not exist (use --dir, or --kubelet-dir "
			     "alone)",
			     dir);
	if (r) {
		strv_free(&kdirs);
		return r;
	}
	expiry_scan(dir, (const char *const *)kdirs.v, now, warn, &rep);
	if (!strcmp(output, "json")) {
		print_json(&rep, now);
		bad = 0;
		for (size_t i = 0; i < rep.n; i++)
			bad += rep.rows[i].status != EXPIRY_OK;
	} else {
		print_tables(&rep, now);
		bad = print_findings(&rep, now, window);
	}
	expiry_report_free(&rep);
	strv_free(&kdirs);
	return bad ? 1 : 0;
}

/* ---- inspect ------------------------------------------------------------------ */

static const char inspect_usage[] =
	"Usage: cube certs inspect FILE [--ca-file CA] [-o json]\n"
	"\n"
	"Show a certificate (or every certificate of a chain or kubelet pair file), or\n"
	"a certificate signing request: subject, issuer, SANs, usages, validity,\n"
	"fingerprint and time left. With --ca-file, also verify it against that CA.\n"
	"Exits 1 when a certificate has expired or does not verify.\n";

static void print_list(const char *label, const struct strv *sv)
{
	char *s;
	if (!sv->n)
		return;
	s = strv_join(sv, ", ");
	printf("%-18s%s\n", label, s);
	free(s);
}

static json_t *strv_json(const struct strv *sv)
{
	json_t *a = json_array();
	for (size_t i = 0; i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

static int inspect_cert(X509 *cert, X509 *ca, const char *path, json_t *out_json)
{
	struct pki_cert_info in;
	struct strv usages = STRV_INIT;
	char nb[TIME_BUF], na[TIME_BUF], left[DURATION_BUF], *u;
	int64_t now = clock_now();
	int bad = 0, vr = 0;

	pki_cert_info(cert, &in);
	pki_usage_names(in.usages, &usages);
	time_format_rfc3339(in.not_before_ns, nb);
	time_format_rfc3339(in.not_after_ns, na);
	if (now >= in.not_after_ns || now < in.not_before_ns)
		bad = 1;
	if (ca)
		vr = pki_verify_with(cert, ca, now, PKI_PURPOSE_ANY);
	if (vr < 0)
		bad = 1;

	if (out_json) {
		json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:b,s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:I}",
				      "file", path, "subject", in.subject, "issuer", in.issuer,
				      "commonName", in.cn, "isCA", in.is_ca, "key", in.key,
				      "serial", in.serial, "notBefore", nb, "notAfter", na,
				      "organizations", strv_json(&in.orgs), "dnsNames",
				      strv_json(&in.dns), "ipAddresses", strv_json(&in.ips),
				      "secondsLeft", (json_int_t)((in.not_after_ns - now) / NS_PER_SEC));
		json_object_set_new(o, "usages", strv_json(&usages));
		json_object_set_new(o, "sha256", json_string(in.sha256));
		json_object_set_new(o, "expired", json_boolean(now >= in.not_after_ns));
		if (ca)
			json_object_set_new(o, "verified",
					    vr == 0 ? json_true() : json_string(err_msg()));
		json_array_append_new(out_json, o);
	} else {
		printf("%-18s%s\n", "File:", path);
		printf("%-18s%s\n", "Subject:", in.subject);
		printf("%-18s%s\n", "Issuer:", in.issuer);
		printf("%-18s%s\n", "Serial:", in.serial);
		printf("%-18s%s\n", "Key:", in.key);
		printf("%-18s%s\n", "CA:", in.is_ca ? "yes" : "no");
		print_list("DNS names:", &in.dns);
		print_list("IP addresses:", &in.ips);
		print_list("Emails:", &in.emails);
		print_list("URIs:", &in.uris);
		u = strv_join(&usages, ", ");
		printf("%-18s%s\n", "Usages:", u);
		free(u);
		printf("%-18s%s\n", "Not before:", nb);
		printf("%-18s%s\n", "Not after:", na);
		if (now >= in.not_after_ns)
			printf("%-18sEXPIRED %s ago\n", "Time left:",
			       duration_short_human(now - in.not_after_ns, left));
		else if (now < in.not_before_ns)
			printf("%-18sNOT YET VALID (starts in %s)\n", "Time left:",
			       duration_short_human(in.not_before_ns - now, left));
		else
			printf("%-18s%s\n", "Time left:",
			       duration_short_human(in.not_after_ns - now, left));
		printf("%-18s%s\n", "SHA-256:", in.sha256);
		if (ca)
			printf("%-18s%s\n", "Verified:", vr == 0 ? "yes" : err_msg());
	}
	strv_free(&usages);
	pki_cert_info_free(&in);
	return bad;
}

static void inspect_csr(X509_REQ *req, const char *path, json_t *out_json)
{
	struct pki_csr_info in;
	struct strv usages = STRV_INIT;
	char *u;

	pki_csr_info(req, &in);
	pki_usage_names(in.usages, &usages);
	if (out_json) {
		json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o}", "file", path, "commonName",
				      in.cn, "key", in.key, "organizations", strv_json(&in.orgs),
				      "dnsNames", strv_json(&in.dns), "ipAddresses",
				      strv_json(&in.ips), "usages", strv_json(&usages));
		json_object_set_new(o, "kind", json_string("CertificateSigningRequest"));
		json_array_append_new(out_json, o);
	} else {
		printf("%-18s%s\n", "File:", path);
		printf("%-18s%s\n", "Type:", "certificate signing request (signature valid)");
		printf("%-18s%s\n", "Common name:", in.cn);
		print_list("Organizations:", &in.orgs);
		printf("%-18s%s\n", "Key:", in.key);
		print_list("DNS names:", &in.dns);
		print_list("IP addresses:", &in.ips);
		u = strv_join(&usages, ", ");
		printf("%-18s%s\n", "Requested usages:", in.has_usages ? u : "(none in request)");
		free(u);
	}
	strv_free(&usages);
	pki_csr_info_free(&in);
}

static int certs_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{"ca-file", required_argument, NULL, 'c'},
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *ca_file = NULL, *output = "text", *path;
	STACK_OF(X509) *certs = NULL;
	json_t *js = NULL;
	X509 *ca = NULL;
	char *buf;
	size_t len;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': ca_file = optarg; break;
		case 'o': output = optarg; break;
		case 'h': return cli_help(inspect_usage);
		default: return cli_bad_flag("certs inspect", argv);
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("certs inspect", "want exactly one FILE");
	if (strcmp(output, "text") && strcmp(output, "json"))
		return cli_usage_error("certs inspect", "unknown output format \"%s\"", output);
	path = argv[optind];
	if (ca_file && !(ca = pki_cert_load(ca_file)))
		return cli_fail("%s", err_msg());
	if (file_read(path, &buf, &len, 4 << 20) < 0) {
		X509_free(ca);
		return cli_fail("%s", err_msg());
	}
	if (!strcmp(output, "json"))
		js = json_array();
	if (memmem(buf, len, "CERTIFICATE REQUEST-----", 24)) {
		X509_REQ *req = pki_csr_parse(buf, len);
		if (!req)
			bad = cli_fail("%s: %s", path, err_msg());
		else
			inspect_csr(req, path, js);
		X509_REQ_free(req);
	} else if (pki_certs_parse(buf, len, &certs) < 0) {
		bad = cli_fail("%s: %s", path, err_msg());
	} else {
		for (int i = 0; i < sk_X509_num(certs); i++) {
			if (i && !js)
				printf("\n");
			bad |= inspect_cert(sk_X509_value(certs, i), ca, path, js);
		}
		sk_X509_pop_free(certs, X509_free);
	}
	if (js) {
		char *text = json_dumps(js, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		printf("%s\n", text);
		free(text);
		json_decref(js);
	}
	free(buf);
	X509_free(ca);
	return bad ? 1 : 0;
}

/* ---- verify --------------------------------------------------------------------- */

static const char verify_usage[] =
	"Usage: cube certs verify --ca-file CA [--purpose client|server] FILE...\n"
	"\n"
	"Verify each certificate against CA now (or at --clock-offset), with the\n"
	"messages the API server logs: expired, not yet valid, unknown authority,\n"
	"wrong usage. Prints \"FILE: OK\" or \"FILE: <reason>\"; exits 1 if any fails.\n";

static int certs_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{"ca-file", required_argument, NULL, 'c'},
		{"purpose", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum pki_purpose purpose = PKI_PURPOSE_ANY;
	const char *ca_file = NULL;
	X509 *ca;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': ca_file = optarg; break;
		case 'p':
			if (!strcmp(optarg, "client"))
				purpose = PKI_PURPOSE_CLIENT;
			else if (!strcmp(optarg, "server"))
				purpose = PKI_PURPOSE_SERVER;
			else
				return cli_usage_error("certs verify",
						       "--purpose must be client or server");
			break;
		case 'h': return cli_help(verify_usage);
		default: return cli_bad_flag("certs verify", argv);
		}
	}
	if (!ca_file)
		return cli_usage_error("certs verify", "--ca-file is required");
	if (optind >= argc)
		return cli_usage_error("certs verify", "no FILE given");
	if (!(ca = pki_cert_load(ca_file)))
		return cli_fail("%s", err_msg());
	for (int i = optind; i < argc; i++) {
		char *buf;
		size_t len;
		STACK_OF(X509) *certs = NULL;
		X509 *leaf;

		if (file_read(argv[i], &buf, &len, 4 << 20) < 0) {
			printf("%s: %s\n", argv[i], err_msg());
			bad = 1;
			continue;
		}
		if (pki_certs_parse(buf, len, &certs) < 0) {
			printf("%s: %s\n", argv[i], err_msg());
			bad = 1;
		} else {
			STACK_OF(X509) *roots = sk_X509_new_null();
			sk_X509_push(roots, ca);
			/* The rest of the file is the chain, as in a kubelet pair file. */
			leaf = sk_X509_shift(certs);
			if (pki_verify(leaf, certs, roots, clock_now(), purpose) < 0) {
				printf("%s: %s\n", argv[i], err_msg());
				bad = 1;
			} else {
				printf("%s: OK\n", argv[i]);
			}
			X509_free(leaf);
			sk_X509_free(roots);
			sk_X509_pop_free(certs, X509_free);
		}
		free(buf);
	}
	X509_free(ca);
	return bad;
}

/* ---- sign-csr --------------------------------------------------------------------- */

static const char sign_usage[] =
	"Usage: cube certs sign-csr --ca-dir DIR --in REQ --out CERT [flags]\n"
	"\n"
	"Sign a PKCS#10 request with the cluster CA, as the controller manager's\n"
	"csrsigning controller would: subject and SANs from the request, NotBefore\n"
	"backdated 5m, usages from --usages, else from the request's extensions,\n"
	"else a kubelet client's (digital signature, client auth; + key encipherment\n"
	"for RSA). The runbook's manual plan 2, without openssl.\n"
	"\n"
	"Flags:\n"
	"      --ca-dir DIR        directory with ca.crt and ca.key (a 'cube pki init'\n"
	"                          dir or its pki/ subdirectory)\n"
	"      --in REQ            the request (PEM)\n"
	"      --out CERT          where to write the certificate (PEM)\n"
	"      --duration DUR      lifetime (default 8760h)\n"
	"      --usages LIST       comma-separated Kubernetes usage names\n";

static int load_ca_dir(const char *dir, X509 **ca, EVP_PKEY **key)
{
	char *crt = file_join(dir, "ca.crt"), *kf = file_join(dir, "ca.key");
	int r = 0;

	if (!file_exists(crt)) {
		free(crt);
		free(kf);
		crt = file_join(dir, "pki/ca.crt");
		kf = file_join(dir, "pki/ca.key");
	}
	*key = NULL;
	if (!(*ca = pki_cert_load(crt)) || !(*key = pki_key_load(kf)))
		r = ERR_PARSE;
	else if (!pki_key_matches(*ca, *key))
		r = err_set(ERR_INVALID, "%s does not match %s", kf, crt);
	if (r < 0) {
		X509_free(*ca);
		EVP_PKEY_free(*key);
		*ca = NULL;
		*key = NULL;
	}
	free(crt);
	free(kf);
	return r;
}

static int parse_usages(const char *list, unsigned *out)
{
	char *copy = strdup(list), *save = NULL;
	int r = 0;

	*out = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok && r == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned bit;
		while (*tok == ' ')
			tok++;
		if ((r = pki_usage_parse(tok, &bit)) == 0)
			*out |= bit;
	}
	free(copy);
	return r;
}

static int certs_sign(int argc, char **argv)
{
	static const struct option opts[] = {
		{"ca-dir", required_argument, NULL, 'c'},
		{"in", required_argument, NULL, 'i'},
		{"out", required_argument, NULL, 'o'},
		{"duration", required_argument, NULL, 'd'},
		{"usages", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *ca_dir = NULL, *in = NULL, *out = NULL, *usages = NULL;
	struct pki_sign_policy pol = {
		.ttl_ns = 8760 * NS_PER_HOUR,
		.backdate_ns = PKI_BACKDATE_NS,
		.short_ns = PKI_SHORT_NS,
	};
	struct pki_csr_info info;
	X509_REQ *req = NULL;
	X509 *ca = NULL, *cert = NULL;
	EVP_PKEY *ca_key = NULL;
	char nb[TIME_BUF], na[TIME_BUF];
	int c, r = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': ca_dir = optarg; break;
		case 'i': in = optarg; break;
		case 'o': out = optarg; break;
		case 'u': usages = optarg; break;
		case 'd':
			if (duration_parse(optarg, &pol.ttl_ns) < 0 || pol.ttl_ns <= 0)
				return cli_usage_error("certs sign-csr",
						       "invalid --duration \"%s\"", optarg);
			break;
		case 'h': return cli_help(sign_usage);
		default: return cli_bad_flag("certs sign-csr", argv);
		}
	}
	if (!ca_dir || !in || !out)
		return cli_usage_error("certs sign-csr", "--ca-dir, --in and --out are required");
	if (optind < argc)
		return cli_usage_error("certs sign-csr", "unexpected argument \"%s\"",
				       argv[optind]);
	if (usages && parse_usages(usages, &pol.usages) < 0)
		return cli_usage_error("certs sign-csr", "%s", err_msg());
	if (load_ca_dir(ca_dir, &ca, &ca_key) < 0)
		return cli_fail("%s", err_msg());
	if (!(req = pki_csr_load(in))) {
		r = cli_fail("%s", err_msg());
		goto out;
	}
	pki_csr_info(req, &info);
	if (!usages)
		pol.usages = info.has_usages ? info.usages : pki_usages_kubelet(info.key_rsa, false);
	if (!(cert = pki_csr_sign(req, ca, ca_key, &pol))) {
		r = cli_fail("%s", err_msg());
	} else if (pki_cert_save(out, cert) < 0) {
		r = cli_fail("%s", err_msg());
	} else {
		struct strv names = STRV_INIT;
		char *orgs = strv_join(&info.orgs, ",");
		char *u;
		pki_usage_names(pol.usages, &names);
		u = strv_join(&names, ", ");
		printf("Signed %s for CN=%s%s%s\n  valid %s to %s\n  usages: %s\n", out, info.cn,
		       orgs[0] ? ", O=" : "", orgs,
		       time_format_rfc3339(pki_cert_not_before(cert), nb),
		       time_format_rfc3339(pki_cert_not_after(cert), na), u);
		free(u);
		free(orgs);
		strv_free(&names);
	}
	pki_csr_info_free(&info);
out:
	X509_free(cert);
	X509_REQ_free(req);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	return r;
}

/* ---- new-csr ------------------------------------------------------------------- */

static const char newcsr_usage[] =
	"Usage: cube certs new-csr (--node NAME | --cn CN [--org O ...]) --key-out KEY --out REQ\n"
	"                          [--dns NAME ...] [--ip ADDR ...] [--key-type ecdsa|rsa]\n"
	"                          [--usages LIST]\n"
	"\n"
	"Make a new private key and a PKCS#10 request, as a kubelet does: --node NAME\n"
	"asks for CN=system:node:NAME, O=system:nodes. The request carries usage\n"
	"extensions only when --usages is given (the kubelet puts usages in the\n"
	"CertificateSigningRequest object instead). The key is written 0600.\n";

static int certs_new_csr(int argc, char **argv)
{
	static const struct option opts[] = {
		{"node", required_argument, NULL, 'n'},
		{"cn", required_argument, NULL, 'c'},
		{"org", required_argument, NULL, 'O'},
		{"dns", required_argument, NULL, 'd'},
		{"ip", required_argument, NULL, 'i'},
		{"key-type", required_argument, NULL, 'k'},
		{"key-out", required_argument, NULL, 'K'},
		{"out", required_argument, NULL, 'o'},
		{"usages", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct strv orgs = STRV_INIT, dns = STRV_INIT, ips = STRV_INIT;
	const char *node = NULL, *key_out = NULL, *out = NULL;
	char *cn = NULL, *pem = NULL;
	enum pki_key_type type = PKI_KEY_ECDSA;
	unsigned usages = 0;
	EVP_PKEY *key = NULL;
	X509_REQ *req = NULL;
	int c, r = 0;

	while (r == 0 && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': node = optarg; break;
		case 'c': free(cn); cn = strdup(optarg); break;
		case 'O': strv_push(&orgs, optarg); break;
		case 'd': strv_push(&dns, optarg); break;
		case 'i': strv_push(&ips, optarg); break;
		case 'K': key_out = optarg; break;
		case 'o': out = optarg; break;
		case 'k':
			if (pki_key_type_parse(optarg, &type) < 0)
				r = cli_usage_error("certs new-csr", "%s", err_msg());
			break;
		case 'u':
			if (parse_usages(optarg, &usages) < 0)
				r = cli_usage_error("certs new-csr", "%s", err_msg());
			break;
		case 'h': r = cli_help(newcsr_usage); goto out;
		default: r = cli_bad_flag("certs new-csr", argv); break;
		}
	}
	if (r == 0 && (!key_out || !out))
		r = cli_usage_error("certs new-csr", "--key-out and --out are required");
	if (r == 0 && !node == !cn)
		r = cli_usage_error("certs new-csr", "give exactly one of --node and --cn");
	if (r)
		goto out;
	if (node) {
		if (asprintf(&cn, "system:node:%s", node) < 0)
			abort();
		strv_push_unique(&orgs, "system:nodes");
	}
	if (!(key = pki_key_new(type)) ||
	    !(req = pki_csr_new(key, cn, (const char *const *)orgs.v, (const char *const *)dns.v,
				(const char *const *)ips.v, usages))) {
		r = cli_fail("%s", err_msg());
		goto out;
	}
	pem = pki_csr_pem(req);
	if (pki_key_save(key_out, key) < 0 || file_write_atomic(out, pem, strlen(pem), 0644) < 0)
		r = cli_fail("%s", err_msg());
	else
		printf("Wrote %s (request for CN=%s) and its key %s\n", out, cn, key_out);
out:
	free(pem);
	free(cn);
	X509_REQ_free(req);
	EVP_PKEY_free(key);
	strv_free(&orgs);
	strv_free(&dns);
	strv_free(&ips);
	return r;
}

int cmd_certs(int argc, char **argv)
{
	static const struct cli_command cmds[] = {
		{"check-expiration", "when each cluster and kubelet certificate expires",
		 certs_check, check_usage},
		{"report", "every node's certificates from the API alone", certs_report,
		 certs_report_usage},
		{"inspect", "show a certificate or CSR", certs_inspect, inspect_usage},
		{"verify", "verify certificates against a CA", certs_verify, verify_usage},
		{"sign-csr", "sign a CSR with the cluster CA", certs_sign, sign_usage},
		{"new-csr", "make a key and a CSR, as a kubelet does", certs_new_csr,
		 newcsr_usage},
		{NULL, NULL, NULL, NULL},
	};
	return cli_dispatch("certs", cmds, argc, argv);
}
