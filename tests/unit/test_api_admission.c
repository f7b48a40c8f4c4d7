/*
 * What a kubelet's credentials and a bootstrap token may do, in process:
 * NodeRestriction (noderestriction.c) and the Node authorizer (authz.c) for
 * a node (user system:node:node-1 in group system:nodes) — its own Node
 * only, no taint or restricted label changes, mirror pods bound to and
 * owned by itself that reach no other object, pods bound to it, its own
 * Lease in kube-node-lease, CSRs for its own name — and bootstrap-token
 * authentication (authn.c) against Secrets written here: the user and
 * groups a good token gets, and each way a token or its Secret is refused.
 *
 * The same rules are driven end to end in tests/e2e (test_apiserver.py's
 * node identity, NodeRestriction and bootstrap-token tests); these pin the
 * exact codes and texts of upstream Kubernetes 1.32, one behaviour per
 * test, on a fresh server each, so a regression names itself.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES "/api/v1/nodes"
#define PODS "/api/v1/namespaces/default/pods"
#define NODE_LEASES "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
#define CSRS "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define SECRETS "/api/v1/namespaces/kube-system/secrets"
#define SSR "/apis/authentication.k8s.io/v1/selfsubjectreviews"
#define SSR_BODY "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}"
#define SECRET16 "0123456789abcdef"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "admission");
	*state = e;
	return 0;
}

/* JSON with ' for " (testenv_json), as every body here is written. */
#define J testenv_json

/* A request with node's client certificate (CN system:node:<node>, O
 * system:nodes); content_type NULL: JSON. */
static struct testenv_reply as_node(struct testenv *e, const char *node, const char *method,
                                    const char *target, const char *content_type, const char *body)
{
	static const char *const nodes[] = {"system:nodes", NULL};
	const char *headers[] = {"Content-Type", content_type ? content_type : "application/json",
	                         NULL};
	char user[96];
	snprintf(user, sizeof(user), "system:node:%s", node);
	return testenv_do(e, &(struct apiserver_request){.method = method,
	                                                 .target = target,
	                                                 .headers = body ? headers : NULL,
	                                                 .body = body,
	                                                 .user = user,
	                                                 .groups = nodes});
}

/* A request with no certificate and Authorization: Bearer <token>. */
static struct testenv_reply with_token(struct testenv *e, const char *token, const char *method,
                                       const char *target, const char *body)
{
	char auth[128];
	snprintf(auth, sizeof(auth), "Bearer %s", token);
	return testenv_do(e, &(struct apiserver_request){
	                         .method = method,
	                         .target = target,
	                         .headers = (const char *[]){"Authorization", auth, "Content-Type",
	                                                     "application/json", NULL},
	                         .body = body});
}

#define admin_expect(e, method, target, body, code)                                                \
	testenv_expect_code(testenv_as_admin(e, method, target, NULL, body), code)

/* A Node registered by the admin; its uid, the caller's. */
static char *admin_node(struct testenv *e, const char *name)
{
	struct testenv_reply r =
	    testenv_as_admin(e, "POST", NODES, NULL, J("{'metadata':{'name':'%s'}}", name));
	char *uid;
	assert_int_equal(r.status, 201);
	uid = strdup(jx_str(r.body, "metadata.uid"));
	testenv_reply_free(&r);
	return uid;
}

static char *resource_version(struct testenv *e, const char *target)
{
	struct testenv_reply r = testenv_as_admin(e, "GET", target, NULL, NULL);
	char *rv;
	assert_int_equal(r.status, 200);
	rv = strdup(jx_str(r.body, "metadata.resourceVersion"));
	testenv_reply_free(&r);
	return rv;
}

/* ---- the Node object ----------------------------------------------------------- */

static void test_node_registers_only_itself(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	testenv_expect_status(
	    as_node(e, "node-1", "POST", NODES, NULL, J("{'metadata':{'name':'node-2'}}")), 403,
	    "Forbidden",
	    "nodes \"node-2\" is forbidden: node \"node-1\" is not allowed to modify node "
	    "\"node-2\"");
	admin_expect(e, "GET", NODES "/node-2", NULL, 404);

	r = as_node(e, "node-1", "POST", NODES, NULL, J("{'metadata':{'name':'node-1'}}"));
	assert_int_equal(r.status, 201);
	/* TaintNodesByCondition: not ready until its controller says so. */
	assert_string_equal(jx_str(json_array_get(jx_get(r.body, "spec.taints"), 0), "key"),
	                    "node.kubernetes.io/not-ready");
	testenv_reply_free(&r);
}

static void test_node_updates_only_itself(void **state)
{
	struct testenv *e = *state;
	const char *deny = "nodes \"node-2\" is forbidden: node \"node-1\" is not allowed to "
	                   "modify node \"node-2\"";
	char *rv;

	free(admin_node(e, "node-1"));
	free(admin_node(e, "node-2"));
	rv = testenv_keep(e, resource_version(e, NODES "/node-2"));
	/* The Node authorizer lets every node write nodes; NodeRestriction
	 * says which. */
	testenv_expect_status(as_node(e, "node-1", "PUT", NODES "/node-2", NULL,
	                              J("{'metadata':{'name':'node-2','labels':{'a':'b'}}}")),
	                      403, "Forbidden", deny);
	testenv_expect_status(as_node(e, "node-1", "PATCH", NODES "/node-2",
	                              "application/merge-patch+json",
	                              J("{'metadata':{'labels':{'a':'b'}}}")),
	                      403, "Forbidden", deny);
	testenv_expect_status(as_node(e, "node-1", "PATCH", NODES "/node-2/status",
	                              "application/merge-patch+json",
	                              J("{'status':{'phase':'Running'}}")),
	                      403, "Forbidden", deny);
	{
		char *now = testenv_keep(e, resource_version(e, NODES "/node-2"));
		assert_string_equal(now, rv);
	}

	testenv_expect_code(as_node(e, "node-1", "PATCH", NODES "/node-1",
	                            "application/merge-patch+json",
	                            J("{'metadata':{'labels':{'example.com/pool':'a'}}}")),
	                    200);
	testenv_expect_code(as_node(e, "node-1", "PATCH", NODES "/node-1/status",
	                            "application/merge-patch+json",
	                            J("{'status':{'phase':'Running'}}")),
	                    200);
}

