/*
 * The review's smaller items (issue 10), in process: what a client gets
 * for requests that are tentative, odd or hostile, and that nothing is
 * stored behind its back.
 *
 *   - dry runs (?dryRun=All) of create, update, each patch type, a
 *     namespace delete and an eviction answer as the real request would
 *     and store nothing (test_dryrun.c has the object and collection
 *     deletes and the DeleteOptions-body eviction of an unbound pod);
 *   - a delete held by a finalizer answers 200 with the object, marked
 *     (202 only for the deprecated orphanDependents: false);
 *   - CertificateSigningRequest names: any name upstream takes, except
 *     what its storage key refuses (a '/', '%', "." or "..") — and a '/'
 *     in the URL is another path; an update keeps the requestor fields;
 *   - who may not create learns nothing from validation or admission;
 *   - JSON beyond the parsers' depth, a JSON patch copy bomb, too many
 *     patch operations, an object beyond etcd's 1.5 MiB and a body beyond
 *     3 MiB (test_limits.c drives these over a socket): refused as
 *     upstream refuses them, the stored object unchanged, the server
 *     answering on.
 *
 * Exact codes, reasons and texts are upstream Kubernetes 1.32's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testenv.h"

#include "base/jx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMS "/api/v1/namespaces/default/configmaps"
#define PODS "/api/v1/namespaces/default/pods"
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"
#define CSRS "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define MERGE "application/merge-patch+json"
#define JSON_PATCH "application/json-patch+json"

static int setup(void **state)
{
	struct testenv *e = calloc(1, sizeof(*e));
	testenv_start_inproc(e, "misuse");
	*state = e;
	return 0;
}

/* JSON with ' for " (testenv_json), as most bodies here are written. */
#define J testenv_json

static struct testenv_reply admin(struct testenv *e, const char *method, const char *target,
                                  const char *content_type, const char *body)
{
	return testenv_as_admin(e, method, target, content_type, body);
}

/* The stored object at target (admin GET), the caller's; NULL on 404. */
static json_t *stored(struct testenv *e, const char *target)
{
	struct testenv_reply r = admin(e, "GET", target, NULL, NULL);
	json_t *obj = r.status == 200 ? json_incref(r.body) : NULL;
	if (r.status != 200 && r.status != 404)
		fail_msg("GET %s: %d %s", target, r.status, r.text);
	testenv_reply_free(&r);
	return obj;
}

/* The revision a list of target is at: moves with every write anywhere. */
static char *list_revision(struct testenv *e, const char *target)
{
	json_t *list = stored(e, target);
	char *rv;
	assert_non_null(list);
	rv = strdup(jx_str(list, "metadata.resourceVersion"));
	json_decref(list);
	return rv;
}

static void make_cm(struct testenv *e, const char *name, const char *value)
{
	testenv_expect_code(admin(e, "POST", CMS, NULL,
	                          J("{'metadata':{'name':'%s'},'data':{'k':'%s'}}", name, value)),
	                    201);
}

/* The configmap is as make_cm left it: value, resourceVersion rv. */
static void assert_cm_unchanged(struct testenv *e, const char *name, const char *value,
                                const char *rv)
{
	char path[128];
	json_t *cm;
	snprintf(path, sizeof(path), CMS "/%s", name);
	cm = stored(e, path);
	assert_non_null(cm);
	assert_string_equal(jx_str(cm, "data.k"), value);
	assert_string_equal(jx_str(cm, "metadata.resourceVersion"), rv);
	assert_null(jx_get(cm, "metadata.deletionTimestamp"));
	json_decref(cm);
}

static char *cm_rv(struct testenv *e, const char *name)
{
	char path[128];
	json_t *cm;
	char *rv;
	snprintf(path, sizeof(path), CMS "/%s", name);
	cm = stored(e, path);
	assert_non_null(cm);
	rv = strdup(jx_str(cm, "metadata.resourceVersion"));
	json_decref(cm);
	return rv;
}

/* ---- dry runs ---------------------------------------------------------------------------- */

