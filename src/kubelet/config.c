/*
 * The kubelet's configuration: upstream's defaults, the KubeletConfiguration
 * file (kubelet.config.k8s.io/v1beta1) and the derived defaults.
 */
#include "kubelet/kubelet.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "base/yamljson.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kubelet_config_set(char **field, const char *v)
{
	free(*field);
	*field = NULL;
	if (v && !(*field = strdup(v)))
		abort();
}

void kubelet_config_init(struct kubelet_config *c)
{
	memset(c, 0, sizeof(*c));
	kubelet_config_set(&c->root_dir, "/var/lib/kubelet");
	kubelet_config_set(&c->node_ip, "127.0.0.1");
	kubelet_config_set(&c->address, "0.0.0.0");
	c->node_status_update_frequency_ns = 10 * NS_PER_SEC;
	c->node_status_report_frequency_ns = 5 * NS_PER_MIN;
	c->node_lease_duration_s = 40;
	c->max_pods = 110;
	c->port = 10250;
	c->pod_start_delay_ns = NS_PER_SEC;
	c->pod_stop_delay_ns = NS_PER_SEC;
	c->exit_after_ns = 5 * NS_PER_MIN;
}

/* The string fields, for freeing and copying them all alike. */
static const size_t string_fields[] = {
	offsetof(struct kubelet_config, node_name),
	offsetof(struct kubelet_config, root_dir),
	offsetof(struct kubelet_config, cert_dir),
	offsetof(struct kubelet_config, kubeconfig),
	offsetof(struct kubelet_config, bootstrap_kubeconfig),
	offsetof(struct kubelet_config, node_ip),
	offsetof(struct kubelet_config, source_address),
	offsetof(struct kubelet_config, address),
	offsetof(struct kubelet_config, tls_cert_file),
	offsetof(struct kubelet_config, tls_private_key_file),
	offsetof(struct kubelet_config, client_ca_file),
};
#define NSTRINGS (sizeof(string_fields) / sizeof(string_fields[0]))

static char **string_at(struct kubelet_config *c, size_t i)
{
	return (char **)((char *)c + string_fields[i]);
}

void kubelet_config_free(struct kubelet_config *c)
{
	for (size_t i = 0; i < NSTRINGS; i++)
		kubelet_config_set(string_at(c, i), NULL);
	strv_free(&c->node_labels);
	json_decref(c->register_with_taints);
	c->register_with_taints = NULL;
}

void kubelet_config_copy(struct kubelet_config *dst, const struct kubelet_config *src)
{
	*dst = *src;
	/* dst's fields still point at src's strings: duplicate them in place. */
	for (size_t i = 0; i < NSTRINGS; i++) {
		char **f = string_at(dst, i);
		if (*f && !(*f = strdup(*f)))
			abort();
	}
	dst->node_labels = (struct strv)STRV_INIT;
	for (size_t i = 0; i < src->node_labels.n; i++)
		strv_push(&dst->node_labels, src->node_labels.v[i]);
	dst->register_with_taints =
		src->register_with_taints ? json_deep_copy(src->register_with_taints) : NULL;
}

/* ---- the KubeletConfiguration file --------------------------------------------- */

static int want_bool(const json_t *v, const char *name, bool *out)
{
	if (!json_is_boolean(v))
		return err_set(ERR_INVALID, "%s: must be a boolean", name);
	*out = json_is_true(v);
	return 0;
}

static int want_int(const json_t *v, const char *name, int min, int *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > 1 << 30)
		return err_set(ERR_INVALID, "%s: must be an integer >= %d", name, min);
	*out = (int)json_integer_value(v);
	return 0;
}

static int want_duration(const json_t *v, const char *name, int64_t *out)
{
	if (!json_is_string(v))
		return err_set(ERR_INVALID, "%s: must be a duration string such as \"10s\"", name);
	if (duration_parse(json_string_value(v), out) < 0)
		return err_wrap(ERR_INVALID, "%s", name);
	if (*out <= 0)
		return err_set(ERR_INVALID, "%s: must be greater than zero", name);
	return 0;
}