/* A node that could drop its taints could steer workloads onto itself. */
static void test_node_may_not_modify_its_taints(void **state)
{
	struct testenv *e = *state;
	const char *deny =
	    "nodes \"node-1\" is forbidden: node \"node-1\" is not allowed to modify taints";
	struct testenv_reply r;
	json_t *node;
	char *text;

	testenv_expect_code(as_node(e, "node-1", "POST", NODES, NULL,
	                            J("{'metadata':{'name':'node-1'},'spec':{'taints':"
	                              "[{'key':'dedicated','value':'gpu','effect':"
	                              "'NoSchedule'}]}}")),
	                    201);
	testenv_expect_status(as_node(e, "node-1", "PATCH", NODES "/node-1",
	                              "application/merge-patch+json", J("{'spec':{'taints':[]}}")),
	                      403, "Forbidden", deny);
	testenv_expect_status(
	    as_node(e, "node-1", "PATCH", NODES "/node-1", "application/json-patch+json",
	            J("[{'op':'add','path':'/spec/taints/-','value':{'key':'k','effect':"
	              "'NoExecute'}}]")),
	    403, "Forbidden", deny);

	/* The same taints with another change are no change to taints. */
	r = as_node(e, "node-1", "GET", NODES "/node-1", NULL, NULL);
	assert_int_equal(r.status, 200);
	node = json_incref(r.body);
	testenv_reply_free(&r);
	json_object_set_new(json_object_get(node, "metadata"), "labels",
	                    json_pack("{s:s}", "example.com/x", "1"));
	text = json_dumps(node, JSON_COMPACT);
	r = as_node(e, "node-1", "PUT", NODES "/node-1", NULL, text);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(jx_get(r.body, "spec.taints")), 2);
	testenv_reply_free(&r);
	free(text);

	json_array_clear(jx_get(node, "spec.taints"));
	json_object_del(json_object_get(node, "metadata"), "resourceVersion");
	text = json_dumps(node, JSON_COMPACT);
	testenv_expect_status(as_node(e, "node-1", "PUT", NODES "/node-1", NULL, text), 403,
	                      "Forbidden", deny);
	free(text);
	json_decref(node);
	r = testenv_as_admin(e, "GET", NODES "/node-1", NULL, NULL);
	assert_int_equal(json_array_size(jx_get(r.body, "spec.taints")), 2);
	testenv_reply_free(&r);
}

/* upstream's getForbiddenLabels: the node-restriction.kubernetes.io
 * domain and any other kubernetes.io or k8s.io label the kubelet does not
 * set itself, listed sorted. Nothing is registered. */
static void test_node_may_not_set_restricted_labels_at_registration(void **state)
{
	struct testenv *e = *state;

	testenv_expect_status(
	    as_node(e, "node-1", "POST", NODES, NULL,
	            J("{'metadata':{'name':'node-1','labels':{"
	              "'node-restriction.kubernetes.io/pool':'a',"
	              "'team.node-restriction.kubernetes.io/x':'y',"
	              "'node-role.kubernetes.io/control-plane':'',"
	              "'kubernetes.io/role':'master',"
	              "'example.k8s.io/tier':'1',"
	              "'kubernetes.io/hostname':'node-1'}}}")),
	    403, "Forbidden",
	    "nodes \"node-1\" is forbidden: node \"node-1\" is not allowed to set the following "
	    "labels: example.k8s.io/tier, kubernetes.io/role, "
	    "node-restriction.kubernetes.io/pool, node-role.kubernetes.io/control-plane, "
	    "team.node-restriction.kubernetes.io/x");
	admin_expect(e, "GET", NODES "/node-1", NULL, 404);
}

/* The kubelet's own labels (kubelet's well_known_labels and the
 * kubelet.kubernetes.io and node.kubernetes.io domains), and any label
 * outside kubernetes.io and k8s.io. */
static void test_node_may_set_kubelet_labels_at_registration(void **state)
{
	static const char *const keys[] = {
	    "kubernetes.io/hostname",
	    "kubernetes.io/os",
	    "kubernetes.io/arch",
	    "beta.kubernetes.io/os",
	    "beta.kubernetes.io/arch",
	    "topology.kubernetes.io/zone",
	    "topology.kubernetes.io/region",
	    "failure-domain.beta.kubernetes.io/zone",
	    "node.kubernetes.io/instance-type",
	    "beta.kubernetes.io/instance-type",
	    "node.kubernetes.io/exclude-from-external-load-balancers",
	    "kubelet.kubernetes.io/custom",
	    "team.kubelet.kubernetes.io/x",
	    "example.com/pool"};
	struct testenv *e = *state;
	json_t *labels = json_object(), *node;
	struct testenv_reply r;
	char *text;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		json_object_set_new(labels, keys[i], json_string("v"));
	node = json_pack("{s:{s:s,s:o}}", "metadata", "name", "node-1", "labels", labels);
	text = json_dumps(node, JSON_COMPACT);
	r = as_node(e, "node-1", "POST", NODES, NULL, text);
	assert_int_equal(r.status, 201);
	assert_true(json_equal(jx_get(r.body, "metadata.labels"), labels));
	testenv_reply_free(&r);
	free(text);
	json_decref(node);
}

/* On update a restricted label may be neither added, changed nor
 * removed; upstream's text names no node here. */
static void test_node_may_not_change_restricted_labels_on_update(void **state)
{
	struct testenv *e = *state;

	free(admin_node(e, "node-1"));
	testenv_expect_status(
	    as_node(e, "node-1", "PATCH", NODES "/node-1", "application/merge-patch+json",
	            J("{'metadata':{'labels':{'node-role.kubernetes.io/control-plane':'',"
	              "'example.com/free':'yes'}}}")),
	    403, "Forbidden",
	    "nodes \"node-1\" is forbidden: is not allowed to modify labels: "
	    "node-role.kubernetes.io/control-plane");
	/* One the admin set: the node may not take it off. */
	testenv_expect_code(
	    testenv_as_admin(e, "PATCH", NODES "/node-1", "application/merge-patch+json",
	                     J("{'metadata':{'labels':{'node-restriction.kubernetes.io/pool':'a',"
	                       "'topology.kubernetes.io/zone':'z1'}}}")),
	    200);
	testenv_expect_status(
	    as_node(e, "node-1", "PATCH", NODES "/node-1", "application/merge-patch+json",
	            J("{'metadata':{'labels':{'node-restriction.kubernetes.io/pool':null}}}")),
	    403, "Forbidden",
	    "nodes \"node-1\" is forbidden: is not allowed to modify labels: "
	    "node-restriction.kubernetes.io/pool");
	/* Its own labels it may change and drop. */
	testenv_expect_code(as_node(e, "node-1", "PATCH", NODES "/node-1",
	                            "application/merge-patch+json",
	                            J("{'metadata':{'labels':{'topology.kubernetes.io/zone':"
	                              "null,'kubernetes.io/hostname':'node-1'}}}")),
	                    200);
}