/* The answer is the object a create would make — defaulted, named,
 * validated, admitted — with no resourceVersion, since nothing was
 * written; the name stays free. */
static void test_dry_run_create_stores_nothing(void **state)
{
	struct testenv *e = *state;
	char *before = testenv_keep(e, list_revision(e, CMS)), *after;
	struct testenv_reply r;

	r = admin(e, "POST", CMS "?dryRun=All", NULL,
	          J("{'metadata':{'name':'dry'},'data':{'k':'v'}}"));
	assert_int_equal(r.status, 201);
	assert_string_equal(jx_str(r.body, "metadata.name"), "dry");
	assert_non_null(jx_str(r.body, "metadata.uid"));
	assert_null(jx_get(r.body, "metadata.resourceVersion"));
	testenv_reply_free(&r);
	/* generateName is resolved as a create would. */
	r = admin(e, "POST", CMS "?dryRun=All", NULL, J("{'metadata':{'generateName':'gen-'}}"));
	assert_int_equal(r.status, 201);
	assert_int_equal(strlen(jx_str(r.body, "metadata.name")), 9);
	testenv_reply_free(&r);
	/* Validation and admission still run. */
	testenv_expect_status(
	    admin(e, "POST", CMS "?dryRun=All", NULL, J("{'metadata':{'name':'Bad_Name'}}")), 422,
	    "Invalid", NULL);
	testenv_expect_status(admin(e, "POST", "/api/v1/namespaces/nope/configmaps?dryRun=All",
	                            NULL, J("{'metadata':{'name':'x'}}")),
	                      404, "NotFound", "namespaces \"nope\" not found");

	after = testenv_keep(e, list_revision(e, CMS));
	assert_string_equal(after, before);
	assert_null(stored(e, CMS "/dry"));
	make_cm(e, "dry", "real");
}

/* upstream's DryRunnableStorage.Create looks the key up: a dry-run create
 * of a name that exists is the 409 the real create gets. */
static void test_dry_run_create_of_an_existing_name_conflicts(void **state)
{
	struct testenv *e = *state;
	char *rv;

	make_cm(e, "cm", "v");
	rv = testenv_keep(e, cm_rv(e, "cm"));
	testenv_expect_status(admin(e, "POST", CMS "?dryRun=All", NULL,
	                            J("{'metadata':{'name':'cm'},'data':{'k':'other'}}")),
	                      409, "AlreadyExists", "configmaps \"cm\" already exists");
	assert_cm_unchanged(e, "cm", "v", rv);
}

static void test_dry_run_update_stores_nothing(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	char *rv;

	make_cm(e, "cm", "v");
	rv = testenv_keep(e, cm_rv(e, "cm"));
	r = admin(e, "PUT", CMS "/cm?dryRun=All", NULL,
	          J("{'metadata':{'name':'cm','resourceVersion':'%s'},'data':{'k':'new'}}", rv));
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "data.k"), "new");
	/* Not written: no new revision. */
	assert_string_equal(jx_str(r.body, "metadata.resourceVersion"), rv);
	testenv_reply_free(&r);
	/* Its preconditions are checked as a real update's. */
	testenv_expect_status(
	    admin(e, "PUT", CMS "/cm?dryRun=All", NULL,
	          J("{'metadata':{'name':'cm','resourceVersion':'1'},'data':{'k':'new'}}")),
	    409, "Conflict",
	    "Operation cannot be fulfilled on configmaps \"cm\": the object has been modified; "
	    "please apply your changes to the latest version and try again");
	assert_cm_unchanged(e, "cm", "v", rv);
}

/* Each patch type, and server-side apply to an existing and to a new
 * object. */
