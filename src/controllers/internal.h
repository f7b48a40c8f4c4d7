/*
 * What the CSR controllers share inside src/controllers: the manager they
 * hang off, CSR field helpers, and the per-key job bookkeeping that lets the
 * manager free work still waiting on the API server at shutdown.
 *
 * Threads: the loop's thread.
 */
#ifndef CUBE_CONTROLLERS_INTERNAL_H
#define CUBE_CONTROLLERS_INTERNAL_H

#include "controllers/controllers.h"

#include "client/events.h"
#include "client/informer.h"
#include "client/rest.h"
#include "client/workqueue.h"
#include "pki/pki.h"

#include "base/b64.h"
#include "base/hmap.h"

#include <jansson.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>

#define CSR_PATH "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define NODES_PATH "/api/v1/nodes"
#define LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

#define SIGNER_KUBELET_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define SIGNER_KUBELET_SERVING "kubernetes.io/kubelet-serving"
#define SIGNER_APISERVER_CLIENT "kubernetes.io/kube-apiserver-client"
#define SIGNER_LEGACY_UNKNOWN "kubernetes.io/legacy-unknown"

struct csrapproving;
struct csrsigning;
struct csrcleaner;
struct nodelifecycle;
struct tainteviction;
struct replicaset;
struct deployment;
struct statefulset;
struct endpoints;
struct podgc;
struct daemonset;
struct nsctl;
struct jobctl;
struct aggregation;

struct controller_manager {
	struct loop *loop;
	struct rest_client *rest; /* the manager's own identity: informers, credentials */
	bool use_sa_credentials;
	struct hmap sa_clients; /* service account name -> its client (credentials.c) */
	struct hmap informers; /* collection path -> struct informer*, shared */
	struct {
		char path[128];
		const char *(*key_of)(const json_t *);
		int index;
	} indexes[8]; /* every index asked for, to share them */
	int nindexes;
	struct metrics *metrics; /* the controllers' series (kube-controller-manager's /metrics) */
	/* kube-state-metrics' CSR series, kept by the CSR informer's handlers. */
	struct metric_family *m_csr_condition, *m_csr_created;
	struct secure_server *serving; /* --secure-port, or NULL */
	struct informer *csrs;
	struct timer *sync_wait; /* "Caches are synced" once the first list is in */
	bool synced_logged;
	int64_t signing_duration_ns, cleaner_period_ns;
	int workers;
	bool approve_kubelet_serving;
	char *signing_cert, *signing_key;
	struct csrapproving *approving;
	struct csrsigning *signing;
	struct csrcleaner *cleaner;
	struct nodelifecycle *nodelifecycle;
	struct tainteviction *tainteviction;
	struct replicaset *replicaset;
	struct deployment *deployment;
	struct statefulset *statefulset;
	struct endpoints *endpoints, *endpointslice;
	struct podgc *podgc;
	struct daemonset *daemonset;
	struct nsctl *namespaces;
	struct jobctl *jobs;
	struct aggregation *aggregation;
};

/* The manager's informer on a collection ("/api/v1/pods"), shared by every
 * controller that asks, with h added to its handlers (h may be NULL). Ask
 * in the constructor: the manager starts them all once every controller is
 * built, and frees them before the controllers. Nodes and node Leases are
 * kept as views of what the controllers read (manager.c says which): a
 * controller that writes a Node reads it whole from the API server first. */
struct informer *cm_informer(struct controller_manager *m, const char *path,
			     const struct informer_handlers *h);
/* Every shared informer has listed once (WaitForCacheSync). */
bool cm_informers_synced(const struct controller_manager *m);
/* The shared pod informer's index by spec.nodeName (made on first use). */
int cm_pods_by_node(struct controller_manager *m);
/* An index on the shared informer of path, made on first use of key_of. */
int cm_index(struct controller_manager *m, const char *path, const char *(*key_of)(const json_t *));

/* ---- what the workload controllers share (util.c) ------------------------ */