/* ---- the Node authorizer ----------------------------------------------------------- */

static void test_node_reads_only_its_own_node(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	free(admin_node(e, "node-1"));
	free(admin_node(e, "node-2"));
	testenv_expect_code(as_node(e, "node-1", "GET", NODES "/node-1", NULL, NULL), 200);
	testenv_expect_status(
	    as_node(e, "node-1", "GET", NODES, NULL, NULL), 403, "Forbidden",
	    "nodes is forbidden: User \"system:node:node-1\" cannot list resource \"nodes\" in "
	    "API group \"\" at the cluster scope: node 'node-1' cannot read all nodes, only its "
	    "own Node object");
	/* AuthorizeNodeWithSelectors: a list of its own name only. */
	r = as_node(e, "node-1", "GET", NODES "?fieldSelector=metadata.name%3Dnode-1", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(jx_get(r.body, "items")), 1);
	assert_string_equal(jx_str(json_array_get(jx_get(r.body, "items"), 0), "metadata.name"),
	                    "node-1");
	testenv_reply_free(&r);
	testenv_expect_code(
	    as_node(e, "node-1", "GET", NODES "?fieldSelector=metadata.name%3Dnode-2", NULL, NULL),
	    403);
}

/* upstream's authorizeNode: a named read of another node says which
 * ("node '%s' cannot read '%s', only its own Node object"). */
static void test_node_reading_another_node_is_named_in_the_refusal(void **state)
{
	struct testenv *e = *state;

	free(admin_node(e, "node-2"));
	testenv_expect_status(
	    as_node(e, "node-1", "GET", NODES "/node-2", NULL, NULL), 403, "Forbidden",
	    "nodes \"node-2\" is forbidden: User \"system:node:node-1\" cannot get resource "
	    "\"nodes\" in API group \"\" at the cluster scope: node 'node-1' cannot read "
	    "'node-2', only its own Node object");
}

/* upstream: neither the Node authorizer (no opinion, no reason) nor the
 * system:node rules allow a node to delete a Node, its own included. */
static void test_node_may_not_delete_nodes(void **state)
{
	struct testenv *e = *state;

	free(admin_node(e, "node-1"));
	testenv_expect_status(
	    as_node(e, "node-1", "DELETE", NODES "/node-1", NULL, NULL), 403, "Forbidden",
	    "nodes \"node-1\" is forbidden: User \"system:node:node-1\" cannot delete resource "
	    "\"nodes\" in API group \"\" at the cluster scope");
	admin_expect(e, "GET", NODES "/node-1", NULL, 200);
}

/* upstream: nodes/status is update and patch for a node, not get (its
 * own Node it reads whole). */
static void test_node_may_not_read_its_node_status(void **state)
{
	struct testenv *e = *state;

	free(admin_node(e, "node-1"));
	testenv_expect_status(
	    as_node(e, "node-1", "GET", NODES "/node-1/status", NULL, NULL), 403, "Forbidden",
	    "nodes \"node-1\" is forbidden: User \"system:node:node-1\" cannot get resource "
	    "\"nodes/status\" in API group \"\" at the cluster scope");
}

/* upstream: a system:nodes member named "system:node:" is a node the
 * authorizer cannot identify. */
static void test_node_without_a_name_is_unknown(void **state)
{
	struct testenv *e = *state;

	testenv_expect_status(
	    as_node(e, "", "GET", NODES "/x", NULL, NULL), 403, "Forbidden",
	    "nodes \"x\" is forbidden: User \"system:node:\" cannot get resource \"nodes\" in "
	    "API group \"\" at the cluster scope: unknown node for user \"system:node:\"");
}

/* ---- mirror pods --------------------------------------------------------------------- */

/* A mirror pod: owners is the ownerReferences entries, node_name the
 * spec's nodeName member ("'nodeName':'node-1'," or none), extra more spec
 * members (",'volumes':[...]"); ' for " throughout. */
static const char *mirror_pod(const char *name, const char *owners, const char *node_name,
                              const char *extra)
{
	return J("{'metadata':{'name':'%s','annotations':{'kubernetes.io/config.mirror':'hash'},"
	         "'ownerReferences':[%s]},'spec':{%s'containers':[{'name':'c','image':'i'}]%s}}",
	         name, owners, node_name, extra);
}

static const char *owned_by(const char *node, const char *uid)
{
	return J("{'apiVersion':'v1','kind':'Node','name':'%s','uid':'%s','controller':true}", node,
	         uid);
}

static void test_node_creates_its_mirror_pod(void **state)
{
	struct testenv *e = *state;
	char *uid = testenv_keep(e, admin_node(e, "node-1"));
	struct testenv_reply r;

	r = as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod("static-web", owned_by("node-1", uid), "'nodeName':'node-1',", ""));
	assert_int_equal(r.status, 201);
	assert_string_equal(jx_str(r.body, "spec.nodeName"), "node-1");
	assert_string_equal(
	    jx_str(json_array_get(jx_get(r.body, "metadata.ownerReferences"), 0), "uid"), uid);
	testenv_reply_free(&r);
	/* The Node authorizer lets it read a pod bound to it. */
	testenv_expect_code(as_node(e, "node-1", "GET", PODS "/static-web", NULL, NULL), 200);
	testenv_expect_status(
	    as_node(e, "node-2", "DELETE", PODS "/static-web", NULL, NULL), 403, "Forbidden",
	    "pods \"static-web\" is forbidden: node \"node-2\" can only delete pods with "
	    "spec.nodeName set to itself");
	testenv_expect_code(as_node(e, "node-1", "DELETE", PODS "/static-web", NULL, NULL), 200);
}

static void test_node_creates_only_mirror_pods(void **state)
{
	struct testenv *e = *state;

	free(admin_node(e, "node-1"));
	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            J("{'metadata':{'name':'plain'},'spec':{'nodeName':'node-1','containers':"
	              "[{'name':'c','image':'i'}]}}")),
	    403, "Forbidden",
	    "pods \"plain\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" "
	    "annotation, node \"node-1\" can only create mirror pods");
	admin_expect(e, "GET", PODS "/plain", NULL, 404);
}

