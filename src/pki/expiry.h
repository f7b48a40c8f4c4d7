/*
 * expiry — which certificates a cluster holds, and when each one dies.
 *
 * Scans a cluster directory (cluster.h layout: the control-plane pairs, the
 * client certificates embedded in kubeconfigs, the CA) and kubelet
 * certificate directories (kubelet-client-current.pem and
 * kubelet-server-current.pem, following the symlink; a directory of node
 * directories as `cube up` makes is walked one level down). Each row says
 * when it expires and whether that is inside the warning window.
 *
 * etcd's certificates (etcd-server, etcd-peer, etcd-healthcheck-client,
 * apiserver-etcd-client, kubeadm's names) and the etcd-ca row are listed when
 * <dir>/pki/etcd exists, and checked against pki/etcd/ca.crt. kubeadm leaves
 * them out for an external etcd; cube has no config that says which, so the
 * directory does.
 *
 * Ownership: the report owns its rows; expiry_report_free releases them.
 * Any thread.
 */
#ifndef CUBE_PKI_EXPIRY_H
#define CUBE_PKI_EXPIRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum expiry_status {
	EXPIRY_OK,
	EXPIRY_WARNING, /* inside the warning window */
	EXPIRY_EXPIRED,
	EXPIRY_MISSING,
	EXPIRY_INVALID, /* unreadable, or not signed by its CA */
};

struct expiry_row {
	char *name;  /* "apiserver", "admin.conf", "etcd-server", "kubelet-client (node-1)",
		      * "ca", "etcd-ca" */
	char *path;  /* the file read (symlink target for kubelet certs) */
	char *ca;    /* "ca" or "etcd-ca" when verified against the CA that should have
		      * signed it (the etcd CA for the etcd rows), else the issuer's CN */
	char *error; /* why the row is INVALID or MISSING */
	bool is_ca;
	bool external; /* the CA's key is not on disk (kubeadm's "externally managed");
			* never for etcd-ca, as kubeadm */
	int64_t not_after_ns;
	enum expiry_status status;
};

struct expiry_report {
	struct expiry_row *rows;
	size_t n, cap;
};

/*
 * dir (may be NULL): a cluster directory. kubelet_dirs: NULL-terminated list
 * of kubelet cert dirs, root dirs or parents of node dirs (may be NULL).
 * now and warn_ns decide each row's status.
 */
int expiry_scan(const char *dir, const char *const *kubelet_dirs, int64_t now, int64_t warn_ns,
		struct expiry_report *out);
void expiry_report_free(struct expiry_report *r);
const char *expiry_status_name(enum expiry_status s);

#endif