/* The ownerReference with controller: true, or NULL. */
const json_t *controller_ref(const json_t *obj);
/* Index functions: metadata.namespace; the controller ownerReference's uid. */
const char *index_namespace(const json_t *obj);
const char *index_controller_uid(const json_t *obj);
/* Not Succeeded or Failed, and not being deleted (FilterActivePods). */
bool pod_active(const json_t *pod);
/* Ready condition True; and for minReadySeconds as of now (IsPodAvailable). */
bool pod_ready(const json_t *pod);
bool pod_available(const json_t *pod, int64_t min_ready_s, int64_t now_ns);
/* {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true} */
json_t *owner_ref_to(const json_t *owner, const char *api_version, const char *kind);
/* upstream's ControllerRefManager patches (strategic merge, PATCH): adopt
 * obj by owner, or drop owner's reference; both carry obj's uid, so they
 * fail on an object recreated under the same name. */
#define SMP "application/strategic-merge-patch+json"
json_t *adopt_patch(const json_t *owner, const char *api_version, const char *kind,
		    const json_t *obj);
json_t *release_patch(const json_t *owner, const json_t *obj);
/* GetPodFromTemplate: labels, annotations, finalizers and spec of the
 * template, generateName "<owner>-", the controller ownerReference. */
json_t *pod_from_template(const json_t *tmpl, const json_t *owner, const char *api_version,
			  const char *kind);
/* The pod-template hashes (Deployment, DaemonSet, ControllerRevision):
 * fnv-32a (fnv-32 when a is false) over the canonical JSON of v, continued
 * from h (2166136261 to start), then over `extra` bytes; and the decimal
 * form of a hash in upstream's rand.SafeEncodeString alphabet. */
#define FNV32_OFFSET 2166136261u
uint32_t fnv32_json(const json_t *v, uint32_t h, bool a);
uint32_t fnv32_bytes(const void *extra, size_t n, uint32_t h, bool a);
void hash_encode(uint32_t h, char *out, size_t n);

/* "ns/name" of an object, into buf. */
const char *obj_key(const json_t *obj, char *buf, size_t n);

/* ---- the controllers (one file each) ------------------------------------- */

struct csrapproving *csrapproving_new(struct controller_manager *m);
void csrapproving_enqueue(struct csrapproving *c, const char *key);
void csrapproving_free(struct csrapproving *c);

/* NULL with err_msg() when the CA files cannot be read. */
struct csrsigning *csrsigning_new(struct controller_manager *m);
/* The signing pair loads (the CA and its key): 0, or the error csrsigning_new would meet. */
int csrsigning_check_ca(const char *cert_path, const char *key_path);
void csrsigning_enqueue(struct csrsigning *c, const char *key);
void csrsigning_free(struct csrsigning *c);
/* upstream's signer.duration: the cluster signing duration, or the request's
 * spec.expirationSeconds when shorter, never below 10 minutes. */
int64_t csrsigning_duration(int64_t cluster_ns, const json_t *csr);

struct csrcleaner *csrcleaner_new(struct controller_manager *m);
void csrcleaner_free(struct csrcleaner *c);

struct nodelifecycle *nodelifecycle_new(struct controller_manager *m, const struct nlc_opts *o);
/* Stop the informers and timers (before the rest client goes); free after. */
void nodelifecycle_stop(struct nodelifecycle *c);
void nodelifecycle_free(struct nodelifecycle *c);

struct tainteviction *tainteviction_new(struct controller_manager *m);
/* Stop the timers and writes (before the rest client goes); free after. */
void tainteviction_stop(struct tainteviction *c);
void tainteviction_free(struct tainteviction *c);

struct replicaset *replicaset_new(struct controller_manager *m);
void replicaset_stop(struct replicaset *c);
void replicaset_free(struct replicaset *c);

struct deployment *deployment_new(struct controller_manager *m);
void deployment_stop(struct deployment *c);
void deployment_free(struct deployment *c);

struct statefulset *statefulset_new(struct controller_manager *m);
void statefulset_stop(struct statefulset *c);
void statefulset_free(struct statefulset *c);

/* endpoints-controller and endpointslice-controller (one file). */
struct endpoints *endpoints_new(struct controller_manager *m);
struct endpoints *endpointslice_new(struct controller_manager *m);
void endpoints_stop(struct endpoints *c);
void endpoints_free(struct endpoints *c);

/* threshold: --terminated-pod-gc-threshold. Free after the rest client. */
struct podgc *podgc_new(struct controller_manager *m, int64_t threshold);
void podgc_stop(struct podgc *c);
void podgc_free(struct podgc *c);

struct daemonset *daemonset_new(struct controller_manager *m);
void daemonset_stop(struct daemonset *c);
void daemonset_free(struct daemonset *c);

/* namespace-controller: a Terminating namespace's content deleted, then
 * the "kubernetes" finalizer removed. */