static int want_string(const json_t *v, const char *name, char **out)
{
	if (!json_is_string(v))
		return err_set(ERR_INVALID, "%s: must be a string", name);
	kubelet_config_set(out, json_string_value(v));
	return 0;
}

static int want_taints(const json_t *v, json_t **out)
{
	static const char *const effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
	json_t *t;
	size_t i;

	if (!json_is_array(v))
		return err_set(ERR_INVALID, "registerWithTaints: must be a list");
	json_array_foreach(v, i, t)
	{
		const char *key = jx_str(t, "key"), *eff = jx_str(t, "effect");
		bool known = false;
		for (size_t e = 0; eff && e < 3; e++)
			known |= !strcmp(eff, effects[e]);
		if (!key || !*key)
			return err_set(ERR_INVALID, "registerWithTaints[%zu].key: Required value", i);
		if (!known)
			return err_set(ERR_INVALID,
				       "registerWithTaints[%zu].effect: Unsupported value: \"%s\"", i,
				       eff ? eff : "");
	}
	json_decref(*out);
	*out = json_deep_copy(v);
	return 0;
}

static int apply_field(struct kubelet_config *c, const char *k, const json_t *v)
{
	if (!strcmp(k, "rotateCertificates"))
		return want_bool(v, k, &c->rotate_certificates);
	if (!strcmp(k, "serverTLSBootstrap"))
		return want_bool(v, k, &c->server_tls_bootstrap);
	if (!strcmp(k, "selfHeal"))
		return want_bool(v, k, &c->self_heal);
	if (!strcmp(k, "certificateCondition"))
		return want_bool(v, k, &c->certificate_condition);
	if (!strcmp(k, "nodeStatusUpdateFrequency")) {
		c->update_frequency_set = true;
		return want_duration(v, k, &c->node_status_update_frequency_ns);
	}
	if (!strcmp(k, "nodeStatusReportFrequency")) {
		c->report_frequency_set = true;
		return want_duration(v, k, &c->node_status_report_frequency_ns);
	}
	if (!strcmp(k, "nodeLeaseDurationSeconds"))
		return want_int(v, k, 1, &c->node_lease_duration_s);
	if (!strcmp(k, "maxPods"))
		return want_int(v, k, 0, &c->max_pods);
	if (!strcmp(k, "port")) /* cube's: 0 no server, -1 any free port */
		return want_int(v, k, -1, &c->port);
	if (!strcmp(k, "address"))
		return want_string(v, k, &c->address);
	if (!strcmp(k, "tlsCertFile"))
		return want_string(v, k, &c->tls_cert_file);
	if (!strcmp(k, "tlsPrivateKeyFile"))
		return want_string(v, k, &c->tls_private_key_file);
	if (!strcmp(k, "authentication")) {
		const json_t *ca = jx_get(v, "x509.clientCAFile");
		return ca ? want_string(ca, "authentication.x509.clientCAFile", &c->client_ca_file)
			  : 0;
	}
	if (!strcmp(k, "registerWithTaints"))
		return want_taints(v, &c->register_with_taints);
	if (!strcmp(k, "apiVersion") || !strcmp(k, "kind"))
		return 0;
	/* Upstream's decoding is lenient too: say so and go on. */
	LOG_V(1, "\"KubeletConfiguration field not used by cube's kubelet\" field=\"%s\"", k);
	return 0;
}

int kubelet_config_apply(struct kubelet_config *c, const json_t *doc)
{
	const char *kind = jx_str(doc, "kind"), *av = jx_str(doc, "apiVersion"), *k;
	json_t *v;
	int rc;

	if (!json_is_object(doc))
		return err_set(ERR_INVALID, "a KubeletConfiguration must be a mapping");
	if (kind && strcmp(kind, "KubeletConfiguration"))
		return err_set(ERR_INVALID, "no kind \"%s\" is registered for version \"%s\"", kind,
			       av ? av : "");
	if (av && strcmp(av, "kubelet.config.k8s.io/v1beta1") &&
	    strcmp(av, "kubelet.config.k8s.io/v1"))
		return err_set(ERR_INVALID, "no kind \"KubeletConfiguration\" is registered for "
					    "version \"%s\"",
			       av);
	json_object_foreach((json_t *)doc, k, v) if ((rc = apply_field(c, k, v)) < 0) return rc;
	return 0;
}

