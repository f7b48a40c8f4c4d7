/*
 * NodeRestriction: what a kubelet (user system:node:<name> in group
 * system:nodes) may do to the objects the Node authorizer lets it reach,
 * as upstream's admission plugin (plugin/pkg/admission/noderestriction,
 * 1.32): only mirror pods bound to itself, owned by its Node and reaching
 * no service account, secret, config map, cluster trust bundle or claim;
 * status of its own pods without label changes; eviction of its own pods;
 * its own Node without new taints or restricted labels; its own Lease in
 * kube-node-lease; tokens only for pods bound to it; node CSRs only for its
 * own name. Refusals are 403 with upstream's texts:
 * `<resource> "<name>" is forbidden: <reason>`.
 *
 * Not here (cube serves none of them): persistentvolumeclaims/status,
 * csinodes, resourceslices. The 1.32 alpha ServiceAccountNodeAudience
 * restriction is not checked (upstream turned it off again in 1.32 patches).
 */
#include "apiserver/internal.h"

#include "api/status.h"

#include "pki/pki.h"

#include "base/b64.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/strv.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_NAMESPACE "kube-node-lease"
#define MIRROR_ANNOTATION "kubernetes.io/config.mirror"

/* upstream's admission.Operation for a verb */
static const char *operation(const struct req *r)
{
	if (is(r->verb, "create"))
		return "CREATE";
	if (is(r->verb, "delete") || is(r->verb, "deletecollection"))
		return "DELETE";
	return "UPDATE";
}

/* admission.NewForbidden: the request's name, else the object's name or
 * generateName, else "Unknown". */
__attribute__((format(printf, 3, 4))) static int refuse(struct req *r, const json_t *obj,
                                                        const char *fmt, ...)
{
	const char *name = r->name;
	char reason[768], q[128], msg[1024];
	va_list ap;

	if (!name || !*name)
		name = jx_str(obj, "metadata.name");
	if (!name || !*name)
		name = jx_str(obj, "metadata.generateName");
	if (!name || !*name)
		name = "Unknown";
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	resource_qualified(r->res, q, sizeof(q));
	snprintf(msg, sizeof(msg), "%s \"%s\" is forbidden: %s", q, name, reason);
	req_fail_status(r, status_failure(ERR_FORBIDDEN, msg, r->res->group, r->res->plural, name));
	return ERR_FORBIDDEN;
}

/* ---- pods ------------------------------------------------------------------ */

/* Does any container (init and ephemeral ones too) reach a source of kind
 * ("secret" or "configMap") through env or envFrom? */
static bool containers_reference(const json_t *spec, const char *kind)
{
	static const char *const lists[] = {"containers", "initContainers", "ephemeralContainers"};
	char ref[64], key[64];
	snprintf(ref, sizeof(ref), "%sRef", kind);
	snprintf(key, sizeof(key), "%sKeyRef", kind);
	for (size_t l = 0; l < 3; l++) {
		json_t *c, *e;
		size_t i, j;
		json_array_foreach(json_object_get(spec, lists[l]), i, c)
		{
			json_array_foreach(json_object_get(c, "envFrom"), j,
			                   e) if (json_object_get(e, ref)) return true;
			json_array_foreach(json_object_get(c, "env"), j,
			                   e) if (json_object_get(json_object_get(e, "valueFrom"),
			                                          key)) return true;
		}
	}
	return false;
}

/* Does a volume (or a projected volume's source) use field? */
static bool volumes_use(const json_t *spec, const char *field, const char *projected)
{
	json_t *v, *src;
	size_t i, j;
	json_array_foreach(json_object_get(spec, "volumes"), i, v)
	{
		if (field && json_object_get(v, field))
			return true;
		json_array_foreach(jx_get(v, "projected.sources"), j,
		                   src) if (projected &&
		                            json_object_get(src, projected)) return true;
	}
	return false;
}

/* upstream's VisitPodSecretNames: pull secrets, env, and every volume
 * source that names a Secret. */
static bool references_secrets(const json_t *spec)
{
	/* volume source → its member naming a Secret */
	static const char *const sources[][2] = {
	    {"azureFile", "secretName"}, {"cephfs", "secretRef"},   {"cinder", "secretRef"},
	    {"flexVolume", "secretRef"}, {"rbd", "secretRef"},      {"scaleIO", "secretRef"},
	    {"iscsi", "secretRef"},      {"storageos", "secretRef"}, {"csi", "nodePublishSecretRef"},
	};
	json_t *v;
	size_t i;

	if (json_array_size(json_object_get(spec, "imagePullSecrets")) ||
	    volumes_use(spec, "secret", "secret") || containers_reference(spec, "secret"))
		return true;
	json_array_foreach(json_object_get(spec, "volumes"), i, v)
	{
		for (size_t k = 0; k < sizeof(sources) / sizeof(sources[0]); k++) {
			json_t *m = json_object_get(json_object_get(v, sources[k][0]), sources[k][1]);
			if (m && (!json_is_string(m) || json_string_length(m)))
				return true;
		}
	}
	return false;
}

