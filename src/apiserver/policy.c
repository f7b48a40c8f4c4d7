/*
 * Upstream's bootstrap RBAC policy (1.32), created and reconciled at every
 * start as the API server's rbac/bootstrap-roles post-start hook does:
 *
 *   - a missing role or binding is created ("created clusterrole.rbac...");
 *   - an existing one annotated rbac.authorization.kubernetes.io/autoupdate
 *     "false" is left alone, with a warning if it lacks what the policy has
 *     ("skipped reconcile-protected ...");
 *   - otherwise the permissions it lacks are added as simple rules (one
 *     verb, group, resource each, as upstream's Covers breaks them down), the
 *     policy's labels and annotations merged under its own, missing
 *     aggregation selectors and binding subjects appended — nothing a user
 *     added is taken away; a binding whose roleRef changed is reset to the
 *     policy's (deleted and created again).
 *
 * Then kubeadm's three bindings, once, on a cluster's first start (a
 * deleted one stays deleted: the seeds' "CSR not auto-approved").
 */
#include "apiserver/objects.h"

#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/strv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RBAC_GROUP "rbac.authorization.k8s.io"
#define AUTOUPDATE "rbac.authorization.kubernetes.io/autoupdate"

struct policy_role {
	const char *name;
	const char *const rules[24];
};

struct policy_binding {
	const char *name, *role;
	const char *const subjects[3];
};

struct policy_ns_role {
	const char *ns, *name;
	const char *const rules[8];
};

struct policy_ns_binding {
	const char *ns, *name, *role;
	const char *const subjects[3];
};

/* ---- the tables: upstream 1.32's bootstrap policy -------------------------------- */

/* plugin/pkg/auth/authorizer/rbac/bootstrappolicy (v1.32.0), transcribed: one
 * rule a string, "groups;resources;verbs[;names]" with comma-separated
 * lists ("" is the core group) or "@urls;verbs" for non-resource URLs. */