static void test_mirror_pod_is_bound_to_its_node(void **state)
{
	struct testenv *e = *state;
	char *uid = testenv_keep(e, admin_node(e, "node-1"));
	const char *deny = "pods \"m\" is forbidden: node \"node-1\" can only create pods with "
	                   "spec.nodeName set to itself";

	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod("m", owned_by("node-1", uid), "'nodeName':'node-2',", "")),
	    403, "Forbidden", deny);
	/* Unbound, the scheduler could put it anywhere. */
	testenv_expect_status(as_node(e, "node-1", "POST", PODS, NULL,
	                              mirror_pod("m", owned_by("node-1", uid), "", "")),
	                      403, "Forbidden", deny);
	admin_expect(e, "GET", PODS "/m", NULL, 404);
}

/* Exactly one ownerReference: its own Node (by uid), as controller,
 * without blockOwnerDeletion. */
static void test_mirror_pod_is_owned_by_its_node_alone(void **state)
{
	struct testenv *e = *state;
	char *uid = testenv_keep(e, admin_node(e, "node-1")),
	     *other = testenv_keep(e, admin_node(e, "node-2")), msg[256];
	const char *bound = "'nodeName':'node-1',";
	const char *not_itself =
	    "pods \"m\" is forbidden: node \"node-1\" can only create pods with "
	    "an owner reference set to itself";

	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL, mirror_pod("m", "", bound, "")), 403,
	    "Forbidden", not_itself);
	testenv_expect_status(as_node(e, "node-1", "POST", PODS, NULL,
	                              mirror_pod("m", owned_by("node-2", other), bound, "")),
	                      403, "Forbidden", not_itself);
	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod("m",
	                       J("{'apiVersion':'apps/v1','kind':'ReplicaSet','name':'node-1',"
	                         "'uid':'%s','controller':true}",
	                         uid),
	                       bound, "")),
	    403, "Forbidden", not_itself);
	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod("m", J("%s,%s", owned_by("node-1", uid), owned_by("node-2", other)),
	                       bound, "")),
	    403, "Forbidden",
	    "pods \"m\" is forbidden: node \"node-1\" can only create pods with a single owner "
	    "reference set to itself");
	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod(
	                "m", J("{'apiVersion':'v1','kind':'Node','name':'node-1','uid':'%s'}", uid),
	                bound, "")),
	    403, "Forbidden",
	    "pods \"m\" is forbidden: node \"node-1\" can only create pods with a controller "
	    "owner reference set to itself");
	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod("m",
	                       J("{'apiVersion':'v1','kind':'Node','name':'node-1','uid':'%s',"
	                         "'controller':true,'blockOwnerDeletion':true}",
	                         uid),
	                       bound, "")),
	    403, "Forbidden",
	    "pods \"m\" is forbidden: node \"node-1\" must not set blockOwnerDeletion on an "
	    "owner reference");
	snprintf(msg, sizeof(msg),
	         "pods \"m\" is forbidden: node node-1 UID mismatch: expected 0000 got %s", uid);
	testenv_expect_status(as_node(e, "node-1", "POST", PODS, NULL,
	                              mirror_pod("m", owned_by("node-1", "0000"), bound, "")),
	                      403, "Forbidden", msg);
	admin_expect(e, "GET", PODS "/m", NULL, 404);
}

/* A mirror pod reaches no object the node could not otherwise read: no
 * service account, secret, config map, trust bundle or claim. */
static void test_mirror_pod_references_no_other_object(void **state)
{
	static const struct {
		const char *extra, *what;
	} cases[] = {
	    {",'serviceAccountName':'builder'", "a service account"},
	    {",'volumes':[{'name':'v','secret':{'secretName':'s'}}]", "secrets"},
	    {",'volumes':[{'name':'v','projected':{'sources':[{'secret':{'name':'s'}}]}}]",
	     "secrets"},
	    {",'initContainers':[{'name':'i','image':'i','env':[{'name':'E','valueFrom':"
	     "{'secretKeyRef':{'name':'s','key':'k'}}}]}]",
	     "secrets"},
	    {",'volumes':[{'name':'v','configMap':{'name':'c'}}]", "configmaps"},
	    {",'initContainers':[{'name':'i','image':'i','envFrom':[{'configMapRef':"
	     "{'name':'c'}}]}]",
	     "configmaps"},
	    {",'volumes':[{'name':'v','projected':{'sources':[{'clusterTrustBundle':"
	     "{'name':'b','path':'p'}}]}}]",
	     "clustertrustbundles"},
	    {",'volumes':[{'name':'v','persistentVolumeClaim':{'claimName':'c'}}]",
	     "persistentvolumeclaims"},
	};
	struct testenv *e = *state;
	char *uid = testenv_keep(e, admin_node(e, "node-1")), msg[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(
		    msg, sizeof(msg),
		    "pods \"m\" is forbidden: node \"node-1\" can not create pods that reference "
		    "%s",
		    cases[i].what);
		testenv_expect_status(as_node(e, "node-1", "POST", PODS, NULL,
		                              mirror_pod("m", owned_by("node-1", uid),
		                                         "'nodeName':'node-1',", cases[i].extra)),
		                      403, "Forbidden", msg);
	}
	admin_expect(e, "GET", PODS "/m", NULL, 404);
}

/* upstream's VisitPodSecretNames counts spec.imagePullSecrets first: a
 * mirror pod naming a pull secret references a secret. */
static void test_mirror_pod_with_image_pull_secrets_is_refused(void **state)
{
	struct testenv *e = *state;
	char *uid = testenv_keep(e, admin_node(e, "node-1"));

	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS, NULL,
	            mirror_pod("m", owned_by("node-1", uid), "'nodeName':'node-1',",
	                       ",'imagePullSecrets':[{'name':'registry'}]")),
	    403, "Forbidden",
	    "pods \"m\" is forbidden: node \"node-1\" can not create pods that reference "
	    "secrets");
	admin_expect(e, "GET", PODS "/m", NULL, 404);
}

/* upstream returns the node lister's NotFound as it is (404, the lister's
 * resource "node") when the owning Node is not registered. */
static void test_mirror_pod_of_an_unregistered_node_is_not_found(void **state)
{
	struct testenv *e = *state;

	testenv_expect_status(
	    as_node(e, "node-3", "POST", PODS, NULL,
	            mirror_pod("m", owned_by("node-3", "u-3"), "'nodeName':'node-3',", "")),
	    404, "NotFound", "node \"node-3\" not found");
	admin_expect(e, "GET", PODS "/m", NULL, 404);
}