static void test_dry_run_patches_store_nothing(void **state)
{
	static const struct {
		const char *type, *body, *want;
	} patches[] = {
	    {MERGE, "{'data':{'k':'merge'}}", "merge"},
	    {JSON_PATCH, "[{'op':'replace','path':'/data/k','value':'json'}]", "json"},
	    {"application/strategic-merge-patch+json", "{'data':{'k':'smp'}}", "smp"},
	    {"application/apply-patch+yaml",
	     "{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'cm'},'data':{'k':'ssa'}}",
	     "ssa"},
	};
	struct testenv *e = *state;
	struct testenv_reply r;
	char *rv;

	make_cm(e, "cm", "v");
	rv = testenv_keep(e, cm_rv(e, "cm"));
	for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
		r = admin(e, "PATCH", CMS "/cm?dryRun=All&fieldManager=test", patches[i].type,
		          J("%s", patches[i].body));
		if (r.status != 200)
			print_error("%s: %s\n", patches[i].type, r.text);
		assert_int_equal(r.status, 200);
		assert_string_equal(jx_str(r.body, "data.k"), patches[i].want);
		testenv_reply_free(&r);
		assert_cm_unchanged(e, "cm", "v", rv);
	}
	r = admin(e, "PATCH", CMS "/applied?dryRun=All&fieldManager=test",
	          "application/apply-patch+yaml",
	          J("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'applied'}}"));
	assert_int_equal(r.status, 201);
	testenv_reply_free(&r);
	assert_null(stored(e, CMS "/applied"));
}

/* The answer is the namespace as a delete leaves it (Terminating,
 * marked); it stays Active and open to new objects. */
static void test_dry_run_namespace_delete_leaves_it_active(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	json_t *ns;

	testenv_expect_code(
	    admin(e, "POST", "/api/v1/namespaces", NULL, J("{'metadata':{'name':'team'}}")), 201);
	r = admin(e, "DELETE", "/api/v1/namespaces/team?dryRun=All", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "status.phase"), "Terminating");
	assert_non_null(jx_get(r.body, "metadata.deletionTimestamp"));
	testenv_reply_free(&r);
	/* kubectl --dry-run=server says it in a DeleteOptions body. */
	testenv_expect_code(admin(e, "DELETE", "/api/v1/namespaces/team", NULL,
	                          J("{'apiVersion':'v1','kind':'DeleteOptions','dryRun':['All']}")),
	                    200);
	testenv_pump(e, 3);
	ns = stored(e, "/api/v1/namespaces/team");
	assert_non_null(ns);
	assert_string_equal(jx_str(ns, "status.phase"), "Active");
	assert_null(jx_get(ns, "metadata.deletionTimestamp"));
	json_decref(ns);
	testenv_expect_code(admin(e, "POST", "/api/v1/namespaces/team/configmaps", NULL,
	                          J("{'metadata':{'name':'still-open'}}")),
	                    201);
}

/* An eviction answers a Status; dry, it deletes nothing: asked in the
 * query, or in the Eviction's deleteOptions for a bound pod (whose real
 * eviction is graceful: it would be marked). */
static void test_dry_run_eviction_deletes_nothing(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	json_t *pod;

	testenv_expect_code(admin(e, "POST", PODS, NULL,
	                          J("{'metadata':{'name':'free'},'spec':{'containers':[{'name':'c',"
	                            "'image':'i'}]}}")),
	                    201);
	testenv_expect_code(admin(e, "POST", PODS, NULL,
	                          J("{'metadata':{'name':'bound'},'spec':{'nodeName':'node-1',"
	                            "'containers':[{'name':'c','image':'i'}]}}")),
	                    201);
	r = admin(e, "POST", PODS "/free/eviction?dryRun=All", NULL,
	          J("{'apiVersion':'policy/v1','kind':'Eviction','metadata':{'name':'free'}}"));
	assert_int_equal(r.status, 201);
	assert_string_equal(jx_str(r.body, "kind"), "Status");
	assert_string_equal(jx_str(r.body, "status"), "Success");
	testenv_reply_free(&r);
	testenv_expect_code(
	    admin(e, "POST", PODS "/bound/eviction", NULL,
	          J("{'apiVersion':'policy/v1','kind':'Eviction','metadata':{'name':"
	            "'bound'},'deleteOptions':{'dryRun':['All']}}")),
	    201);
	testenv_pump(e, 3);
	pod = stored(e, PODS "/free");
	assert_non_null(pod);
	json_decref(pod);
	pod = stored(e, PODS "/bound");
	assert_non_null(pod);
	assert_null(jx_get(pod, "metadata.deletionTimestamp"));
	json_decref(pod);
}

