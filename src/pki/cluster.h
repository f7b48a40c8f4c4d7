/*
 * cluster — a cluster's PKI on disk, laid out as kubeadm lays it out:
 *
 *   <dir>/pki/ca.crt, ca.key                     the cluster CA
 *   <dir>/pki/apiserver.crt, .key                serving: localhost, 127.0.0.1,
 *                                                the hostname, kubernetes.default...
 *   <dir>/pki/apiserver-kubelet-client.crt, .key O=kubeadm:cluster-admins
 *   <dir>/admin.conf                             CN=kubernetes-admin, O=system:masters
 *   <dir>/controller-manager.conf                CN=system:kube-controller-manager
 *   <dir>/scheduler.conf                         CN=system:kube-scheduler
 *   <dir>/bootstrap-kubelet.conf                 bootstrap token user
 *   <dir>/pki/sa.key, sa.pub                     service account token signing pair
 *   <dir>/pki/bootstrap-token                    "<id>.<secret>", 0600
 *
 * and, with opts.etcd, kubeadm's PKI for a local (stacked) etcd, under a CA
 * of its own that nothing else trusts:
 *
 *   <dir>/pki/etcd/ca.crt, ca.key                CN=etcd-ca
 *   <dir>/pki/etcd/server.crt, .key              CN=<node>; server and client auth;
 *   <dir>/pki/etcd/peer.crt, .key                  <node>, localhost, 127.0.0.1, ::1
 *                                                  and etcd_sans
 *   <dir>/pki/etcd/healthcheck-client.crt, .key  CN=kube-etcd-healthcheck-client
 *   <dir>/pki/apiserver-etcd-client.crt, .key    CN=kube-apiserver-etcd-client
 *
 * (no O= on the two clients: kubeadm dropped system:masters from them.)
 *
 * cluster_pki_init keeps every file that exists and is still valid for the
 * request (right CA, right subject, SANs and extended usages, not expired)
 * and regenerates the rest; force regenerates all. A new CA invalidates
 * everything it signed, and only that: a new etcd CA leaves the cluster CA's
 * certificates alone, and the other way round.
 *
 * Any thread; one writer per directory.
 */
#ifndef CUBE_PKI_CLUSTER_H
#define CUBE_PKI_CLUSTER_H

#include "pki/pki.h"

#include <stdbool.h>
#include <stdint.h>

#define CLUSTER_CA_VALIDITY (10 * 365 * 24 * 3600 * INT64_C(1000000000))
#define CLUSTER_CERT_VALIDITY (365 * 24 * 3600 * INT64_C(1000000000))

struct cluster_pki_opts {
	const char *dir;
	const char *cluster_name;          /* "kubernetes" */
	const char *server;                /* "https://127.0.0.1:6443" */
	const char *const *apiserver_sans; /* extra DNS names or IPs */
	/* kubeadm's nodeRegistration.name: the etcd server and peer
	 * certificates' CN and a DNS name of theirs and of the API server's.
	 * NULL: the hostname, lower-cased, as kubeadm defaults it. */
	const char *node_name;
	/* Write the etcd PKI above. false is kubeadm's external etcd, whose
	 * certificates are someone else's to make. */
	bool etcd;
	/* Extra DNS names or IPs for etcd/server and etcd/peer (kubeadm's
	 * etcd.local.serverCertSANs and peerCertSANs, here one list). */
	const char *const *etcd_sans;
	enum pki_key_type key_type;
	int64_t ca_validity_ns;
	int64_t validity_ns;
	bool force;
	/* Called with each progress line ("[certs] Generating \"ca\" ..."). */
	void (*say)(void *arg, const char *line);
	void *say_arg;
};

int cluster_pki_init(const struct cluster_pki_opts *o);

/* Paths inside a cluster dir (malloc'd): "pki/ca.crt" → "<dir>/pki/ca.crt". */
char *cluster_path(const char *dir, const char *rel);

#endif