/* ---- pods bound to the node ----------------------------------------------------------- */

static void test_node_acts_only_on_pods_bound_to_it(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	admin_expect(e, "POST", PODS,
	             J("{'metadata':{'name':'theirs'},'spec':{'nodeName':'node-2',"
	               "'containers':[{'name':'c','image':'i'}]}}"),
	             201);
	admin_expect(e, "POST", PODS,
	             J("{'metadata':{'name':'mine'},'spec':{'nodeName':'node-1',"
	               "'containers':[{'name':'c','image':'i'}]}}"),
	             201);
	/* The object decides (its spec.nodeName), not only the request. */
	testenv_expect_code(as_node(e, "node-1", "GET", PODS "/mine", NULL, NULL), 200);
	testenv_expect_status(
	    as_node(e, "node-1", "GET", PODS "/theirs", NULL, NULL), 403, "Forbidden",
	    "pods \"theirs\" is forbidden: User \"system:node:node-1\" cannot get resource "
	    "\"pods\" in API group \"\" in the namespace \"default\": no relationship found "
	    "between node 'node-1' and this object");
	testenv_expect_status(
	    as_node(e, "node-1", "PUT", PODS "/theirs/status", NULL,
	            J("{'metadata':{'name':'theirs'},'status':{'phase':'Running'}}")),
	    403, "Forbidden",
	    "pods \"theirs\" is forbidden: node \"node-1\" can only update pod status for pods "
	    "with spec.nodeName set to itself");
	testenv_expect_status(
	    as_node(e, "node-1", "POST", PODS "/theirs/eviction", NULL,
	            J("{'apiVersion':'policy/v1','kind':'Eviction','metadata':{'name':"
	              "'theirs'}}")),
	    403, "Forbidden",
	    "pods \"theirs\" is forbidden: node node-1 can only evict pods with spec.nodeName "
	    "set to itself");
	testenv_expect_status(
	    as_node(e, "node-1", "DELETE", PODS "/theirs", NULL, NULL), 403, "Forbidden",
	    "pods \"theirs\" is forbidden: node \"node-1\" can only delete pods with "
	    "spec.nodeName set to itself");
	r = testenv_as_admin(e, "GET", PODS "/theirs", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_null(jx_get(r.body, "metadata.deletionTimestamp"));
	assert_string_equal(jx_str(r.body, "status.phase"), "Pending");
	testenv_reply_free(&r);

	r = as_node(e, "node-1", "PUT", PODS "/mine/status", NULL,
	            J("{'metadata':{'name':'mine'},'status':{'phase':'Running'}}"));
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "status.phase"), "Running");
	testenv_reply_free(&r);
}

/* upstream's authorizePod has no rule for updating a pod, even one bound
 * to the node: no opinion and no reason, so the refusal is RBAC's plain
 * text. */
static void test_node_may_not_update_pods(void **state)
{
	struct testenv *e = *state;

	admin_expect(e, "POST", PODS,
	             J("{'metadata':{'name':'mine'},'spec':{'nodeName':'node-1','containers':"
	               "[{'name':'c','image':'i'}]}}"),
	             201);
	testenv_expect_status(
	    as_node(e, "node-1", "PATCH", PODS "/mine", "application/merge-patch+json",
	            J("{'metadata':{'labels':{'a':'b'}}}")),
	    403, "Forbidden",
	    "pods \"mine\" is forbidden: User \"system:node:node-1\" cannot patch resource "
	    "\"pods\" in API group \"\" in the namespace \"default\"");
}

/* upstream's admitPodStatus compares the labels of the object sent with
 * the stored ones: a node may not relabel a pod through its status. */
static void test_node_may_not_relabel_a_pod_through_status(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	admin_expect(e, "POST", PODS,
	             J("{'metadata':{'name':'mine','labels':{'app':'web'}},'spec':"
	               "{'nodeName':'node-1','containers':[{'name':'c','image':"
	               "'i'}]}}"),
	             201);
	testenv_expect_status(
	    as_node(e, "node-1", "PUT", PODS "/mine/status", NULL,
	            J("{'metadata':{'name':'mine','labels':{'app':'db'}},'status':{'phase':"
	              "'Running'}}")),
	    403, "Forbidden",
	    "pods \"mine\" is forbidden: node \"node-1\" cannot update labels through pod "
	    "status");
	r = testenv_as_admin(e, "GET", PODS "/mine", NULL, NULL);
	assert_string_equal(jx_str(r.body, "metadata.labels.app"), "web");
	testenv_reply_free(&r);
}

/* ---- leases ------------------------------------------------------------------------------ */