/* upstream validates CreateOptions first: dryRun's only value is "All". */
static void test_dry_run_value_must_be_all(void **state)
{
	struct testenv *e = *state;

	testenv_expect_status(
	    admin(e, "POST", CMS "?dryRun=yes", NULL, J("{'metadata':{'name':'maybe'}}")), 422,
	    "Invalid",
	    "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
	    "[]string{\"yes\"}: supported values: \"All\"");
	assert_null(stored(e, CMS "/maybe"));
	/* DeleteOptions too, before the object is looked up (404). */
	testenv_expect_status(
	    admin(e, "DELETE", CMS "/nothing?dryRun=bogus", NULL, NULL), 422, "Invalid",
	    "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
	    "[]string{\"bogus\"}: supported values: \"All\"");
}

/* ---- status updates ----------------------------------------------------------------------- */

/* A status update is a whole object, as upstream's status strategies take
 * it: the body's metadata and status (defaulted: a namespace keeps its name
 * label and phase), the stored spec, and what the kind's strategy keeps or
 * backfills (a pod's qosClass, which old kubelets dropped). */
static void test_status_updates_as_upstreams_strategies(void **state)
{
	struct testenv *e = *state;
	json_t *obj;

	testenv_expect_code(
	    admin(e, "POST", "/api/v1/namespaces", NULL, J("{'metadata':{'name':'st'}}")), 201);
	testenv_expect_code(admin(e, "PUT", "/api/v1/namespaces/st/status", NULL,
	                          J("{'metadata':{'name':'st'},'status':{}}")),
	                    200);
	obj = stored(e, "/api/v1/namespaces/st");
	assert_string_equal(jx_str(obj, "status.phase"), "Active");
	assert_string_equal(json_string_value(json_object_get(jx_get(obj, "metadata.labels"),
	                                                      "kubernetes.io/metadata.name")),
	                    "st");
	json_decref(obj);

	testenv_expect_code(admin(e, "POST", "/api/v1/namespaces/default/pods", NULL,
	                          J("{'metadata':{'name':'sp'},'spec':{'containers':[{'name':'c',"
	                            "'image':'i'}]}}")),
	                    201);
	testenv_expect_code(admin(e, "PUT", "/api/v1/namespaces/default/pods/sp/status", NULL,
	                          J("{'metadata':{'name':'sp','labels':{'a':'b'}},"
	                            "'spec':{'containers':[{'name':'x','image':'y'}]},"
	                            "'status':{'phase':'Running'}}")),
	                    200);
	obj = stored(e, "/api/v1/namespaces/default/pods/sp");
	assert_string_equal(jx_str(obj, "status.phase"), "Running");
	assert_string_equal(jx_str(obj, "status.qosClass"), "BestEffort");
	assert_string_equal(jx_str(obj, "metadata.labels.a"), "b");
	assert_string_equal(jx_str(json_array_get(jx_get(obj, "spec.containers"), 0), "name"), "c");
	json_decref(obj);
}

/* ---- finalizers -------------------------------------------------------------------------- */

/* upstream's DeleteResource: 200 with the object when it was not deleted
 * at once — 202 only when the deprecated orphanDependents: false asked for
 * the cascade. The object goes with its last finalizer. */