static int mirror_pod(struct req *r, const char *node, const json_t *pod)
{
	const json_t *refs = jx_get(pod, "metadata.ownerReferences"), *ref, *spec;
	const char *owner_uid;
	char key[300];
	json_t *n;

	if (!json_object_get(jx_get(pod, "metadata.annotations"), MIRROR_ANNOTATION))
		return refuse(r, pod,
		              "pod does not have \"%s\" annotation, node \"%s\" can only create "
		              "mirror pods",
		              MIRROR_ANNOTATION, node);
	if (!is(jx_str(pod, "spec.nodeName"), node))
		return refuse(r, pod,
		              "node \"%s\" can only create pods with spec.nodeName set to "
		              "itself",
		              node);
	if (json_array_size(refs) > 1)
		return refuse(r, pod,
		              "node \"%s\" can only create pods with a single owner reference set "
		              "to itself",
		              node);
	ref = json_array_get(refs, 0);
	if (!ref || !is(jx_str(ref, "apiVersion"), "v1") || !is(jx_str(ref, "kind"), "Node") ||
	    !is(jx_str(ref, "name"), node))
		return refuse(r, pod,
		              "node \"%s\" can only create pods with an owner reference set to "
		              "itself",
		              node);
	if (!json_is_true(json_object_get(ref, "controller")))
		return refuse(r, pod,
		              "node \"%s\" can only create pods with a controller owner reference "
		              "set to itself",
		              node);
	if (json_is_true(json_object_get(ref, "blockOwnerDeletion")))
		return refuse(r, pod,
		              "node \"%s\" must not set blockOwnerDeletion on an owner reference",
		              node);
	snprintf(key, sizeof(key), "/registry/nodes/%s", node);
	n = cache_get(r->s->cache, key);
	owner_uid = jx_str(ref, "uid");
	if (!n) {
		/* The node lister's NotFound, passed on as it is. */
		char msg[300];
		snprintf(msg, sizeof(msg), "node \"%s\" not found", node);
		req_fail_status(r, status_failure(ERR_NOTFOUND, msg, "", "node", node));
		return ERR_NOTFOUND;
	}
	if (!is(owner_uid, jx_str(n, "metadata.uid")))
		return refuse(r, pod, "node %s UID mismatch: expected %s got %s", node,
		              owner_uid ? owner_uid : "", jx_str(n, "metadata.uid") ?: "");
	spec = json_object_get(pod, "spec");
	if (json_string_length(json_object_get(spec, "serviceAccountName")))
		return refuse(r, pod,
		              "node \"%s\" can not create pods that reference a service "
		              "account",
		              node);
	if (references_secrets(spec))
		return refuse(r, pod, "node \"%s\" can not create pods that reference secrets",
		              node);
	if (volumes_use(spec, "configMap", "configMap") || containers_reference(spec, "configMap"))
		return refuse(r, pod, "node \"%s\" can not create pods that reference configmaps",
		              node);
	if (volumes_use(spec, NULL, "clusterTrustBundle"))
		return refuse(r, pod,
		              "node \"%s\" can not create pods that reference clustertrustbundles",
		              node);
	if (volumes_use(spec, "persistentVolumeClaim", NULL) ||
	    volumes_use(spec, "ephemeral", NULL))
		return refuse(
		    r, pod, "node \"%s\" can not create pods that reference persistentvolumeclaims",
		    node);
	if (json_array_size(json_object_get(spec, "resourceClaims")))
		return refuse(
		    r, pod, "node \"%s\" can not create pods that reference resourceclaims", node);
	return 0;
}