static const struct policy_role cluster_roles[] = {
    {"admin", {NULL}},
    {"cluster-admin", {"*;*;*", "@*;*"}},
    {"edit", {NULL}},
    {"system:aggregate-to-admin",
     {"authorization.k8s.io;localsubjectaccessreviews;create",
      "rbac.authorization.k8s.io;rolebindings,roles;create,delete,deletecollection,get,list,patch,"
      "update,watch"}},
    {"system:aggregate-to-edit",
     {";pods/attach,pods/exec,pods/portforward,pods/proxy,secrets,services/proxy;get,list,watch",
      ";serviceaccounts;impersonate",
      ";pods,pods/attach,pods/exec,pods/portforward,pods/"
      "proxy;create,delete,deletecollection,patch,update",
      ";pods/eviction;create",
      ";configmaps,events,persistentvolumeclaims,replicationcontrollers,replicationcontrollers/"
      "scale,secrets,serviceaccounts,services,services/"
      "proxy;create,delete,deletecollection,patch,update",
      ";serviceaccounts/token;create",
      "apps;daemonsets,deployments,deployments/rollback,deployments/scale,replicasets,replicasets/"
      "scale,statefulsets,statefulsets/scale;create,delete,deletecollection,patch,update",
      "autoscaling;horizontalpodautoscalers;create,delete,deletecollection,patch,update",
      "batch;cronjobs,jobs;create,delete,deletecollection,patch,update",
      "extensions;daemonsets,deployments,deployments/rollback,deployments/"
      "scale,ingresses,networkpolicies,replicasets,replicasets/scale,replicationcontrollers/"
      "scale;create,delete,deletecollection,patch,update",
      "policy;poddisruptionbudgets;create,delete,deletecollection,patch,update",
      "networking.k8s.io;ingresses,networkpolicies;create,delete,deletecollection,patch,update",
      "coordination.k8s.io;leases;create,delete,deletecollection,get,list,patch,update,watch"}},
    {"system:aggregate-to-view",
     {";configmaps,endpoints,persistentvolumeclaims,persistentvolumeclaims/"
      "status,pods,replicationcontrollers,replicationcontrollers/"
      "scale,serviceaccounts,services,services/status;get,list,watch",
      ";bindings,events,limitranges,namespaces/status,pods/log,pods/status,replicationcontrollers/"
      "status,resourcequotas,resourcequotas/status;get,list,watch",
      ";namespaces;get,list,watch", "discovery.k8s.io;endpointslices;get,list,watch",
      "apps;controllerrevisions,daemonsets,daemonsets/status,deployments,deployments/"
      "scale,deployments/status,replicasets,replicasets/scale,replicasets/"
      "status,statefulsets,statefulsets/scale,statefulsets/status;get,list,watch",
      "autoscaling;horizontalpodautoscalers,horizontalpodautoscalers/status;get,list,watch",
      "batch;cronjobs,cronjobs/status,jobs,jobs/status;get,list,watch",
      "extensions;daemonsets,daemonsets/status,deployments,deployments/scale,deployments/"
      "status,ingresses,ingresses/status,networkpolicies,replicasets,replicasets/scale,replicasets/"
      "status,replicationcontrollers/scale;get,list,watch",
      "policy;poddisruptionbudgets,poddisruptionbudgets/status;get,list,watch",
      "networking.k8s.io;ingresses,ingresses/status,networkpolicies;get,list,watch"}},
    {"system:auth-delegator",
     {"authentication.k8s.io;tokenreviews;create",
      "authorization.k8s.io;subjectaccessreviews;create"}},
    {"system:basic-user",
     {"authorization.k8s.io;selfsubjectaccessreviews,selfsubjectrulesreviews;create",
      "authentication.k8s.io;selfsubjectreviews;create"}},
    {"system:certificates.k8s.io:certificatesigningrequests:nodeclient",
     {"certificates.k8s.io;certificatesigningrequests/nodeclient;create"}},
    {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
     {"certificates.k8s.io;certificatesigningrequests/selfnodeclient;create"}},
    {"system:certificates.k8s.io:kube-apiserver-client-approver",
     {"certificates.k8s.io;signers;approve;kubernetes.io/kube-apiserver-client"}},
    {"system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
     {"certificates.k8s.io;signers;approve;kubernetes.io/kube-apiserver-client-kubelet"}},
    {"system:certificates.k8s.io:kubelet-serving-approver",
     {"certificates.k8s.io;signers;approve;kubernetes.io/kubelet-serving"}},
    {"system:certificates.k8s.io:legacy-unknown-approver",
     {"certificates.k8s.io;signers;approve;kubernetes.io/legacy-unknown"}},
    {"system:discovery",
     {"@/api,/api/*,/apis,/apis/*,/healthz,/livez,/openapi,/openapi/*,/readyz,/version,/version/"
      ";get"}},
    {"system:heapster",
     {";events,namespaces,nodes,pods;get,list,watch", "extensions;deployments;get,list,watch"}},
    {"system:kube-aggregator", {";endpoints,services;get,list,watch"}},
    {"system:kube-controller-manager",
     {",events.k8s.io;events;create,patch,update", "coordination.k8s.io;leases;create",
      "coordination.k8s.io;leases;get,update;kube-controller-manager",
      ";secrets,serviceaccounts;create", ";secrets;delete",
      ";configmaps,namespaces,secrets,serviceaccounts;get", ";secrets,serviceaccounts;update",
      "authentication.k8s.io;tokenreviews;create",
      "authorization.k8s.io;subjectaccessreviews;create", "*;*;list,watch",
      ";serviceaccounts/token;create"}},
    {"system:kube-dns", {";endpoints,services;list,watch"}},
    {"system:kube-scheduler",
     {",events.k8s.io;events;create,patch,update",
      "coordination.k8s.io;leases;create",
      "coordination.k8s.io;leases;get,list,update,watch;kube-scheduler",
      "coordination.k8s.io;leasecandidates;create,delete,deletecollection,get,list,patch,update,"
      "watch",
      ";nodes;get,list,watch",
      ";pods;delete,get,list,watch",
      ";bindings,pods/binding;create",
      ";pods/status;patch,update",
      ";replicationcontrollers,services;get,list,watch",
      "apps,extensions;replicasets;get,list,watch",
      "apps;statefulsets;get,list,watch",
      "policy;poddisruptionbudgets;get,list,watch",
      ";persistentvolumeclaims,persistentvolumes;get,list,watch",
      "authentication.k8s.io;tokenreviews;create",
      "authorization.k8s.io;subjectaccessreviews;create",
      "storage.k8s.io;csinodes;get,list,watch",
      "storage.k8s.io;volumeattachments;get,list,watch",
      ";namespaces;get,list,watch",
      "storage.k8s.io;csidrivers;get,list,watch",
      "storage.k8s.io;csistoragecapacities;get,list,watch"}},
    {"system:kubelet-api-admin",
     {";nodes;get,list,watch", ";nodes;proxy",
      ";nodes/log,nodes/metrics,nodes/proxy,nodes/stats;*"}},
    {"system:monitoring",
     {"@/healthz,/healthz/*,/livez,/livez/*,/metrics,/metrics/slis,/readyz,/readyz/*;get"}},
    {"system:node",
     {"authentication.k8s.io;tokenreviews;create",
      "authorization.k8s.io;localsubjectaccessreviews,subjectaccessreviews;create",
      ";services;get,list,watch",
      ";nodes;create,get,list,watch",
      ";nodes/status;patch,update",
      ";nodes;patch,update",
      ";events;create,patch,update",
      ";pods;get,list,watch",
      ";pods;create,delete",
      ";pods/status;patch,update",
      ";pods/eviction;create",
      ";configmaps,secrets;get,list,watch",
      ";persistentvolumeclaims,persistentvolumes;get",
      ";endpoints;get",
      "certificates.k8s.io;certificatesigningrequests;create,get,list,watch",
      "coordination.k8s.io;leases;create,delete,get,patch,update",
      "storage.k8s.io;volumeattachments;get",
      ";serviceaccounts/token;create",
      ";persistentvolumeclaims/status;get,patch,update",
      "storage.k8s.io;csidrivers;get,list,watch",
      "storage.k8s.io;csinodes;create,delete,get,patch,update",
      "node.k8s.io;runtimeclasses;get,list,watch"}},
    {"system:node-bootstrapper",
     {"certificates.k8s.io;certificatesigningrequests;create,get,list,watch"}},
    {"system:node-problem-detector",
     {";nodes;get", ";nodes/status;patch", ",events.k8s.io;events;create,patch,update"}},
    {"system:node-proxier",
     {";endpoints,services;list,watch", ";nodes;get,list,watch",
      ",events.k8s.io;events;create,patch,update", "discovery.k8s.io;endpointslices;list,watch"}},
    {"system:persistent-volume-provisioner",
     {";persistentvolumes;create,delete,get,list,watch",
      ";persistentvolumeclaims;get,list,update,watch",
      "storage.k8s.io;storageclasses;get,list,watch", ";events;watch",
      ",events.k8s.io;events;create,patch,update"}},
    {"system:public-info-viewer", {"@/healthz,/livez,/readyz,/version,/version/;get"}},
    {"system:service-account-issuer-discovery",
     {"@/.well-known/openid-configuration,/.well-known/openid-configuration/,/openid/v1/jwks,/"
      "openid/v1/jwks/;get"}},
    {"system:volume-scheduler",
     {";persistentvolumes;get,list,patch,update,watch",
      "storage.k8s.io;storageclasses;get,list,watch",
      ";persistentvolumeclaims;get,list,patch,update,watch"}},
    {"view", {NULL}},
    /* The controllers' own roles (controller-roles.yaml). */
    {"system:controller:certificate-controller",
     {"certificates.k8s.io;certificatesigningrequests;delete,get,list,watch",
      "certificates.k8s.io;certificatesigningrequests/approval,certificatesigningrequests/"
      "status;update",
      "certificates.k8s.io;signers;approve;kubernetes.io/kube-apiserver-client-kubelet",
      "certificates.k8s.io;signers;sign;kubernetes.io/kube-apiserver-client,kubernetes.io/"
      "kube-apiserver-client-kubelet,kubernetes.io/kubelet-serving,kubernetes.io/legacy-unknown",
      "authorization.k8s.io;subjectaccessreviews;create",
      ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:clusterrole-aggregation-controller",
     {"rbac.authorization.k8s.io;clusterroles;escalate,get,list,patch,update,watch"}},
    {"system:controller:daemon-set-controller",
     {"apps,extensions;daemonsets;get,list,watch", "apps,extensions;daemonsets/status;update",
      "apps,extensions;daemonsets/finalizers;update", ";nodes;list,watch",
      ";pods;create,delete,list,patch,watch", ";pods/binding;create",
      "apps;controllerrevisions;create,delete,get,list,patch,update,watch",
      ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:deployment-controller",
     {"apps,extensions;deployments;get,list,update,watch",
      "apps,extensions;deployments/status;update", "apps,extensions;deployments/finalizers;update",
      "apps,extensions;replicasets;create,delete,get,list,patch,update,watch",
      ";pods;get,list,update,watch", ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:endpoint-controller",
     {";pods,services;get,list,watch", ";endpoints;create,delete,get,list,update",
      ";endpoints/restricted;create", ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:endpointslice-controller",
     {";nodes,pods,services;get,list,watch", ";services/finalizers;update",
      "discovery.k8s.io;endpointslices;create,delete,get,list,update",
      ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:generic-garbage-collector",
     {"*;*;delete,get,list,patch,update,watch", ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:job-controller",
     {"batch;jobs;get,list,patch,update,watch", "batch;jobs/status;update",
      "batch;jobs/finalizers;update", ";pods;create,delete,list,patch,watch",
      ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:namespace-controller",
     {";namespaces;delete,get,list,watch", ";namespaces/finalize,namespaces/status;update",
      "*;*;delete,deletecollection,get,list"}},
    {"system:controller:node-controller",
     {";nodes;delete,get,list,patch,update", ";nodes/status;patch,update",
      ";pods/status;patch,update", ";pods;delete,get,list",
      ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:pod-garbage-collector",
     {";pods;delete,list,watch", ";nodes;get,list", ";pods/status;patch"}},
    {"system:controller:replicaset-controller",
     {"apps,extensions;replicasets;get,list,update,watch",
      "apps,extensions;replicasets/status;update", "apps,extensions;replicasets/finalizers;update",
      ";pods;create,delete,list,patch,watch", ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:root-ca-cert-publisher",
     {";configmaps;create,update", ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:service-account-controller",
     {";serviceaccounts;create", ",events.k8s.io;events;create,patch,update"}},
    {"system:controller:statefulset-controller",
     {";pods;list,watch", "apps;statefulsets;get,list,watch", "apps;statefulsets/status;update",
      "apps;statefulsets/finalizers;update", ";pods;create,delete,get,patch,update",
      "apps;controllerrevisions;create,delete,get,list,patch,update,watch",
      ";persistentvolumeclaims;create,get,list,watch", ",events.k8s.io;events;create,patch,update",
      ";persistentvolumeclaims;delete,update", ";pods/finalizers;update"}},
};

/* Labels besides kubernetes.io/bootstrapping, and aggregation selectors. */
static const struct {
	const char *role, *label, *aggregate;
} role_meta[] = {
    {"admin", NULL, "rbac.authorization.k8s.io/aggregate-to-admin"},
    {"edit", "rbac.authorization.k8s.io/aggregate-to-admin",
     "rbac.authorization.k8s.io/aggregate-to-edit"},
    {"view", "rbac.authorization.k8s.io/aggregate-to-edit",
     "rbac.authorization.k8s.io/aggregate-to-view"},
    {"system:aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-admin", NULL},
    {"system:aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-edit", NULL},
    {"system:aggregate-to-view", "rbac.authorization.k8s.io/aggregate-to-view", NULL},
};

/* Subjects "User:x", "Group:x" or "ServiceAccount:<ns>:<name>". */
static const struct policy_binding cluster_bindings[] = {
    {"cluster-admin", "cluster-admin", {"Group:system:masters"}},
    {"system:basic-user", "system:basic-user", {"Group:system:authenticated"}},
    {"system:discovery", "system:discovery", {"Group:system:authenticated"}},
    {"system:kube-controller-manager",
     "system:kube-controller-manager",
     {"User:system:kube-controller-manager"}},
    {"system:kube-dns", "system:kube-dns", {"ServiceAccount:kube-system:kube-dns"}},
    {"system:kube-scheduler", "system:kube-scheduler", {"User:system:kube-scheduler"}},
    {"system:monitoring", "system:monitoring", {"Group:system:monitoring"}},
    /* no subjects: the Node authorizer decides for nodes */
    {"system:node", "system:node", {NULL}},
    {"system:node-proxier", "system:node-proxier", {"User:system:kube-proxy"}},
    {"system:public-info-viewer",
     "system:public-info-viewer",
     {"Group:system:authenticated", "Group:system:unauthenticated"}},
    {"system:service-account-issuer-discovery",
     "system:service-account-issuer-discovery",
     {"Group:system:serviceaccounts"}},
    {"system:volume-scheduler", "system:volume-scheduler", {"User:system:kube-scheduler"}},
    {"system:controller:certificate-controller",
     "system:controller:certificate-controller",
     {"ServiceAccount:kube-system:certificate-controller"}},
    {"system:controller:clusterrole-aggregation-controller",
     "system:controller:clusterrole-aggregation-controller",
     {"ServiceAccount:kube-system:clusterrole-aggregation-controller"}},
    {"system:controller:daemon-set-controller",
     "system:controller:daemon-set-controller",
     {"ServiceAccount:kube-system:daemon-set-controller"}},
    {"system:controller:deployment-controller",
     "system:controller:deployment-controller",
     {"ServiceAccount:kube-system:deployment-controller"}},
    {"system:controller:endpoint-controller",
     "system:controller:endpoint-controller",
     {"ServiceAccount:kube-system:endpoint-controller"}},
    {"system:controller:endpointslice-controller",
     "system:controller:endpointslice-controller",
     {"ServiceAccount:kube-system:endpointslice-controller"}},
    {"system:controller:generic-garbage-collector",
     "system:controller:generic-garbage-collector",
     {"ServiceAccount:kube-system:generic-garbage-collector"}},
    {"system:controller:job-controller",
     "system:controller:job-controller",
     {"ServiceAccount:kube-system:job-controller"}},
    {"system:controller:namespace-controller",
     "system:controller:namespace-controller",
     {"ServiceAccount:kube-system:namespace-controller"}},
    {"system:controller:node-controller",
     "system:controller:node-controller",
     {"ServiceAccount:kube-system:node-controller"}},
    {"system:controller:pod-garbage-collector",
     "system:controller:pod-garbage-collector",
     {"ServiceAccount:kube-system:pod-garbage-collector"}},
    {"system:controller:replicaset-controller",
     "system:controller:replicaset-controller",
     {"ServiceAccount:kube-system:replicaset-controller"}},
    {"system:controller:root-ca-cert-publisher",
     "system:controller:root-ca-cert-publisher",
     {"ServiceAccount:kube-system:root-ca-cert-publisher"}},
    {"system:controller:service-account-controller",
     "system:controller:service-account-controller",
     {"ServiceAccount:kube-system:service-account-controller"}},
    {"system:controller:statefulset-controller",
     "system:controller:statefulset-controller",
     {"ServiceAccount:kube-system:statefulset-controller"}},
};

/* namespace-roles.yaml and namespace-role-bindings.yaml. */
static const struct policy_ns_role ns_roles[] = {
    {"kube-public",
     "system:controller:bootstrap-signer",
     {";configmaps;get,list,watch", ";configmaps;update;cluster-info",
      ",events.k8s.io;events;create,patch,update"}},
    {"kube-system",
     "extension-apiserver-authentication-reader",
     {";configmaps;get,list,watch;extension-apiserver-authentication"}},
    {"kube-system",
     "system::leader-locking-kube-controller-manager",
     {";configmaps;watch", ";configmaps;get,update;kube-controller-manager",
      "coordination.k8s.io;leases;create,get,list,update,watch",
      "coordination.k8s.io;leasecandidates;create,get,list,update,watch"}},
    {"kube-system",
     "system::leader-locking-kube-scheduler",
     {";configmaps;watch", ";configmaps;get,update;kube-scheduler",
      "coordination.k8s.io;leases;create,get,list,update,watch",
      "coordination.k8s.io;leasecandidates;create,get,list,update,watch"}},
    {"kube-system", "system:controller:bootstrap-signer", {";secrets;get,list,watch"}},
    {"kube-system", "system:controller:cloud-provider", {";configmaps;create,get,list,watch"}},
    {"kube-system",
     "system:controller:token-cleaner",
     {";secrets;delete,get,list,watch", ",events.k8s.io;events;create,patch,update"}},
};

/* Their roleRef is the Role of that name in the binding's namespace. */
static const struct policy_ns_binding ns_bindings[] = {
    {"kube-public",
     "system:controller:bootstrap-signer",
     "system:controller:bootstrap-signer",
     {"ServiceAccount:kube-system:bootstrap-signer"}},
    {"kube-system",
     "system::extension-apiserver-authentication-reader",
     "extension-apiserver-authentication-reader",
     {"User:system:kube-controller-manager", "User:system:kube-scheduler"}},
    {"kube-system",
     "system::leader-locking-kube-controller-manager",
     "system::leader-locking-kube-controller-manager",
     {"User:system:kube-controller-manager", "ServiceAccount:kube-system:kube-controller-manager",
      "ServiceAccount:kube-system:leader-election-controller"}},
    {"kube-system",
     "system::leader-locking-kube-scheduler",
     "system::leader-locking-kube-scheduler",
     {"User:system:kube-scheduler", "ServiceAccount:kube-system:kube-scheduler"}},
    {"kube-system",
     "system:controller:bootstrap-signer",
     "system:controller:bootstrap-signer",
     {"ServiceAccount:kube-system:bootstrap-signer"}},
    {"kube-system",
     "system:controller:cloud-provider",
     "system:controller:cloud-provider",
     {"ServiceAccount:kube-system:cloud-provider"}},
    {"kube-system",
     "system:controller:token-cleaner",
     "system:controller:token-cleaner",
     {"ServiceAccount:kube-system:token-cleaner"}},
};

/* ---- objects from the tables --------------------------------------------------- */

static json_t *split_list(const char *text, size_t n)
{
	json_t *out = json_array();
	const char *p = text, *end = text + n;
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
		json_array_append_new(out, json_stringn(p, len));
		if (!comma)
			break;
		p = comma + 1;
	}
	return out;
}

/* One rule from its string form. */
static json_t *policy_rule(const char *text)
{
	const char *f[4] = {NULL};
	size_t len[4] = {0}, n = 0;
	bool urls = *text == '@';
	const char *p = urls ? text + 1 : text;

	while (n < 4) {
		const char *semi = strchr(p, ';');
		f[n] = p;
		len[n] = semi ? (size_t)(semi - p) : strlen(p);
		n++;
		if (!semi)
			break;
		p = semi + 1;
	}
	if (urls)
		return json_pack("{s:o,s:o}", "verbs", split_list(f[1], len[1]), "nonResourceURLs",
		                 split_list(f[0], len[0]));
	json_t *rule = json_pack("{s:o,s:o,s:o}", "verbs", split_list(f[2], len[2]), "apiGroups",
	                         split_list(f[0], len[0]), "resources", split_list(f[1], len[1]));
	if (n == 4)
		json_object_set_new(rule, "resourceNames", split_list(f[3], len[3]));
	return rule;
}

static json_t *subject(const char *text)
{
	const char *colon = strchr(text, ':');
	if (!strncmp(text, "ServiceAccount:", 15)) {
		const char *ns = text + 15, *c2 = strchr(ns, ':');
		return json_pack("{s:s,s:s,s:s%}", "kind", "ServiceAccount", "name", c2 + 1,
		                 "namespace", ns, (size_t)(c2 - ns));
	}
	return json_pack("{s:s%,s:s,s:s}", "kind", text, (size_t)(colon - text), "apiGroup",
	                 RBAC_GROUP, "name", colon + 1);
}

static json_t *policy_object(const char *kind, const char *name, const char *ns, bool bootstrap)
{
	json_t *o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", RBAC_GROUP "/v1", "kind", kind,
	                      "metadata", "name", name);
	if (ns)
		jx_set_str(o, "metadata.namespace", ns);
	if (bootstrap) {
		jx_set(o, "metadata.annotations", json_pack("{s:s}", AUTOUPDATE, "true"));
		jx_set(o, "metadata.labels",
		       json_pack("{s:s}", "kubernetes.io/bootstrapping", "rbac-defaults"));
	}
	return o;
}

static json_t *role_object(const char *kind, const char *name, const char *ns,
                           const char *const *rules, size_t max)
{
	json_t *o = policy_object(kind, name, ns, true), *list = json_array();
	for (size_t k = 0; k < max && rules[k]; k++)
		json_array_append_new(list, policy_rule(rules[k]));
	json_object_set_new(o, "rules", list);
	for (size_t i = 0; !ns && i < sizeof(role_meta) / sizeof(role_meta[0]); i++) {
		if (strcmp(role_meta[i].role, name))
			continue;
		if (role_meta[i].label)
			json_object_set_new(
			    json_object_get(json_object_get(o, "metadata"), "labels"),
			    role_meta[i].label, json_string("true"));
		if (role_meta[i].aggregate) {
			json_t *sel =
			    json_pack("{s:{s:s}}", "matchLabels", role_meta[i].aggregate, "true");
			json_object_set_new(o, "aggregationRule",
			                    json_pack("{s:[o]}", "clusterRoleSelectors", sel));
			json_object_del(o, "rules"); /* the aggregation controller's to fill */
		}
	}
	return o;
}

static json_t *binding_object(const char *kind, const char *name, const char *ns,
                              const char *role_kind, const char *role, const char *const *subjects,
                              bool bootstrap)
{
	json_t *o = policy_object(kind, name, ns, bootstrap), *subs = json_array();
	json_object_set_new(
	    o, "roleRef",
	    json_pack("{s:s,s:s,s:s}", "apiGroup", RBAC_GROUP, "kind", role_kind, "name", role));
	for (size_t k = 0; k < 3 && subjects[k]; k++)
		json_array_append_new(subs, subject(subjects[k]));
	json_object_set_new(o, "subjects", subs);
	return o;
}

/* ---- reconciliation ------------------------------------------------------------------ */

/* Go's %v of a []rbacv1.PolicyRule or []rbacv1.Subject: what upstream's
 * reconcile lines print. */

/* The items joined by spaces inside open/close; frees items. */
static char *wrap_join(struct strv *items, const char *open, const char *close)
{
	char *joined = strv_join(items, " "), *out = str_printf("%s%s%s", open, joined, close);
	free(joined);
	strv_free(items);
	return out;
}

static void push_owned(struct strv *sv, char *s)
{
	strv_push(sv, s);
	free(s);
}

/* A []string: [a b]. */
static void go_list(struct strv *out, const json_t *list)
{
	struct strv items = STRV_INIT;
	json_t *v;
	size_t i;
	json_array_foreach(list, i, v) strv_push(&items, json_string_value(v) ?: "");
	push_owned(out, wrap_join(&items, "[", "]"));
}

static char *go_rules(const json_t *rules)
{
	static const char *const fields[] = {"verbs", "apiGroups", "resources", "resourceNames",
	                                     "nonResourceURLs"};
	struct strv all = STRV_INIT;
	json_t *r;
	size_t i;
	json_array_foreach(rules, i, r)
	{
		struct strv f = STRV_INIT;
		for (size_t k = 0; k < 5; k++)
			go_list(&f, json_object_get(r, fields[k]));
		push_owned(&all, wrap_join(&f, "{", "}"));
	}
	return wrap_join(&all, "[", "]");
}

static char *go_subjects(const json_t *subs)
{
	struct strv all = STRV_INIT;
	json_t *s;
	size_t i;
	json_array_foreach(subs, i, s)
	    strv_pushf(&all, "{%s %s %s %s}", jx_str(s, "kind") ?: "", jx_str(s, "apiGroup") ?: "",
	               jx_str(s, "name") ?: "", jx_str(s, "namespace") ?: "");
	return wrap_join(&all, "[", "]");
}

/* want's map under have's (the object's own values win); true if changed. */
static bool merge_map(json_t *meta, const char *field, const json_t *want)
{
	json_t *have = json_object_get(meta, field), *v;
	const char *k;
	bool changed = false;
	if (!json_is_object(want) || !json_object_size(want))
		return false;
	if (!json_is_object(have))
		json_object_set_new(meta, field, have = json_object());
	json_object_foreach((json_t *)want, k, v) if (!json_object_get(have, k))
	{
		json_object_set(have, k, v);
		changed = true;
	}
	return changed;
}

static bool merge_meta(json_t *obj, const json_t *want)
{
	json_t *meta = json_object_get(obj, "metadata");
	bool a = merge_map(meta, "labels", jx_get(want, "metadata.labels"));
	bool b = merge_map(meta, "annotations", jx_get(want, "metadata.annotations"));
	return a || b;
}

/* What the object lacks, appended to its list field; true if any. */
static bool append_missing(json_t *obj, const char *field, const json_t *missing)
{
	json_t *list = json_object_get(obj, field);
	if (!json_array_size(missing))
		return false;
	if (!json_is_array(list))
		json_object_set_new(obj, field, list = json_array());
	json_array_extend(list, (json_t *)missing);
	return true;
}

static bool is_protected(const json_t *obj)
{
	/* The key has dots: not a jx path. */
	const char *v =
	    json_string_value(json_object_get(jx_get(obj, "metadata.annotations"), AUTOUPDATE));
	return v && !strcmp(v, "false");
}

/* "clusterrole.rbac.authorization.k8s.io/admin" or "role... in kube-system". */
static const char *describe(char *buf, size_t n, const char *what, const json_t *obj)
{
	const char *ns = jx_str(obj, "metadata.namespace");
	snprintf(buf, n, "%s." RBAC_GROUP "/%s%s%s", what, jx_str(obj, "metadata.name"),
	         ns ? " in " : "", ns ? ns : "");
	return buf;
}

static char *key_of(const char *plural, const json_t *obj)
{
	return object_key(resource_find(RBAC_GROUP, "v1", plural),
	                  jx_str(obj, "metadata.namespace"), jx_str(obj, "metadata.name"));
}

static void write_or_log(struct apiserver *s, const char *key, json_t *obj, bool create)
{
	int rc = create ? cache_create(s->cache, key, obj, NULL, NULL)
	                : cache_update(s->cache, key, obj, NULL, NULL);
	if (rc < 0)
		LOG_ERROR("bootstrap policy %s: %s", key, err_msg());
}

/* want (stolen): a ClusterRole or Role of the policy. */
static void reconcile_role(struct apiserver *s, const char *plural, const char *what, json_t *want)
{
	char *key = key_of(plural, want), desc[256];
	const json_t *have = cache_get(s->cache, key);
	json_t *copy, *missing, *sel, *have_sels;
	bool changed;
	size_t i;

	describe(desc, sizeof(desc), what, want);
	if (!have) {
		seed_create(s, key, want);
		LOG_V(2, "created %s", desc);
		free(key);
		return;
	}
	missing =
	    rbac_missing_rules(json_object_get(have, "rules"), json_object_get(want, "rules"));
	if (is_protected(have)) {
		if (json_array_size(missing)) {
			char *m = go_rules(missing);
			LOG_WARN("skipped reconcile-protected %s with missing permissions: %s",
			         desc, m);
			free(m);
		}
		goto out;
	}
	copy = json_deep_copy(have);
	changed = merge_meta(copy, want);
	changed = append_missing(copy, "rules", missing) || changed;
	have_sels = jx_get(copy, "aggregationRule.clusterRoleSelectors");
	json_array_foreach(jx_get(want, "aggregationRule.clusterRoleSelectors"), i, sel)
	{
		json_t *h;
		size_t k;
		bool found = false;
		json_array_foreach(have_sels, k, h) if (json_equal(h, sel)) found = true;
		if (found)
			continue;
		if (!json_is_array(have_sels)) {
			json_object_set_new(copy, "aggregationRule",
			                    json_pack("{s:[]}", "clusterRoleSelectors"));
			have_sels = jx_get(copy, "aggregationRule.clusterRoleSelectors");
		}
		json_array_append(have_sels, sel);
		changed = true;
	}
	if (!changed) {
		json_decref(copy);
		goto out;
	}
	{
		char *m = go_rules(missing);
		LOG_V(2, "updated %s with additional permissions: %s", desc, m);
		free(m);
	}
	write_or_log(s, key, copy, false);
out:
	json_decref(missing);
	json_decref(want);
	free(key);
}

static bool subject_in(const json_t *list, const json_t *sub)
{
	json_t *s;
	size_t i;
	static const char *const f[] = {"kind", "apiGroup", "name", "namespace"};
	json_array_foreach(list, i, s)
	{
		bool same = true;
		for (size_t k = 0; k < 4; k++)
			same = same && !strcmp(jx_str(s, f[k]) ?: "", jx_str(sub, f[k]) ?: "");
		if (same)
			return true;
	}
	return false;
}

/* want (stolen): a ClusterRoleBinding or RoleBinding of the policy. */
static void reconcile_binding(struct apiserver *s, const char *plural, const char *what,
                              json_t *want)
{
	char *key = key_of(plural, want), desc[256], *m;
	const json_t *have = cache_get(s->cache, key);
	json_t *copy, *missing = json_array(), *sub;
	bool changed;
	size_t i;

	describe(desc, sizeof(desc), what, want);
	if (!have) {
		seed_create(s, key, json_incref(want));
		LOG_V(2, "created %s", desc);
		goto out;
	}
	json_array_foreach(json_object_get(want, "subjects"), i,
	                   sub) if (!subject_in(json_object_get(have, "subjects"), sub))
	    json_array_append(missing, sub);
	if (is_protected(have)) {
		if (json_array_size(missing)) {
			m = go_subjects(missing);
			LOG_WARN("skipped reconcile-protected %s with missing subjects: %s", desc,
			         m);
			free(m);
		}
		goto out;
	}
	if (!json_equal(json_object_get(have, "roleRef"), json_object_get(want, "roleRef"))) {
		/* roleRef cannot be updated: upstream resets the binding
		 * completely, deleting it and creating the policy's. */
		copy = json_deep_copy(want);
		if (cache_delete(s->cache, key, NULL, NULL) < 0)
			LOG_ERROR("bootstrap policy %s: %s", key, err_msg());
		seed_create(s, key, copy);
		LOG_V(2, "recreated %s", desc);
		goto out;
	}
	copy = json_deep_copy(have);
	changed = merge_meta(copy, want);
	changed = append_missing(copy, "subjects", missing) || changed;
	if (!changed) {
		json_decref(copy);
		goto out;
	}
	m = go_subjects(missing);
	LOG_V(2, "updated %s with additional subjects: %s", desc, m);
	free(m);
	write_or_log(s, key, copy, false);
out:
	json_decref(missing);
	json_decref(want);
	free(key);
}

#define NODECLIENT "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
#define SELFNODECLIENT "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
#define DEFAULT_NODE_TOKEN "Group:system:bootstrappers:kubeadm:default-node-token"

/* kubeadm init's bindings: made once, never reconciled. */
static void kubeadm_bindings(struct apiserver *s)
{
	static const struct policy_binding kubeadm[] = {
	    {"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", {DEFAULT_NODE_TOKEN}},
	    {"kubeadm:node-autoapprove-bootstrap", NODECLIENT, {DEFAULT_NODE_TOKEN}},
	    {"kubeadm:node-autoapprove-certificate-rotation",
	     SELFNODECLIENT,
	     {"Group:system:nodes"}},
	};
	for (size_t i = 0; i < sizeof(kubeadm) / sizeof(kubeadm[0]); i++) {
		json_t *b =
		    binding_object("ClusterRoleBinding", kubeadm[i].name, NULL, "ClusterRole",
		                   kubeadm[i].role, kubeadm[i].subjects, false);
		char *key = key_of("clusterrolebindings", b);
		if (!cache_get(s->cache, key))
			seed_create(s, key, json_incref(b));
		json_decref(b);
		free(key);
	}
}

const json_t *policy_node_rules(void)
{
	static json_t *rules;
	/* Built once, on the loop thread, and kept for the process's life. */
	if (!rules) {
		json_t *role = NULL;
		for (size_t i = 0; !role && i < sizeof(cluster_roles) / sizeof(cluster_roles[0]);
		     i++)
			if (!strcmp(cluster_roles[i].name, "system:node"))
				role = role_object("ClusterRole", "system:node", NULL,
				                   cluster_roles[i].rules, 24);
		rules = json_incref(json_object_get(role, "rules"));
		json_decref(role);
	}
	return rules;
}

void policy_reconcile(struct apiserver *s, bool first_start)
{
	for (size_t i = 0; i < sizeof(cluster_roles) / sizeof(cluster_roles[0]); i++)
		reconcile_role(s, "clusterroles", "clusterrole",
		               role_object("ClusterRole", cluster_roles[i].name, NULL,
		                           cluster_roles[i].rules, 24));
	for (size_t i = 0; i < sizeof(cluster_bindings) / sizeof(cluster_bindings[0]); i++)
		reconcile_binding(s, "clusterrolebindings", "clusterrolebinding",
		                  binding_object("ClusterRoleBinding", cluster_bindings[i].name,
		                                 NULL, "ClusterRole", cluster_bindings[i].role,
		                                 cluster_bindings[i].subjects, true));
	for (size_t i = 0; i < sizeof(ns_roles) / sizeof(ns_roles[0]); i++)
		reconcile_role(
		    s, "roles", "role",
		    role_object("Role", ns_roles[i].name, ns_roles[i].ns, ns_roles[i].rules, 8));
	for (size_t i = 0; i < sizeof(ns_bindings) / sizeof(ns_bindings[0]); i++)
		reconcile_binding(s, "rolebindings", "rolebinding",
		                  binding_object("RoleBinding", ns_bindings[i].name,
		                                 ns_bindings[i].ns, "Role", ns_bindings[i].role,
		                                 ns_bindings[i].subjects, true));
	if (first_start)
		kubeadm_bindings(s);
}