static void test_delete_held_by_a_finalizer_answers_with_the_object(void **state)
{
	struct testenv *e = *state;
	struct testenv_reply r;
	json_t *cm;
	char *rv;

	testenv_expect_code(
	    admin(e, "POST", CMS, NULL,
	          J("{'metadata':{'name':'held','finalizers':['example.com/hold']}}")),
	    201);
	r = admin(e, "DELETE", CMS "/held", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "kind"), "ConfigMap");
	assert_non_null(jx_str(r.body, "metadata.deletionTimestamp"));
	assert_int_equal(jx_int(r.body, "metadata.deletionGracePeriodSeconds", -1), 0);
	assert_string_equal(
	    json_string_value(json_array_get(jx_get(r.body, "metadata.finalizers"), 0)),
	    "example.com/hold");
	rv = testenv_keep(e, strdup(jx_str(r.body, "metadata.resourceVersion")));
	testenv_reply_free(&r);
	/* Again: the same answer, nothing written. */
	r = admin(e, "DELETE", CMS "/held", NULL, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "metadata.resourceVersion"), rv);
	testenv_reply_free(&r);
	cm = stored(e, CMS "/held");
	assert_non_null(cm);
	assert_string_equal(jx_str(cm, "metadata.resourceVersion"), rv);
	json_decref(cm);

	testenv_expect_code(
	    admin(e, "POST", CMS, NULL,
	          J("{'metadata':{'name':'cascade','finalizers':['example.com/hold']}}")),
	    201);
	r = admin(e, "DELETE", CMS "/cascade", NULL,
	          J("{'apiVersion':'v1','kind':'DeleteOptions','orphanDependents':false}"));
	assert_int_equal(r.status, 202);
	assert_non_null(jx_str(r.body, "metadata.deletionTimestamp"));
	testenv_reply_free(&r);

	/* The last finalizer off: gone. */
	testenv_expect_code(
	    admin(e, "PATCH", CMS "/held", MERGE, J("{'metadata':{'finalizers':null}}")), 200);
	testenv_pump(e, 3);
	assert_null(stored(e, CMS "/held"));
}

/* ---- CertificateSigningRequest names ----------------------------------------------------- */

static const char *csr_named(const char *name, const char *request)
{
	return J("{'apiVersion':'certificates.k8s.io/v1','kind':'CertificateSigningRequest',"
	         "'metadata':{'name':'%s'},'spec':{'request':'%s','signerName':"
	         "'example.com/signer','usages':['client auth']}}",
	         name, request);
}

/* upstream's ValidateCertificateRequestName accepts any name ("We don't
 * care what you call your certificate requests"); what the storage key
 * cannot hold is a 400 from NoNamespaceKeyFunc, dry run or not. */
static void test_csr_name_is_any_path_segment(void **state)
{
	static const struct {
		const char *name, *why;
	} bad[] = {
	    {"a/b", "may not contain '/'"},
	    {"a%b", "may not contain '%'"},
	    {".", "may not be '.'"},
	    {"..", "may not be '..'"},
	};
	struct testenv *e = *state;
	char *request = testenv_keep(e, testenv_csr_request("someone", NULL)), msg[128];
	json_t *list;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(msg, sizeof(msg), "Name parameter invalid: \"%s\": %s", bad[i].name,
		         bad[i].why);
		testenv_expect_status(admin(e, "POST", CSRS, NULL, csr_named(bad[i].name, request)),
		                      400, "BadRequest", msg);
		testenv_expect_status(
		    admin(e, "POST", CSRS "?dryRun=All", NULL, csr_named(bad[i].name, request)),
		    400, "BadRequest", msg);
	}
	list = stored(e, CSRS);
	assert_int_equal(json_array_size(jx_get(list, "items")), 0);
	json_decref(list);
	/* Not a DNS subdomain, and still a CSR name. */
	testenv_expect_code(admin(e, "POST", CSRS, NULL, csr_named("Node_CSR.Upper", request)),
	                    201);
	testenv_expect_code(admin(e, "GET", CSRS "/Node_CSR.Upper", NULL, NULL), 200);
}

/* In the URL a '/' — written or escaped — separates a subresource: "a"'s
 * "b", which no CSR has. */