static int pods(struct req *r, const char *node, const json_t *obj, const json_t *old)
{
	const char *sub = r->sub ? r->sub->name : NULL, *op = operation(r);

	if (!sub) {
		if (is(op, "CREATE"))
			return mirror_pod(r, node, obj);
		if (is(op, "DELETE"))
			return is(jx_str(old, "spec.nodeName"), node)
			           ? 0
			           : refuse(r, old,
			                    "node \"%s\" can only delete pods with spec.nodeName "
			                    "set to itself",
			                    node);
		return refuse(r, obj,
		              "unexpected operation \"%s\", node \"%s\" can only create and delete "
		              "mirror pods",
		              op, node);
	}
	if (is(sub, "status")) {
		if (!is(op, "UPDATE"))
			return refuse(r, obj, "unexpected operation \"%s\"", op);
		if (!is(jx_str(old, "spec.nodeName"), node))
			return refuse(r, obj,
			              "node \"%s\" can only update pod status for pods with "
			              "spec.nodeName set to itself",
			              node);
		if (obj && !json_equal(jx_get(obj, "metadata.labels") ?: json_null(),
		                       jx_get(old, "metadata.labels") ?: json_null()))
			return refuse(r, obj, "node \"%s\" cannot update labels through pod status",
			              node);
		if (obj && !json_equal(jx_get(obj, "status.resourceClaimStatuses") ?: json_null(),
		                       jx_get(old, "status.resourceClaimStatuses") ?: json_null()))
			return refuse(r, obj, "node \"%s\" cannot update resource claim statues",
			              node);
		return 0;
	}
	if (is(sub, "eviction")) {
		if (!is(op, "CREATE"))
			return refuse(r, obj, "unexpected operation %s", op);
		return is(jx_str(old, "spec.nodeName"), node)
		           ? 0
		           : refuse(r, obj,
		                    "node %s can only evict pods with spec.nodeName set to itself",
		                    node);
	}
	return refuse(r, obj,
	              "unexpected pod subresource \"%s\", only 'status' and 'eviction' are allowed",
	              sub);
}

/* ---- nodes ----------------------------------------------------------------- */

static bool in_domain(const char *ns, const char *domain)
{
	size_t n = strlen(ns), m = strlen(domain);
	return is(ns, domain) || (n > m && ns[n - m - 1] == '.' && is(ns + n - m, domain));
}

/* The labels a kubelet may set on its Node (kubelet's well_known_labels). */
static bool kubelet_label(const char *key, const char *ns)
{
	static const char *const known[] = {
	    "kubernetes.io/hostname",
	    "topology.kubernetes.io/zone",
	    "topology.kubernetes.io/region",
	    "failure-domain.beta.kubernetes.io/zone",
	    "failure-domain.beta.kubernetes.io/region",
	    "beta.kubernetes.io/instance-type",
	    "node.kubernetes.io/instance-type",
	    "kubernetes.io/os",
	    "kubernetes.io/arch",
	    "beta.kubernetes.io/os",
	    "beta.kubernetes.io/arch",
	    NULL,
	};
	for (size_t i = 0; known[i]; i++)
		if (is(key, known[i]))
			return true;
	return in_domain(ns, "kubelet.kubernetes.io") || in_domain(ns, "node.kubernetes.io");
}