json_t *kubelet_config_json(const struct kubelet_config *c)
{
	char upd[DURATION_BUF], rep[DURATION_BUF];
	json_t *doc = json_pack(
	    "{s:s,s:s,s:s,s:i,s:b,s:b,s:s,s:s,s:i,s:i}", "apiVersion",
	    "kubelet.config.k8s.io/v1beta1", "kind", "KubeletConfiguration", "address",
	    c->address ? c->address : "", "port", c->port, "rotateCertificates",
	    c->rotate_certificates, "serverTLSBootstrap", c->server_tls_bootstrap,
	    "nodeStatusUpdateFrequency", duration_format(c->node_status_update_frequency_ns, upd),
	    "nodeStatusReportFrequency", duration_format(c->node_status_report_frequency_ns, rep),
	    "nodeLeaseDurationSeconds", c->node_lease_duration_s, "maxPods", c->max_pods);

	if (c->tls_cert_file)
		json_object_set_new(doc, "tlsCertFile", json_string(c->tls_cert_file));
	if (c->tls_private_key_file)
		json_object_set_new(doc, "tlsPrivateKeyFile", json_string(c->tls_private_key_file));
	if (c->client_ca_file)
		json_object_set_new(doc, "authentication",
				    json_pack("{s:{s:s}, s:{s:b}}", "x509", "clientCAFile",
					      c->client_ca_file, "anonymous", "enabled", 0));
	if (json_array_size(c->register_with_taints))
		json_object_set_new(doc, "registerWithTaints", json_deep_copy(c->register_with_taints));
	/* cube's own fields (upstream's kubelet would ignore them). */
	json_object_set_new(doc, "selfHeal", json_boolean(c->self_heal));
	json_object_set_new(doc, "certificateCondition", json_boolean(c->certificate_condition));
	return doc;
}

int kubelet_config_write(const struct kubelet_config *c, const char *path)
{
	json_t *doc = kubelet_config_json(c);
	char *text = yj_emit(doc);
	/* Rewritten at every start: no fsync (a thousand nodes would wait on
	 * two thousand of them). */
	int rc = file_replace(path, text, strlen(text), 0644);

	free(text);
	json_decref(doc);
	return rc < 0 ? err_wrap(rc, "writing %s", path) : 0;
}

int kubelet_config_load(struct kubelet_config *c, const char *path)
{
	json_t *doc = yj_load_file(path);
	int rc;

	if (!doc)
		return err_wrap(ERR_INVALID, "failed to load Kubelet config file %s", path);
	rc = kubelet_config_apply(c, doc);
	json_decref(doc);
	if (rc < 0)
		return err_wrap(rc, "failed to load Kubelet config file %s", path);
	return 0;
}

/* Upstream's nodeutil.GetHostname: the host name, trimmed and lower-cased. */
static void default_node_name(struct kubelet_config *c)
{
	char host[256] = "localhost";

	if (c->node_name && *c->node_name)
		return;
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	kubelet_config_set(&c->node_name, host);
}

void kubelet_config_finish(struct kubelet_config *c)
{
	default_node_name(c);
	if (!c->cert_dir) {
		char *d = file_join(c->root_dir, "pki");
		kubelet_config_set(&c->cert_dir, d);
		free(d);
	}
	if (!c->kubeconfig) {
		char *d = file_join(c->root_dir, "kubelet.conf");
		kubelet_config_set(&c->kubeconfig, d);
		free(d);
	}
	if (c->update_frequency_set && !c->report_frequency_set)
		c->node_status_report_frequency_ns = c->node_status_update_frequency_ns;
}