static void test_csr_name_with_a_slash_in_the_url_is_another_path(void **state)
{
	struct testenv *e = *state;
	const char *none = "the server could not find the requested resource";
	char *request = testenv_keep(e, testenv_csr_request("someone", NULL));

	testenv_expect_status(admin(e, "GET", CSRS "/a/b", NULL, NULL), 404, "NotFound", none);
	testenv_expect_status(admin(e, "GET", CSRS "/a%2Fb", NULL, NULL), 404, "NotFound", none);
	testenv_expect_status(admin(e, "PUT", CSRS "/a%2Fb", NULL, csr_named("a/b", request)), 404,
	                      "NotFound", none);
}

/* The requestor fields are the server's, set at create: an update (here
 * a label) keeps them. Under ASan this also pins that admitting a CSR
 * update keeps nothing it allocated. */
static void test_csr_update_keeps_its_requestor(void **state)
{
	struct testenv *e = *state;
	char *request = testenv_keep(e, testenv_csr_request("someone", NULL));
	struct testenv_reply r;

	testenv_expect_code(admin(e, "POST", CSRS, NULL, csr_named("mine", request)), 201);
	r = admin(e, "PATCH", CSRS "/mine", MERGE, J("{'metadata':{'labels':{'team':'a'}}}"));
	assert_int_equal(r.status, 200);
	assert_string_equal(jx_str(r.body, "metadata.labels.team"), "a");
	assert_string_equal(jx_str(r.body, "spec.username"), "kubernetes-admin");
	assert_string_equal(json_string_value(json_array_get(jx_get(r.body, "spec.groups"), 0)),
	                    "system:masters");
	testenv_reply_free(&r);
}

/* ---- who may not create ------------------------------------------------------------------ */

static struct testenv_reply as_alice(struct testenv *e, const char *target, const char *body)
{
	static const char *const no_groups[] = {NULL};
	return testenv_do(e,
	                  &(struct apiserver_request){
	                      .method = "POST",
	                      .target = target,
	                      .headers = (const char *[]){"Content-Type", "application/json", NULL},
	                      .body = body,
	                      .user = "alice",
	                      .groups = no_groups});
}

/* upstream's forbidden message for a create comes from the request's
 * attributes, and a POST names no object. */
static void test_forbidden_create_names_no_object(void **state)
{
	struct testenv *e = *state;

	testenv_expect_status(
	    as_alice(e, CMS, J("{'metadata':{'name':'mine'}}")), 403, "Forbidden",
	    "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API "
	    "group \"\" in the namespace \"default\"");
	assert_null(stored(e, CMS "/mine"));
}

/* upstream authorizes in the handler chain, before the body is decoded:
 * who may not create gets the 403 whatever the body, and no word on which
 * namespaces exist or what validation thinks. */
static void test_forbidden_create_learns_nothing_from_validation(void **state)
{
	struct testenv *e = *state;

	testenv_expect_status(as_alice(e, CMS, J("{'metadata':{'name':'Bad_Name'}}")), 403,
	                      "Forbidden", NULL);
	testenv_expect_status(
	    as_alice(e, "/api/v1/namespaces/nope/configmaps", J("{'metadata':{'name':'x'}}")), 403,
	    "Forbidden", NULL);
}

/* ---- limits ---------------------------------------------------------------------------- */

/* depth levels of [ ] around nothing, inside prefix ... suffix. */
static char *nested(const char *prefix, size_t depth, const char *suffix)
{
	size_t p = strlen(prefix), s = strlen(suffix);
	char *b = malloc(p + 2 * depth + s + 1);

	assert_non_null(b);
	memcpy(b, prefix, p);
	memset(b + p, '[', depth);
	memset(b + p + depth, ']', depth);
	memcpy(b + p + 2 * depth, suffix, s + 1);
	return b;
}

/* 12000 levels: beyond jansson's 2048 and Go's 10000 alike, so upstream
 * too answers 400 (its decoder's "exceeded max depth"). As a create, an
 * update and a merge patch: refused, nothing changed, the server serving
 * on. */