struct nsctl *namespace_new(struct controller_manager *m);
void namespace_stop(struct nsctl *c);
void namespace_free(struct nsctl *c);

/* job-controller: a Job's pods run to completion, counted through the
 * job-tracking finalizer. */
struct jobctl *jobctl_new(struct controller_manager *m);
void jobctl_stop(struct jobctl *c);
void jobctl_free(struct jobctl *c);

struct aggregation *aggregation_new(struct controller_manager *m);
void aggregation_stop(struct aggregation *c);
void aggregation_free(struct aggregation *c);

/* ---- CSR helpers (manager.c) --------------------------------------------- */

/* spec.request decoded and parsed (signature checked); NULL with err_msg(). */
X509_REQ *csr_request(const json_t *csr);
/* upstream's ValidateKubeletClientCSR / ValidateKubeletServingCSR over a
 * parsed request and spec.usages: NULL when valid, else the error text (into
 * buf). `bad`: spec.usages held a name outside the API's list. */
const char *csr_check_kubelet_client(const struct pki_csr_info *info, unsigned usages, bool bad,
				     char *buf, size_t n);
const char *csr_check_kubelet_serving(const struct pki_csr_info *info, unsigned usages, bool bad,
				      char *buf, size_t n);
/* spec.usages as a pki_usage mask; *bad set when one is unknown. */
unsigned csr_usages(const json_t *csr, bool *bad);
/* A condition of this type is present (any status), as upstream's
 * GetCertApprovalCondition reads it. */
bool csr_has_condition(const json_t *csr, const char *type);
/* A condition of this type with status "True". */
bool csr_condition_true(const json_t *csr, const char *type);
/* Approved and not Denied: upstream's IsCertificateRequestApproved. */
bool csr_approved(const json_t *csr);
bool csr_issued(const json_t *csr);
/* A copy of csr with {type, "True", reason, message, lastUpdateTime and
 * lastTransitionTime = now} appended to status.conditions. */
json_t *csr_with_condition(const json_t *csr, const char *type, const char *reason,
			   const char *message);
/* status.certificate decoded to PEM text (malloc'd, NUL-terminated), or NULL. */
char *csr_certificate_pem(const json_t *csr, size_t *len);
/* The queue of upstream's NewCertificateController, which csrapproving and
 * csrsigning each make: "certificate" in the workqueue metrics, a CSR whose
 * sync fails retried after 0.2, 0.4, 0.8 s ... up to 1000 s. */
struct workqueue *csr_queue_new(struct controller_manager *m,
				void (*process)(void *arg, const char *key), void *arg);
/* credentials.c: the client a controller acts through — its service
 * account's (kube-system/<sa_name>, a TokenRequest token) with
 * --use-service-account-credentials, else the manager's own. Shared by the
 * controllers of one account; the manager's to free. */
struct rest_client *cm_client(struct controller_manager *m, const char *sa_name);
void cm_clients_free(struct controller_manager *m);

#define CM_USER_AGENT "kube-controller-manager/v1.32.0 (linux/amd64) kubernetes/cube"

/* "/apis/.../certificatesigningrequests/<name>[/<sub>]" into buf. */
const char *csr_path(char *buf, size_t n, const char *name, const char *sub);
/* The message of a failed API call: the Status message, or the transport
 * error, or "HTTP <status>". Into buf. */
const char *api_error(char *buf, size_t n, int status, const json_t *body, const char *err);
/* klog's utilruntime.HandleError line for a failed sync, or the V(4) line
 * for an ignorable one. */
void sync_failed(const char *key, const char *msg, bool ignorable);

/* ---- jobs: one key being processed, possibly waiting on the API ------------ */

struct job {
	struct job *prev, *next;
	struct workqueue *q;
	char *key;
	json_t *csr; /* a private copy */
	void *ctl;   /* the controller */
	void *aux;   /* the controller's per-job state, free()d with the job */
};

struct job_list {
	struct job *head;
};

/* q may be NULL for work that is not queue-driven (the cleaner's deletes). */
struct job *job_new(struct job_list *l, struct workqueue *q, const char *key, void *ctl);
/* Finish: forget or retry the key, tell the queue, free the job. */
void job_done(struct job_list *l, struct job *j, bool retry);
/* Free every job still waiting (shutdown: their callbacks never run). */
void job_list_free(struct job_list *l);

#endif