static void test_node_writes_its_own_lease(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;

	testenv_expect_code(
	    as_node(e, "node-1", "POST", NODE_LEASES, NULL,
	            J("{'metadata':{'name':'node-1'},'spec':{'holderIdentity':'node-1',"
	              "'leaseDurationSeconds':40}}")),
	    201);
	testenv_expect_code(as_node(e, "node-1", "PUT", NODE_LEASES "/node-1", NULL,
	                            J("{'metadata':{'name':'node-1'},'spec':{"
	                              "'holderIdentity':'node-1','leaseDurationSeconds':"
	                              "20}}")),
	                    200);
	r = as_node(e, "node-1", "GET", NODE_LEASES "/node-1", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(jx_int(r.body, "spec.leaseDurationSeconds", 0), 20);
	testenv_reply_free(&r);
	/* The authorizer cannot see a create's name; NodeRestriction can. */
	testenv_expect_status(
	    as_node(e, "node-1", "POST", NODE_LEASES, NULL,
	            J("{'metadata':{'name':'node-2'},'spec':{'holderIdentity':'node-1'}}")),
	    403, "Forbidden",
	    "leases.coordination.k8s.io \"node-2\" is forbidden: can only access node lease "
	    "with the same name as the requesting node");
	admin_expect(e, "GET", NODE_LEASES "/node-2", NULL, 404);
	testenv_expect_code(as_node(e, "node-1", "DELETE", NODE_LEASES "/node-1", NULL, NULL), 200);
}

/* upstream's authorizeLease refuses before any lookup, with its reason:
 * another node's lease, a list, another namespace. */
static void test_node_lease_refusals_give_the_authorizers_reason(void **state)
{
	struct testenv *e = *state;
	const char *other =
	    "leases.coordination.k8s.io \"node-2\" is forbidden: User "
	    "\"system:node:node-1\" cannot %s resource \"leases\" in API group "
	    "\"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only "
	    "access node lease with the same name as the requesting node";
	char msg[512];

	admin_expect(e, "POST", NODE_LEASES,
	             J("{'metadata':{'name':'node-2'},'spec':{'holderIdentity':"
	               "'node-2'}}"),
	             201);
	snprintf(msg, sizeof(msg), other, "get");
	testenv_expect_status(as_node(e, "node-1", "GET", NODE_LEASES "/node-2", NULL, NULL), 403,
	                      "Forbidden", msg);
	snprintf(msg, sizeof(msg), other, "update");
	testenv_expect_status(
	    as_node(e, "node-1", "PUT", NODE_LEASES "/node-2", NULL,
	            J("{'metadata':{'name':'node-2'},'spec':{'holderIdentity':'node-1'}}")),
	    403, "Forbidden", msg);
	snprintf(msg, sizeof(msg), other, "delete");
	testenv_expect_status(as_node(e, "node-1", "DELETE", NODE_LEASES "/node-2", NULL, NULL),
	                      403, "Forbidden", msg);
	testenv_expect_status(
	    as_node(e, "node-1", "GET", NODE_LEASES, NULL, NULL), 403, "Forbidden",
	    "leases.coordination.k8s.io is forbidden: User \"system:node:node-1\" cannot list "
	    "resource \"leases\" in API group \"coordination.k8s.io\" in the namespace "
	    "\"kube-node-lease\": can only get, create, update, patch, or delete a node lease");
	testenv_expect_status(
	    as_node(e, "node-1", "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
	            NULL, J("{'metadata':{'name':'node-1'},'spec':{'holderIdentity':'node-1'}}")),
	    403, "Forbidden",
	    "leases.coordination.k8s.io is forbidden: User \"system:node:node-1\" cannot create "
	    "resource \"leases\" in API group \"coordination.k8s.io\" in the namespace "
	    "\"default\": can only access leases in the \"kube-node-lease\" system namespace");
}

/* ---- certificate signing requests ------------------------------------------------------ */

/* spec.request for a fresh key and CN (O system:nodes); the caller's. */
static char *csr_request(const char *cn)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	return testenv_csr_request(cn, orgs);
}

static const char *csr_object(const char *name, const char *request, const char *signer)
{
	return J("{'apiVersion':'certificates.k8s.io/v1','kind':'CertificateSigningRequest',"
	         "'metadata':{'name':'%s'},'spec':{'request':'%s','signerName':'%s','usages':"
	         "['digital signature','client auth']}}",
	         name, request, signer);
}

/* Since 1.31 (AllowInsecureKubeletCertificateSigningRequests off) a node
 * asks the kubelet signers only for its own name. */
static void test_node_csr_names_only_itself(void **state)
{
	struct testenv *e = *state;
	char *theirs = testenv_keep(e, csr_request("system:node:node-2")),
	     *mine = testenv_keep(e, csr_request("system:node:node-1"));
	const char *deny = "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: can "
	                   "only create a node CSR with CN=system:node:node-1";
	struct testenv_reply r;

	testenv_expect_status(
	    as_node(e, "node-1", "POST", CSRS, NULL,
	            csr_object("c", theirs, "kubernetes.io/kube-apiserver-client-kubelet")),
	    403, "Forbidden", deny);
	testenv_expect_status(as_node(e, "node-1", "POST", CSRS, NULL,
	                              csr_object("c", theirs, "kubernetes.io/kubelet-serving")),
	                      403, "Forbidden", deny);
	admin_expect(e, "GET", CSRS "/c", NULL, 404);

	r = as_node(e, "node-1", "POST", CSRS, NULL,
	            csr_object("c", mine, "kubernetes.io/kube-apiserver-client-kubelet"));
	assert_int_equal(r.status, 201);
	/* The requestor is who asked, whatever the body said. */
	assert_string_equal(jx_str(r.body, "spec.username"), "system:node:node-1");
	assert_string_equal(json_string_value(json_array_get(jx_get(r.body, "spec.groups"), 0)),
	                    "system:nodes");
	testenv_reply_free(&r);
	/* Other signers are not the node's identity: not checked. */
	testenv_expect_code(
	    as_node(e, "node-1", "POST", CSRS, NULL,
	            csr_object("other", theirs, "kubernetes.io/kube-apiserver-client")),
	    201);
}

/* ---- bootstrap tokens --------------------------------------------------------------------- */

/* The Secret bootstrap-token-<id> in kube-system with data (base64) for
 * each key given (value NULL: key absent). */
static void token_secret(struct testenv *e, const char *type, const char *id, const char *token_id,
                         const char *secret, const char *usage, const char *groups,
                         const char *expiration)
{
	const char *keys[] = {"token-id", "token-secret", "usage-bootstrap-authentication",
	                      "auth-extra-groups", "expiration"};
	const char *values[] = {token_id, secret, usage, groups, expiration};
	json_t *data = json_object(), *obj;
	char name[64], *text;

	for (size_t i = 0; i < 5; i++) {
		if (!values[i])
			continue;
		char *b = b64_encode(values[i], strlen(values[i]));
		json_object_set_new(data, keys[i], json_string(b));
		free(b);
	}
	snprintf(name, sizeof(name), "bootstrap-token-%s", id);
	obj = json_pack("{s:s,s:s,s:{s:s},s:s,s:o}", "apiVersion", "v1", "kind", "Secret",
	                "metadata", "name", name, "type", type, "data", data);
	text = json_dumps(obj, JSON_COMPACT);
	admin_expect(e, "POST", SECRETS, text, 201);
	free(text);
	json_decref(obj);
}

static void good_token_secret(struct testenv *e, const char *id, const char *groups,
                              const char *expiration)
{
	token_secret(e, "bootstrap.kubernetes.io/token", id, id, SECRET16, "true", groups,
	             expiration);
}

/* Who the server says token is (SelfSubjectReview): the userInfo, the
 * caller's; NULL after a 401. */
static json_t *who_is(struct testenv *e, const char *token)
{
	struct testenv_reply r = with_token(e, token, "POST", SSR, SSR_BODY);
	json_t *user;

	if (r.status != 201) {
		testenv_expect_status(r, 401, "Unauthorized", "Unauthorized");
		return NULL;
	}
	user = json_incref(jx_get(r.body, "status.userInfo"));
	testenv_reply_free(&r);
	assert_non_null(user);
	return user;
}