/* upstream's isForbiddenLabel */
static bool forbidden_label(const char *key)
{
	const char *slash = strchr(key, '/');
	char ns[256] = "";
	if (slash)
		snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
	if (in_domain(ns, "node-restriction.kubernetes.io"))
		return true;
	return (in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io")) &&
	       !kubelet_label(key, ns);
}

/* The restricted labels added, removed or changed between old and obj,
 * sorted and joined as upstream prints them. */
static char *restricted_changes(const json_t *obj, const json_t *old)
{
	const json_t *now = jx_get(obj, "metadata.labels"), *was = jx_get(old, "metadata.labels");
	struct strv bad = STRV_INIT;
	const char *k;
	json_t *v;
	char *out;

	json_object_foreach((json_t *)now, k, v) if (!json_equal(v, json_object_get(was, k)) &&
	                                             forbidden_label(k)) strv_push(&bad, k);
	json_object_foreach((json_t *)was, k, v) if (!json_object_get(now, k) && forbidden_label(k))
	    strv_push(&bad, k);
	if (!bad.n) {
		strv_free(&bad);
		return NULL;
	}
	strv_sort(&bad);
	out = strv_join(&bad, ", ");
	strv_free(&bad);
	return out;
}

static int nodes(struct req *r, const char *node, const json_t *obj, const json_t *old)
{
	const char *target = r->name ? r->name : jx_str(obj, "metadata.name"), *op = operation(r);
	char *bad;
	int rc = 0;

	if (!is(target, node))
		return refuse(r, obj, "node \"%s\" is not allowed to modify node \"%s\"", node,
		              target ? target : "");
	if (is(op, "CREATE")) {
		if (jx_get(obj, "spec.configSource") &&
		    !json_is_null(jx_get(obj, "spec.configSource")))
			return refuse(r, obj,
			              "node \"%s\" is not allowed to create pods with a non-nil "
			              "configSource",
			              node);
		if ((bad = restricted_changes(obj, NULL))) {
			rc = refuse(r, obj,
			            "node \"%s\" is not allowed to set the following labels: %s",
			            node, bad);
			free(bad);
		}
		return rc;
	}
	if (!is(op, "UPDATE") || !obj)
		return 0;
	{
		const json_t *cs = jx_get(obj, "spec.configSource");
		if (cs && !json_is_null(cs) &&
		    !json_equal((json_t *)cs, jx_get(old, "spec.configSource")))
			return refuse(r, obj,
			              "node \"%s\" is not allowed to update configSource to a new "
			              "non-nil configSource",
			              node);
	}
	if (!json_equal(jx_get(obj, "spec.taints") ?: json_null(),
	                jx_get(old, "spec.taints") ?: json_null()) &&
	    (json_array_size(jx_get(obj, "spec.taints")) ||
	     json_array_size(jx_get(old, "spec.taints"))))
		return refuse(r, obj, "node \"%s\" is not allowed to modify taints", node);
	if ((bad = restricted_changes(obj, old))) {
		rc = refuse(r, obj, "is not allowed to modify labels: %s", bad);
		free(bad);
	}
	return rc;
}

/* ---- service account tokens, leases, CSRs -------------------------------------- */

static int token(struct req *r, const char *node, const json_t *obj)
{
	const json_t *ref = jx_get(obj, "spec.boundObjectRef");
	const char *name = jx_str(ref, "name"), *uid = jx_str(ref, "uid");
	char key[320];
	json_t *pod;

	if (!ref || !is(jx_str(ref, "kind"), "Pod") || !is(jx_str(ref, "apiVersion"), "v1") ||
	    !name || !*name)
		return refuse(r, obj, "node requested token not bound to a pod");
	if (!uid || !*uid)
		return refuse(r, obj, "node requested token with a pod binding without a uid");
	snprintf(key, sizeof(key), "/registry/pods/%s/%s", r->ns, name);
	if (!(pod = cache_get(r->s->cache, key))) {
		char msg[400];
		snprintf(msg, sizeof(msg), "pods \"%s\" not found", name);
		req_fail(r, ERR_NOTFOUND, msg);
		return ERR_NOTFOUND;
	}
	if (!is(uid, jx_str(pod, "metadata.uid")))
		return refuse(
		    r, obj,
		    "the UID in the bound object reference (%s) does not match the UID in "
		    "record. The object might have been deleted and then recreated",
		    uid);
	if (!is(jx_str(pod, "spec.nodeName"), node))
		return refuse(r, obj,
		              "node requested token bound to a pod scheduled on a different "
		              "node");
	return 0;
}

/* The CN inside a CSR object's spec.request. */
static char *csr_cn(const json_t *obj)
{
	size_t n = 0;
	unsigned char *pem = b64_decode(jx_str(obj, "spec.request"), &n);
	X509_REQ *req = pem ? pki_csr_parse((char *)pem, n) : NULL;
	char *cn = NULL;

	if (req)
		pki_name_read(X509_REQ_get_subject_name(req), &cn, NULL);
	X509_REQ_free(req);
	free(pem);
	return cn;
}

static int csr(struct req *r, const char *node, const json_t *obj)
{
	const char *signer = jx_str(obj, "spec.signerName");
	char *cn, want[300];
	int rc = 0;

	if (!is(r->verb, "create") || r->sub ||
	    (!is(signer, "kubernetes.io/kube-apiserver-client-kubelet") &&
	     !is(signer, "kubernetes.io/kubelet-serving")))
		return 0;
	cn = csr_cn(obj);
	snprintf(want, sizeof(want), "system:node:%s", node);
	if (!is(cn, want))
		rc = refuse(r, obj, "can only create a node CSR with CN=system:node:%s", node);
	free(cn);
	return rc;
}

int node_restriction(struct req *r, json_t *obj, const json_t *old)
{
	const char *user = r->user.name, *res = r->res->plural, *node;

	if (!strv_has(&r->user.groups, "system:nodes") || !user ||
	    strncmp(user, "system:node:", 12))
		return 0;
	node = user + 12;
	if (!*node)
		return refuse(r, obj, "could not determine node from user \"%s\"", user);
	if (is(res, "pods"))
		return pods(r, node, obj, old);
	if (is(res, "nodes"))
		return nodes(r, node, obj, old);
	if (is(res, "serviceaccounts") && r->sub && is(r->sub->name, "token"))
		return is(r->verb, "create") ? token(r, node, obj) : 0;
	if (is(res, "leases")) {
		const char *name = r->name ? r->name : jx_str(obj, "metadata.name");
		if (!is(r->ns, LEASE_NAMESPACE))
			return refuse(r, obj,
			              "can only access leases in the \"%s\" system namespace",
			              LEASE_NAMESPACE);
		if (!is(name, node))
			return refuse(r, obj,
			              "can only access node lease with the same name as the "
			              "requesting node");
		return 0;
	}
	if (is(res, "certificatesigningrequests"))
		return csr(r, node, obj);
	return 0;
}
