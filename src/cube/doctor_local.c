/* doctor's view of a node from its own files: the kubelet's root dir. */
#include "cube/doctor.h"

#include "kubelet/kubelet.h"
#include "pki/certstore.h"
#include "pki/pki.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Errors that only say that others came before them. */
static bool generic_error(const char *err)
{
	return strstr(err, "exceeds retry count") || strstr(err, "attempts to update lease");
}

/* The value of err="..." with Go's \" unquoted (malloc'd). */
static char *err_value(const char *e)
{
	char *out = xmalloc(strlen(e) + 1), *o = out;

	for (; *e && *e != '"'; e++) {
		if (*e == '\\' && e[1])
			e++;
		*o++ = *e;
	}
	*o = '\0';
	return out;
}

/* The newest error line of the log's tail that says what failed. */
static void read_log(const char *path, struct doctor_node_local *out)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	long size;

	if (!f)
		return;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 256 * 1024)
		fseek(f, size - 256 * 1024, SEEK_SET);
	else
		rewind(f);
	while (fgets(line, sizeof(line), f)) {
		char *e = strstr(line, " err=\""), *v;
		if (!e || line[0] != 'E')
			continue;
		v = err_value(e + 6);
		if (generic_error(v)) {
			free(v);
			continue;
		}
		line[strcspn(line, "\n")] = '\0';
		free(out->log_line);
		free(out->log_err);
		out->log_line = xstrdup(line);
		out->log_err = v;
	}
	fclose(f);
}

static void read_cert(const char *pki, const char *ca_pem, int64_t now,
                      struct doctor_node_local *out)
{
	char *link = certstore_current_path(pki, CERTSTORE_CLIENT), *cn = NULL;
	X509 *cert, *ca = ca_pem ? pki_cert_parse(ca_pem, strlen(ca_pem)) : NULL;

	if (!file_exists(link)) {
		free(link);
		X509_free(ca);
		return;
	}
	out->cert_path = link;
	if (!(cert = pki_cert_load(link))) {
		out->cert_error = xstrdup(err_msg());
	} else {
		out->not_before_ns = pki_cert_not_before(cert);
		out->not_after_ns = pki_cert_not_after(cert);
		pki_name_read(X509_get_subject_name(cert), &cn, NULL);
		if (!strncmp(cn, "system:node:", 12) && cn[12]) {
			free(out->node);
			out->node = xstrdup(cn + 12);
		}
		if (ca && pki_verify_with(cert, ca, now, PKI_PURPOSE_ANY) == ERR_UNAUTHORIZED)
			pki_name_read(X509_get_issuer_name(cert), &out->foreign_issuer, NULL);
		free(cn);
		X509_free(cert);
	}
	X509_free(ca);
}

void doctor_node_local_read(const char *dir, const char *ca_pem, int64_t now,
                            struct doctor_node_local *out)
{
	char buf[PATH_MAX], *pki = file_join(dir, "pki"), *conf, *log;
	const char *root = dir, *base;
	struct kubelet_config kc;

	memset(out, 0, sizeof(*out));
	out->rotate = -1;
	out->running = -1;
	/* Given the pki dir itself, the root is its parent. */
	if (!file_exists(pki)) {
		size_t n = strlen(dir);
		while (n > 1 && dir[n - 1] == '/')
			n--;
		if (n >= 4 && !strncmp(dir + n - 4, "/pki", 4)) {
			snprintf(buf, sizeof(buf), "%.*s", (int)(n - 4), dir);
			root = buf;
		}
		free(pki);
		pki = xstrdup(dir);
	}
	out->dir = xstrdup(root);
	out->pki_dir = xstrdup(pki);
	base = strrchr(out->dir, '/');
	out->node = xstrdup(base && base[1] ? base + 1 : out->dir);
	read_cert(pki, ca_pem, now, out);
	conf = file_join(root, "config.yaml");
	kubelet_config_init(&kc);
	if (file_exists(conf) && kubelet_config_load(&kc, conf) == 0)
		out->rotate = kc.rotate_certificates;
	kubelet_config_free(&kc);
	log = file_join(root, "kubelet.log");
	read_log(log, out);
	free(log);
	free(conf);
	free(pki);
}

void doctor_node_local_free(struct doctor_node_local *l)
{
	free(l->node);
	free(l->dir);
	free(l->pki_dir);
	free(l->cert_path);
	free(l->cert_error);
	free(l->foreign_issuer);
	free(l->log_line);
	free(l->log_err);
	memset(l, 0, sizeof(*l));
}