static void assert_refused(struct testenv *e, const char *token)
{
	json_t *user = who_is(e, token);
	if (user) {
		char *t = json_dumps(user, JSON_COMPACT);
		print_error("%s authenticated as %s\n", token, t);
		free(t);
	}
	assert_null(user);
}

/* system:bootstrap:<id>, system:bootstrappers and the token's extra
 * groups, sorted and deduplicated, then system:authenticated. */
static void test_bootstrap_token_authenticates_as_its_id(void **state)
{
	struct testenv *e = *state;
	json_t *user, *want;

	good_token_secret(e, "grp001",
	                  "system:bootstrappers:worker,system:bootstrappers:a,"
	                  "system:bootstrappers:worker",
	                  NULL);
	user = who_is(e, "grp001." SECRET16);
	assert_non_null(user);
	want = json_pack("{s:s,s:[s,s,s,s]}", "username", "system:bootstrap:grp001", "groups",
	                 "system:bootstrappers", "system:bootstrappers:a",
	                 "system:bootstrappers:worker", "system:authenticated");
	assert_true(json_equal(user, want));
	json_decref(want);
	json_decref(user);
}

/* The cluster's own token (pki/bootstrap-token, seeded as kubeadm's
 * Secret, in system:bootstrappers:kubeadm:default-node-token) is bound to
 * the node bootstrapper roles: it asks for certificates and nothing else. */
static void test_kubeadm_bootstrap_token_may_only_ask_for_certificates(void **state)
{
	struct testenv *e = *state;
	char path[160], token[64], user[64],
	    *request = testenv_keep(e, csr_request("system:node:newcomer"));
	FILE *f = fopen(testenv_path(e, "pki/bootstrap-token", path, sizeof(path)), "r");
	struct testenv_reply r;

	assert_non_null(f);
	assert_non_null(fgets(token, sizeof(token), f));
	fclose(f);
	token[strcspn(token, "\r\n")] = '\0';
	snprintf(user, sizeof(user), "system:bootstrap:%.6s", token);

	r = with_token(e, token, "POST", CSRS,
	               csr_object("node-csr-newcomer", request,
	                          "kubernetes.io/kube-apiserver-client-kubelet"));
	assert_int_equal(r.status, 201);
	assert_string_equal(jx_str(r.body, "spec.username"), user);
	assert_string_equal(json_string_value(json_array_get(jx_get(r.body, "spec.groups"), 1)),
	                    "system:bootstrappers:kubeadm:default-node-token");
	testenv_reply_free(&r);
	testenv_expect_code(with_token(e, token, "GET", CSRS "/node-csr-newcomer", NULL), 200);
	r = with_token(e, token, "GET", NODES, NULL);
	assert_int_equal(r.status, 403);
	{
		char want[256];
		snprintf(
		    want, sizeof(want),
		    "nodes is forbidden: User \"%s\" cannot list resource \"nodes\" in API group "
		    "\"\" at the cluster scope",
		    user);
		assert_string_equal(jx_str(r.body, "message"), want);
	}
	testenv_reply_free(&r);
}

/* upstream's group pattern, system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]:
 * one bad group and the token is nobody — never system:masters. */
static void test_bootstrap_token_groups_stay_inside_bootstrappers(void **state)
{
	struct testenv *e = *state;

	good_token_secret(e, "mstr01", "system:bootstrappers:ok,system:masters", NULL);
	good_token_secret(e, "upper1", "system:bootstrappers:Workers", NULL);
	good_token_secret(e, "trail1", "system:bootstrappers:", NULL);
	assert_refused(e, "mstr01." SECRET16);
	assert_refused(e, "upper1." SECRET16);
	assert_refused(e, "trail1." SECRET16);
	testenv_expect_status(with_token(e, "mstr01." SECRET16, "GET", SECRETS, NULL), 401,
	                      "Unauthorized", "Unauthorized");
}

static void test_expired_bootstrap_token_is_refused(void **state)
{
	struct testenv *e = *state;
	json_t *user;

	good_token_secret(e, "past01", NULL, "2000-01-01T00:00:00Z");
	good_token_secret(e, "futr01", NULL, "2100-01-01T00:00:00Z");
	/* Unparseable: treated as expired. */
	good_token_secret(e, "junk01", NULL, "next tuesday");
	assert_refused(e, "past01." SECRET16);
	assert_refused(e, "junk01." SECRET16);
	user = who_is(e, "futr01." SECRET16);
	assert_non_null(user);
	assert_string_equal(jx_str(user, "username"), "system:bootstrap:futr01");
	json_decref(user);
}

static void test_wrong_or_malformed_bootstrap_token_is_refused(void **state)
{
	static const char *const tokens[] = {
	    "good01.0123456789abcdee",  /* wrong secret */
	    "good01.0123456789abcdef0", /* 17-character secret */
	    "good01.0123456789abcde",   /* 15 */
	    "good1.0123456789abcdef",   /* 5-character id */
	    "GOOD01.0123456789abcdef",  /* upper case */
	    "good01:0123456789abcdef",  /* not a dot */
	    "good010123456789abcdef",   /* no separator */
	    "nope01.0123456789abcdef",  /* no such Secret */
	    "",
	};
	struct testenv *e = *state;
	json_t *user;

	good_token_secret(e, "good01", NULL, NULL);
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++)
		assert_refused(e, tokens[i]);
	user = who_is(e, "good01." SECRET16);
	assert_non_null(user);
	json_decref(user);
}

/* The Secret makes the token: its type, its token-id, its
 * usage-bootstrap-authentication, its namespace, and not being deleted. */