static void test_nesting_beyond_the_parsers_depth(void **state)
{
	struct testenv *e = *state;
	char *create = testenv_keep(
	    e, nested("{\"metadata\":{\"name\":\"deep\"},\"data\":{\"k\":", 12000, "}}"));
	char *update = testenv_keep(
	    e, nested("{\"metadata\":{\"name\":\"cm\"},\"data\":{\"k\":", 12000, "}}"));
	char *patch = testenv_keep(e, nested("{\"data\":{\"k\":", 12000, "}}"));
	struct testenv_reply r;
	char *rv;

	make_cm(e, "cm", "v");
	rv = testenv_keep(e, cm_rv(e, "cm"));
	r = admin(e, "POST", CMS, NULL, create);
	assert_int_equal(r.status, 400);
	assert_string_equal(jx_str(r.body, "reason"), "BadRequest");
	assert_non_null(strstr(jx_str(r.body, "message"), "couldn't get version/kind; json parse "
	                                                  "error: "));
	assert_non_null(strstr(jx_str(r.body, "message"), "depth"));
	testenv_reply_free(&r);
	testenv_expect_status(admin(e, "PUT", CMS "/cm", NULL, update), 400, "BadRequest", NULL);
	testenv_expect_status(admin(e, "PATCH", CMS "/cm", MERGE, patch), 400, "BadRequest", NULL);
	assert_null(stored(e, CMS "/deep"));
	assert_cm_unchanged(e, "cm", "v", rv);
	make_cm(e, "after", "v");
}

/* Each step copies the last value twice into a new array: 2^20 times 32
 * bytes. jsonpatch's AccumulatedCopySizeLimit (the apiserver's 3 MiB
 * JSONPatchMaxCopyBytes) stops it; the 422 is NewGenericServerResponse's
 * text. */
static void test_json_patch_copy_bomb_is_refused(void **state)
{
	struct testenv *e = *state;
	size_t cap = 16384, n = 0;
	char *ops = testenv_keep(e, malloc(cap)), *rv;
	json_t *cm;

	assert_non_null(ops);
	testenv_expect_code(admin(e, "POST", CMS, NULL,
	                          J("{'metadata':{'name':'bomb'},'data':{'k':"
	                            "'0123456789abcdef0123456789abcdef'}}")),
	                    201);
	rv = testenv_keep(e, cm_rv(e, "bomb"));
	n += (size_t)snprintf(ops + n, cap - n,
	                      "[{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{}},"
	                      "{\"op\":\"copy\",\"from\":\"/data/k\",\"path\":"
	                      "\"/metadata/annotations/a0\"}");
	for (int i = 1; i < 20; i++) {
		n += (size_t)snprintf(ops + n, cap - n,
		                      ",{\"op\":\"add\",\"path\":\"/metadata/annotations/a%d\","
		                      "\"value\":[]}",
		                      i);
		for (int k = 0; k < 2; k++)
			n += (size_t)snprintf(
			    ops + n, cap - n,
			    ",{\"op\":\"copy\",\"from\":\"/metadata/annotations/a%d\","
			    "\"path\":\"/metadata/annotations/a%d/-\"}",
			    i - 1, i);
	}
	snprintf(ops + n, cap - n, "]");
	assert_true(n < cap - 2);
	testenv_expect_status(admin(e, "PATCH", CMS "/bomb", JSON_PATCH, ops), 422, "Invalid",
	                      "the server rejected our request due to an error in our request");
	cm = stored(e, CMS "/bomb");
	assert_string_equal(jx_str(cm, "metadata.resourceVersion"), rv);
	assert_null(jx_get(cm, "metadata.annotations"));
	json_decref(cm);
}

