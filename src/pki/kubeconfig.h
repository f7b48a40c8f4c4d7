/*
 * kubeconfig — read and write kubeconfig files as kubectl does.
 *
 * Loading follows current-context to one cluster and one user and gathers
 * what a client needs: the server URL, the CA, the client certificate and
 * key (embedded *-data, or file paths resolved against the kubeconfig's
 * directory and read at load time), or a bearer token. Saving writes YAML
 * (libyaml) with mode 0600, embedding data or naming files as the struct
 * says.
 *
 * Ownership: the struct owns every string; kubeconfig_free releases them.
 * Any thread.
 */
#ifndef CUBE_PKI_KUBECONFIG_H
#define CUBE_PKI_KUBECONFIG_H

#include <stddef.h>

struct kubeconfig {
	char *cluster, *user, *context, *namespace;
	char *server;
	/* PEM text; *_file is the path it came from (or is to be written as). */
	char *ca_data, *ca_file;
	char *cert_data, *cert_file;
	char *key_data, *key_file;
	char *token;
};

int kubeconfig_load(const char *path, struct kubeconfig *out);
/* The same, but a client certificate or key file that does not exist yet
 * is no error (cert_file set, cert_data NULL): the kubelet's kubeconfig
 * names kubelet-client-current.pem before the first certificate is there. */
int kubeconfig_load_lazy(const char *path, struct kubeconfig *out);
/* Files win over data when both are set: a *_file is written as a path. */
int kubeconfig_save(const char *path, const struct kubeconfig *kc);
/* The YAML kubeconfig_save writes (malloc'd; it may hold secrets: cleanse
 * it), or NULL. */
char *kubeconfig_render(const struct kubeconfig *kc);
void kubeconfig_free(struct kubeconfig *kc);

#endif