static void test_bootstrap_token_secret_must_be_usable(void **state)
{
	struct testenv *e = *state;

	token_secret(e, "Opaque", "opaq01", "opaq01", SECRET16, "true", NULL, NULL);
	token_secret(e, "bootstrap.kubernetes.io/token", "idmis1", "other1", SECRET16, "true", NULL,
	             NULL);
	token_secret(e, "bootstrap.kubernetes.io/token", "nouse1", "nouse1", SECRET16, NULL, NULL,
	             NULL);
	token_secret(e, "bootstrap.kubernetes.io/token", "false1", "false1", SECRET16, "false",
	             NULL, NULL);
	assert_refused(e, "opaq01." SECRET16);
	assert_refused(e, "idmis1." SECRET16);
	assert_refused(e, "nouse1." SECRET16);
	assert_refused(e, "false1." SECRET16);

	/* Outside kube-system a Secret of that name is no token. */
	{
		char *id = b64_encode("dflt01", 6), *sec = b64_encode(SECRET16, 16),
		     *yes = b64_encode("true", 4);
		admin_expect(e, "POST", "/api/v1/namespaces/default/secrets",
		             J("{'metadata':{'name':'bootstrap-token-dflt01'},'type':"
		               "'bootstrap.kubernetes.io/token','data':{'token-id':'%s',"
		               "'token-secret':'%s','usage-bootstrap-authentication':'%s'}}",
		               id, sec, yes),
		             201);
		free(id);
		free(sec);
		free(yes);
		assert_refused(e, "dflt01." SECRET16);
	}

	/* Being deleted (held by a finalizer): refused at once, when the token
	 * has not been used in the last 10 s (test_token_success_is_remembered). */
	good_token_secret(e, "dele01", NULL, NULL);
	testenv_expect_code(testenv_as_admin(e, "PATCH", SECRETS "/bootstrap-token-dele01",
	                                     "application/merge-patch+json",
	                                     J("{'metadata':{'finalizers':"
	                                       "['example.com/hold']}}")),
	                    200);
	admin_expect(e, "DELETE", SECRETS "/bootstrap-token-dele01", NULL, 200);
	assert_refused(e, "dele01." SECRET16);
}

/* upstream converts a v1 Secret's stringData into data on write (it is
 * write-only, never stored), so a token Secret written the way the
 * bootstrap-token documentation writes it, in stringData, authenticates. */
static void test_bootstrap_token_secret_from_string_data_authenticates(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	json_t *user;

	r = testenv_as_admin(e, "POST", SECRETS, NULL,
	                     J("{'apiVersion':'v1','kind':'Secret','metadata':{'name':"
	                       "'bootstrap-token-strd01'},'type':'bootstrap.kubernetes.io/token',"
	                       "'stringData':{'token-id':'strd01','token-secret':'%s',"
	                       "'usage-bootstrap-authentication':'true','auth-extra-groups':"
	                       "'system:bootstrappers:extra'}}",
	                       SECRET16));
	assert_int_equal(r.status, 201);
	testenv_reply_free(&r);
	user = who_is(e, "strd01." SECRET16);
	assert_non_null(user);
	assert_string_equal(jx_str(user, "username"), "system:bootstrap:strd01");
	json_decref(user);

	r = testenv_as_admin(e, "GET", SECRETS "/bootstrap-token-strd01", NULL, NULL);
	assert_null(jx_get(r.body, "stringData"));
	assert_string_equal(jx_str(r.body, "data.token-id"), "c3RyZDAx");
	testenv_reply_free(&r);
}

static int setup_virtual(void **state)
{
	clock_use_virtual(clock_now());
	return setup(state);
}

static int teardown_virtual(void **state)
{
	int rc = testenv_teardown(state);
	clock_use_real();
	return rc;
}

/*
 * Upstream's cache in front of the token authenticators
 * (TokenSuccessCacheTTL 10 s, TokenFailureCacheTTL 0): a token that
 * authenticated is taken for the same user for 10 s, its Secret deleted or
 * not; a refusal is not remembered.
 */
static void test_token_success_is_remembered(void **state)
{
	struct testenv *e = *state;
	json_t *user, *again;

	good_token_secret(e, "keep01", NULL, NULL);
	user = who_is(e, "keep01." SECRET16);
	assert_non_null(user);
	admin_expect(e, "DELETE", SECRETS "/bootstrap-token-keep01", NULL, 200);
	clock_advance(9 * NS_PER_SEC);
	again = who_is(e, "keep01." SECRET16);
	assert_non_null(again);
	assert_true(json_equal(user, again));
	json_decref(again);
	json_decref(user);
	clock_advance(1 * NS_PER_SEC);
	assert_refused(e, "keep01." SECRET16);

	/* Refused, then made good: good at once. */
	assert_refused(e, "late01." SECRET16);
	good_token_secret(e, "late01", NULL, NULL);
	user = who_is(e, "late01." SECRET16);
	assert_non_null(user);
	assert_string_equal(jx_str(user, "username"), "system:bootstrap:late01");
	json_decref(user);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, testenv_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_node_registers_only_itself),
	    T(test_node_updates_only_itself),
	    T(test_node_may_not_modify_its_taints),
	    T(test_node_may_not_set_restricted_labels_at_registration),
	    T(test_node_may_set_kubelet_labels_at_registration),
	    T(test_node_may_not_change_restricted_labels_on_update),
	    T(test_node_reads_only_its_own_node),
	    T(test_node_reading_another_node_is_named_in_the_refusal),
	    T(test_node_may_not_delete_nodes),
	    T(test_node_may_not_read_its_node_status),
	    T(test_node_without_a_name_is_unknown),
	    T(test_node_creates_its_mirror_pod),
	    T(test_node_creates_only_mirror_pods),
	    T(test_mirror_pod_is_bound_to_its_node),
	    T(test_mirror_pod_is_owned_by_its_node_alone),
	    T(test_mirror_pod_references_no_other_object),
	    T(test_mirror_pod_with_image_pull_secrets_is_refused),
	    T(test_mirror_pod_of_an_unregistered_node_is_not_found),
	    T(test_node_acts_only_on_pods_bound_to_it),
	    T(test_node_may_not_update_pods),
	    T(test_node_may_not_relabel_a_pod_through_status),
	    T(test_node_writes_its_own_lease),
	    T(test_node_lease_refusals_give_the_authorizers_reason),
	    T(test_node_csr_names_only_itself),
	    T(test_bootstrap_token_authenticates_as_its_id),
	    T(test_kubeadm_bootstrap_token_may_only_ask_for_certificates),
	    T(test_bootstrap_token_groups_stay_inside_bootstrappers),
	    T(test_expired_bootstrap_token_is_refused),
	    T(test_wrong_or_malformed_bootstrap_token_is_refused),
	    T(test_bootstrap_token_secret_must_be_usable),
	    T(test_bootstrap_token_secret_from_string_data_authenticates),
	    cmocka_unit_test_setup_teardown(test_token_success_is_remembered, setup_virtual,
	                                    teardown_virtual),
	};
#undef T
	/* The refusals log at error level (authn's "Unable to authenticate");
	 * CUBE_TEST_V shows them. */
	testenv_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