/* upstream's maxJSONPatchOperations: 10000. */
static void test_json_patch_of_too_many_operations_is_413(void **state)
{
	static const char op[] = "{\"op\":\"test\",\"path\":\"/data/k\",\"value\":\"v\"}";
	struct testenv *e = *state;
	size_t n = 0, cap = 10001 * sizeof(op) + 4;
	char *ops = testenv_keep(e, malloc(cap)), *rv;

	assert_non_null(ops);
	make_cm(e, "cm", "v");
	rv = testenv_keep(e, cm_rv(e, "cm"));
	ops[n++] = '[';
	for (int i = 0; i < 10001; i++)
		n += (size_t)snprintf(ops + n, cap - n, "%s%s", i ? "," : "", op);
	snprintf(ops + n, cap - n, "]");
	testenv_expect_status(admin(e, "PATCH", CMS "/cm", JSON_PATCH, ops), 413,
	                      "RequestEntityTooLarge",
	                      "The allowed maximum operations in a JSON patch is 10000, got 10001");
	/* 10000 are fine (each a test that holds): drop the last ",op". */
	n = strlen(ops) - 1 - (sizeof(op) - 1) - 1;
	assert_int_equal(ops[n], ',');
	ops[n] = ']';
	ops[n + 1] = '\0';
	testenv_expect_code(admin(e, "PATCH", CMS "/cm", JSON_PATCH, ops), 200);
	assert_cm_unchanged(e, "cm", "v", rv);
}

static char *lease_of(size_t holder_len)
{
	static const char head[] =
	    "{\"metadata\":{\"name\":\"big\"},\"spec\":{\"holderIdentity\":\"";
	char *b = malloc(sizeof(head) + holder_len + 4);

	assert_non_null(b);
	memcpy(b, head, sizeof(head) - 1);
	memset(b + sizeof(head) - 1, 'x', holder_len);
	strcpy(b + sizeof(head) - 1 + holder_len, "\"}}");
	return b;
}

/* etcd's 1.5 MiB request limit: upstream passes its error through as a
 * reasonless 500. A dry run never reaches etcd, so is not refused. No
 * revision is spent; the server serves on. */
static void test_object_beyond_etcds_limit(void **state)
{
	struct testenv *e = *state;
	char *big = testenv_keep(e, lease_of(1600 * 1024)),
	     *before = testenv_keep(e, list_revision(e, LEASES)), *after;

	testenv_expect_code(admin(e, "POST", LEASES "?dryRun=All", NULL, big), 201);
	testenv_expect_status(admin(e, "POST", LEASES, NULL, big), 500, NULL,
	                      "etcdserver: request is too large");
	assert_null(stored(e, LEASES "/big"));
	after = testenv_keep(e, list_revision(e, LEASES));
	assert_string_equal(after, before);
	make_cm(e, "after", "v");
}

/* --max-request-body-bytes (3 MiB): 413 before the body is parsed. */
static void test_body_beyond_the_request_limit(void **state)
{
	struct testenv *e = *state;
	char *huge = testenv_keep(e, lease_of(3200 * 1024));

	testenv_expect_status(admin(e, "POST", LEASES, NULL, huge), 413, "RequestEntityTooLarge",
	                      "Request entity too large: limit is 3145728");
	assert_null(stored(e, LEASES "/big"));
	make_cm(e, "after", "v");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, testenv_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_dry_run_create_stores_nothing),
	    T(test_dry_run_create_of_an_existing_name_conflicts),
	    T(test_dry_run_update_stores_nothing),
	    T(test_dry_run_patches_store_nothing),
	    T(test_dry_run_namespace_delete_leaves_it_active),
	    T(test_dry_run_eviction_deletes_nothing),
	    T(test_dry_run_value_must_be_all),
	    T(test_status_updates_as_upstreams_strategies),
	    T(test_delete_held_by_a_finalizer_answers_with_the_object),
	    T(test_csr_name_is_any_path_segment),
	    T(test_csr_name_with_a_slash_in_the_url_is_another_path),
	    T(test_csr_update_keeps_its_requestor),
	    T(test_forbidden_create_names_no_object),
	    T(test_forbidden_create_learns_nothing_from_validation),
	    T(test_nesting_beyond_the_parsers_depth),
	    T(test_json_patch_copy_bomb_is_refused),
	    T(test_json_patch_of_too_many_operations_is_413),
	    T(test_object_beyond_etcds_limit),
	    T(test_body_beyond_the_request_limit),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
