/*
 * Update validation of the kinds other than pods: what upstream 1.32's
 * Validate*Update functions (and the apps/v1 strategies) refuse, with their
 * field paths, reasons and messages. Each case defaults the stored and the
 * new object as the API server does, validates the update through the
 * resource table and compares val_message's text.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/resources.h"
#include "api/validation.h"
#include "base/jx.h"

#include <stdlib.h>
#include <string.h>

#include "testassert.h"

static json_t *js(const char *text)
{
	json_t *v = jx_parse(text, strlen(text));
	if (!v)
		fail_msg("bad JSON in test: %s", text);
	return v;
}

/* RFC 7386 merge patch: what kubectl patch --type=merge sends. */
static void merge(json_t *target, json_t *patch)
{
	const char *k;
	json_t *v;

	json_object_foreach(patch, k, v)
	{
		json_t *have = json_object_get(target, k);
		if (json_is_null(v))
			json_object_del(target, k);
		else if (json_is_object(v) && json_is_object(have))
			merge(have, v);
		else
			json_object_set(target, k, v);
	}
}

/* The message of updating the stored object (`old`, defaulted as a create
 * left it) with `patch` merged in; NULL when the update is valid. The
 * first cause's reason and field go to *reason and *field (static). */
static char *update_as(const char *plural, const char *old_text, const char *patch_text,
                       const char **reason, const char **field)
{
	static char reason_buf[64], field_buf[128];
	const struct resource *r = resource_lookup(plural);
	json_t *old = js(old_text), *now, *patch = js(patch_text);
	struct validation v;
	char *msg = NULL;

	assert_non_null(r);
	assert_non_null(r->validate);
	if (r->defaults)
		r->defaults(old);
	now = json_deep_copy(old);
	merge(now, patch);
	if (r->defaults)
		r->defaults(now);
	val_init(&v);
	r->validate(now, old, &v);
	if (!val_ok(&v)) {
		json_t *c = json_array_get(v.causes, 0);
		msg = val_message(&v, r->kind, jx_str(now, "metadata.name"));
		snprintf(reason_buf, sizeof(reason_buf), "%s", jx_str(c, "reason"));
		snprintf(field_buf, sizeof(field_buf), "%s", jx_str(c, "field"));
	}
	if (reason)
		*reason = msg ? reason_buf : NULL;
	if (field)
		*field = msg ? field_buf : NULL;
	val_free(&v);
	json_decref(old);
	json_decref(now);
	json_decref(patch);
	return msg;
}

static char *update(const char *plural, const char *old_text, const char *patch_text)
{
	return update_as(plural, old_text, patch_text, NULL, NULL);
}

/* The update is refused with exactly `want`. */
static void refused(const char *plural, const char *old, const char *patch, const char *want)
{
	char *msg = update(plural, old, patch);
	if (!msg)
		fail_msg("%s: %s was accepted; want %s", plural, patch, want);
	assert_string_equal(msg, want);
	free(msg);
}

static void accepted(const char *plural, const char *old, const char *patch)
{
	char *msg = update(plural, old, patch);
	if (msg)
		fail_msg("%s: %s refused: %s", plural, patch, msg);
}

/* ---- apps/v1 StatefulSet ------------------------------------------------- */

static const char sts[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":{\"name\":\"web\","
    "\"namespace\":\"default\"},\"spec\":{\"serviceName\":\"web\",\"replicas\":2,"
    "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":"
    "{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"nginx\","
    "\"image\":\"nginx\"}]}},\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"www\"},"
    "\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":"
    "{\"storage\":\"1Gi\"}}}}]}}";

#define STS_FORBIDDEN                                                                              \
	"StatefulSet \"web\" is invalid: spec: Forbidden: updates to statefulset spec for fields " \
	"other than 'replicas', 'ordinals', 'template', 'updateStrategy', "                        \
	"'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"

static void test_statefulset_spec_is_fixed(void **state)
{
	const char *reason, *field;
	char *msg;

	(void)state;
	msg = update_as("statefulsets", sts,
	                "{\"spec\":{\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"www\"},"
	                "\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":"
	                "{\"storage\":\"2Gi\"}}}}]}}",
	                &reason, &field);
	assert_non_null(msg);
	assert_string_equal(msg, STS_FORBIDDEN);
	assert_string_equal(reason, "FieldValueForbidden");
	assert_string_equal(field, "spec");
	free(msg);
	refused("statefulsets", sts, "{\"spec\":{\"serviceName\":\"other\"}}", STS_FORBIDDEN);
	refused("statefulsets", sts, "{\"spec\":{\"podManagementPolicy\":\"Parallel\"}}",
	        STS_FORBIDDEN);
	refused("statefulsets", sts, "{\"spec\":{\"revisionHistoryLimit\":3}}", STS_FORBIDDEN);
	refused("statefulsets", sts, "{\"spec\":{\"volumeClaimTemplates\":null}}", STS_FORBIDDEN);
	/* The selector is part of the spec rule: one error, no spec.selector one. */
	refused("statefulsets", sts,
	        "{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\",\"tier\":\"x\"}},"
	        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\",\"tier\":\"x\"}}}}}",
	        STS_FORBIDDEN);
}

static void test_statefulset_mutable_fields(void **state)
{
	(void)state;
	accepted("statefulsets", sts, "{\"spec\":{\"replicas\":5}}");
	accepted("statefulsets", sts, "{\"spec\":{\"minReadySeconds\":10}}");
	accepted("statefulsets", sts, "{\"spec\":{\"ordinals\":{\"start\":3}}}");
	accepted("statefulsets", sts, "{\"spec\":{\"updateStrategy\":{\"type\":\"OnDelete\"}}}");
	accepted("statefulsets", sts,
	         "{\"spec\":{\"persistentVolumeClaimRetentionPolicy\":{\"whenDeleted\":"
	         "\"Delete\",\"whenScaled\":\"Retain\"}}}");
	accepted("statefulsets", sts,
	         "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"nginx\","
	         "\"image\":\"nginx:2\"}]}}}}");
	/* An empty list is Go's nil list (apiequality.Semantic). */
	accepted("statefulsets",
	         "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"selector\":{\"matchLabels\":"
	         "{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":"
	         "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}",
	         "{\"spec\":{\"volumeClaimTemplates\":[]}}");
}

/* ---- selectors of the other workloads ---------------------------------------- */

static void test_workload_selectors_are_immutable(void **state)
{
	static const char deploy[] =
	    "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":"
	    "\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":"
	    "{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}";
	static const char ds[] =
	    "{\"metadata\":{\"name\":\"agent\"},\"spec\":{\"selector\":{\"matchLabels\":"
	    "{\"app\":\"agent\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"agent\","
	    "\"tier\":\"node\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}";
	const char *reason, *field;
	char *msg;

	(void)state;
	msg = update_as("deployments", deploy,
	                "{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web2\"}},\"template\":"
	                "{\"metadata\":{\"labels\":{\"app\":\"web2\"}}}}}",
	                &reason, &field);
	assert_non_null(msg);
	assert_string_equal(msg,
	                    "Deployment \"d\" is invalid: spec.selector: Invalid value: "
	                    "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, "
	                    "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is "
	                    "immutable");
	assert_string_equal(reason, "FieldValueInvalid");
	assert_string_equal(field, "spec.selector");
	free(msg);
	refused(
	    "replicasets", deploy,
	    "{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\",\"b\":\"2\",\"a\":\"1\"}},"
	    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\",\"a\":\"1\",\"b\":\"2\"}}}}}",
	    "ReplicaSet \"d\" is invalid: spec.selector: Invalid value: v1.LabelSelector{"
	    "MatchLabels:map[string]string{\"a\":\"1\", \"app\":\"web\", \"b\":\"2\"}, "
	    "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable");
	refused(
	    "daemonsets", ds,
	    "{\"spec\":{\"selector\":{\"matchLabels\":null,\"matchExpressions\":[{\"key\":"
	    "\"tier\",\"operator\":\"In\",\"values\":[\"node\",\"edge\"]},{\"key\":\"app\","
	    "\"operator\":\"Exists\"}]}}}",
	    "DaemonSet \"agent\" is invalid: spec.selector: Invalid value: v1.LabelSelector{"
	    "MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{"
	    "v1.LabelSelectorRequirement{Key:\"tier\", Operator:\"In\", Values:[]string{"
	    "\"node\", \"edge\"}}, v1.LabelSelectorRequirement{Key:\"app\", Operator:\"Exists\", "
	    "Values:[]string(nil)}}}: field is immutable");
	/* Everything else in these specs may change. */
	accepted("deployments", deploy, "{\"spec\":{\"replicas\":4,\"paused\":true}}");
	accepted("daemonsets", ds, "{\"spec\":{\"minReadySeconds\":5}}");
}

/* ---- batch/v1 Job --------------------------------------------------------- */

static const char job[] =
    "{\"metadata\":{\"name\":\"pi\",\"namespace\":\"default\",\"uid\":\"u-1\"},\"spec\":"
    "{\"completions\":3,\"parallelism\":1,\"template\":{\"spec\":{\"restartPolicy\":\"Never\","
    "\"containers\":[{\"name\":\"pi\",\"image\":\"perl\"}]}}}}";

static const char indexed[] =
    "{\"metadata\":{\"name\":\"ix\",\"uid\":\"u-2\"},\"spec\":{\"completions\":3,"
    "\"parallelism\":3,\"completionMode\":\"Indexed\",\"template\":{\"spec\":"
    "{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}";

static const char suspended[] =
    "{\"metadata\":{\"name\":\"later\",\"uid\":\"u-3\"},\"spec\":{\"suspend\":true,"
    "\"template\":{\"metadata\":{\"labels\":{\"team\":\"a\"}},\"spec\":{\"restartPolicy\":"
    "\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],\"affinity\":{"
    "\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
    "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
    "\"values\":[\"a\"]}]}]}}}}}}}";

static void test_job_completions(void **state)
{
	(void)state;
	refused("jobs", job, "{\"spec\":{\"completions\":5}}",
	        "Job \"pi\" is invalid: spec.completions: Invalid value: 5: field is immutable");
	refused("jobs", job, "{\"spec\":{\"completions\":null}}",
	        "Job \"pi\" is invalid: spec.completions: Invalid value: \"null\": field is immutable");
	/* Elastic Indexed Jobs scale with parallelism. */
	accepted("jobs", indexed, "{\"spec\":{\"completions\":5,\"parallelism\":5}}");
	refused("jobs", indexed, "{\"spec\":{\"completions\":5}}",
	        "Job \"ix\" is invalid: spec.completions: Invalid value: 5: can only be modified "
	        "in tandem with spec.parallelism");
	accepted("jobs", job, "{\"spec\":{\"parallelism\":2,\"backoffLimit\":1}}");
}

static void test_job_fixed_fields(void **state)
{
	(void)state;
	refused("jobs", job, "{\"spec\":{\"completionMode\":\"Indexed\"}}",
	        "Job \"pi\" is invalid: spec.completionMode: Invalid value: \"Indexed\": field is "
	        "immutable");
	refused("jobs", job, "{\"spec\":{\"managedBy\":\"example.com/mine\"}}",
	        "Job \"pi\" is invalid: spec.managedBy: Invalid value: \"example.com/mine\": field "
	        "is immutable");
	refused("jobs", indexed, "{\"spec\":{\"backoffLimitPerIndex\":2}}",
	        "Job \"ix\" is invalid: spec.backoffLimitPerIndex: Invalid value: 2: field is "
	        "immutable");
	refused(
	    "jobs", job,
	    "{\"spec\":{\"podFailurePolicy\":{\"rules\":[{\"action\":\"FailJob\","
	    "\"onExitCodes\":{\"operator\":\"In\",\"values\":[42]}}]}}}",
	    "Job \"pi\" is invalid: spec.podFailurePolicy: Invalid value: {\"rules\":[{\"action\":"
	    "\"FailJob\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[42]}}]}: field is "
	    "immutable");
	/* The generated selector (still matching the template's labels). */
	refused(
	    "jobs", job, "{\"spec\":{\"selector\":{\"matchLabels\":{\"job-name\":\"pi\"}}}}",
	    "Job \"pi\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:"
	    "map[string]string{\"batch.kubernetes.io/controller-uid\":\"u-1\", \"job-name\":"
	    "\"pi\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable");
}

/* Refused with a spec.template immutability error. */
static void template_refused(const char *old, const char *patch)
{
	const char *reason, *field;
	char *msg = update_as("jobs", old, patch, &reason, &field);
	if (!msg)
		fail_msg("%s was accepted", patch);
	assert_string_equal(field, "spec.template");
	assert_contains(msg, "field is immutable");
	free(msg);
}

static void test_job_template(void **state)
{
	static const char tail[] = "}: field is immutable";
	const char *reason, *field;
	char *msg;

	(void)state;
	msg = update_as("jobs", job,
	                "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"pi\","
	                "\"image\":\"perl:2\"}]}}}}",
	                &reason, &field);
	assert_non_null(msg);
	assert_string_equal(reason, "FieldValueInvalid");
	assert_string_equal(field, "spec.template");
	assert_true(!strncmp(msg, "Job \"pi\" is invalid: spec.template: Invalid value: {", 52));
	assert_contains(msg, "\"image\":\"perl:2\"");
	assert_true(strlen(msg) > strlen(tail) && !strcmp(msg + strlen(msg) - strlen(tail), tail));
	free(msg);
	/* A running Job's scheduling directives are fixed too. */
	template_refused(job, "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"disk\":"
	                      "\"ssd\"}}}}}");
}

static void test_job_suspended_scheduling_directives(void **state)
{
	char started[2048];

	(void)state;
	/* Suspended and never started: where the pods go may change. */
	accepted("jobs", suspended,
	         "{\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"team\":\"b\"},"
	         "\"annotations\":{\"note\":\"x\"}},\"spec\":{\"nodeSelector\":{\"disk\":\"ssd\"},"
	         "\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\"}],\"schedulingGates\":"
	         "[{\"name\":\"g\"}],\"affinity\":{\"nodeAffinity\":null}}}}}");
	accepted("jobs", suspended,
	         "{\"spec\":{\"template\":{\"spec\":{\"affinity\":{\"nodeAffinity\":{"
	         "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{"
	         "\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"b\"]}]"
	         "}]}}}}}}}");
	/* Clearing affinity that had only node affinity. */
	accepted("jobs", suspended, "{\"spec\":{\"template\":{\"spec\":{\"affinity\":null}}}}");
	/* Not the containers, not pod affinity. */
	template_refused(suspended, "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":"
	                            "\"c\",\"image\":\"i:2\"}]}}}}");
	template_refused(suspended,
	                 "{\"spec\":{\"template\":{\"spec\":{\"affinity\":{\"podAffinity\":{"
	                 "\"requiredDuringSchedulingIgnoredDuringExecution\":[{\"topologyKey\":"
	                 "\"zone\"}]}}}}}}");
	/* A Job that started once (status.startTime) is past that point. */
	snprintf(started, sizeof(started),
	         "%.*s,\"status\":{\"startTime\":\"2025-01-01T00:00:00Z\"}}",
	         (int)strlen(suspended) - 1, suspended);
	template_refused(
	    started, "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"disk\":\"ssd\"}}}}}");
}

/* ---- ConfigMap, Secret ------------------------------------------------------ */

static void test_immutable_configmap(void **state)
{
	static const char cm[] = "{\"metadata\":{\"name\":\"cfg\"},\"immutable\":true,"
	                         "\"data\":{\"a\":\"1\"},\"binaryData\":{\"b\":\"AA==\"}}";
	const char *reason, *field;
	char *msg;

	(void)state;
	msg = update_as("configmaps", cm, "{\"data\":{\"a\":\"2\"}}", &reason, &field);
	assert_non_null(msg);
	assert_string_equal(msg, "ConfigMap \"cfg\" is invalid: data: Forbidden: field is "
	                         "immutable when `immutable` is set");
	assert_string_equal(reason, "FieldValueForbidden");
	assert_string_equal(field, "data");
	free(msg);
	refused("configmaps", cm, "{\"binaryData\":{\"c\":\"AQ==\"}}",
	        "ConfigMap \"cfg\" is invalid: binaryData: Forbidden: field is immutable when "
	        "`immutable` is set");
	refused("configmaps", cm, "{\"immutable\":false}",
	        "ConfigMap \"cfg\" is invalid: immutable: Forbidden: field is immutable when "
	        "`immutable` is set");
	refused("configmaps", cm, "{\"immutable\":null,\"data\":null,\"binaryData\":{\"b\":null}}",
	        "ConfigMap \"cfg\" is invalid: [immutable: Forbidden: field is immutable when "
	        "`immutable` is set, data: Forbidden: field is immutable when `immutable` is set, "
	        "binaryData: Forbidden: field is immutable when `immutable` is set]");
	/* Labels may change; a mutable ConfigMap may change and become immutable. */
	accepted("configmaps", cm, "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}");
	accepted("configmaps", "{\"metadata\":{\"name\":\"m\"},\"data\":{\"a\":\"1\"}}",
	         "{\"data\":{\"a\":\"2\"},\"immutable\":true}");
}

static void test_secret(void **state)
{
	static const char secret[] = "{\"metadata\":{\"name\":\"s\"},\"immutable\":true,"
	                             "\"data\":{\"user\":\"YWRtaW4=\"}}";

	(void)state;
	refused("secrets", "{\"metadata\":{\"name\":\"s\"},\"data\":{}}",
	        "{\"type\":\"kubernetes.io/tls\"}",
	        "Secret \"s\" is invalid: type: Invalid value: \"kubernetes.io/tls\": field is "
	        "immutable");
	/* stringData lands in data before validation, as upstream's conversion does. */
	refused("secrets", secret, "{\"stringData\":{\"user\":\"root\"}}",
	        "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is "
	        "set");
	refused("secrets", secret, "{\"immutable\":false}",
	        "Secret \"s\" is invalid: immutable: Forbidden: field is immutable when "
	        "`immutable` is set");
	/* The same value again is no change; the type left out is defaulted to Opaque. */
	accepted("secrets", secret, "{\"stringData\":{\"user\":\"admin\"},\"type\":null}");
	accepted("secrets", "{\"metadata\":{\"name\":\"m\"},\"data\":{}}",
	         "{\"stringData\":{\"k\":\"v\"}}");
}

/* ---- RBAC bindings, EndpointSlice, ControllerRevision ----------------------- */

static void test_role_ref(void **state)
{
	static const char rb[] =
	    "{\"metadata\":{\"name\":\"rb\",\"namespace\":\"default\"},\"roleRef\":{\"kind\":"
	    "\"ClusterRole\",\"name\":\"view\"},\"subjects\":[{\"kind\":\"User\",\"name\":"
	    "\"alice\"}]}";
	const char *reason, *field;
	char *msg;

	(void)state;
	msg = update_as("rolebindings", rb, "{\"roleRef\":{\"name\":\"edit\"}}", &reason, &field);
	assert_non_null(msg);
	assert_string_equal(msg, "RoleBinding \"rb\" is invalid: roleRef: Invalid value: "
	                         "rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", "
	                         "Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef");
	assert_string_equal(reason, "FieldValueInvalid");
	assert_string_equal(field, "roleRef");
	free(msg);
	refused("clusterrolebindings", rb, "{\"roleRef\":{\"name\":\"admin\"}}",
	        "ClusterRoleBinding \"rb\" is invalid: roleRef: Invalid value: "
	        "rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", "
	        "Name:\"admin\"}: cannot change roleRef");
	accepted("rolebindings", rb, "{\"subjects\":[{\"kind\":\"Group\",\"name\":\"devs\"}]}");
}

static void test_endpointslice_and_revision(void **state)
{
	(void)state;
	refused("endpointslices",
	        "{\"metadata\":{\"name\":\"es\"},\"addressType\":\"IPv4\",\"endpoints\":[]}",
	        "{\"addressType\":\"IPv6\"}",
	        "EndpointSlice \"es\" is invalid: addressType: Invalid value: \"IPv6\": field is "
	        "immutable");
	accepted("endpointslices",
	         "{\"metadata\":{\"name\":\"es\"},\"addressType\":\"IPv4\",\"endpoints\":[]}",
	         "{\"endpoints\":[{\"addresses\":[\"10.0.0.1\"]}]}");
	refused("controllerrevisions",
	        "{\"metadata\":{\"name\":\"r-1\"},\"revision\":1,\"data\":{\"spec\":{\"a\":1}}}",
	        "{\"data\":{\"spec\":{\"a\":2}}}",
	        "ControllerRevision \"r-1\" is invalid: data: Invalid value: {\"spec\":{\"a\":2}}: "
	        "field is immutable");
	/* A rollback renumbers an old revision. */
	accepted("controllerrevisions",
	         "{\"metadata\":{\"name\":\"r-1\"},\"revision\":1,\"data\":{\"spec\":{\"a\":1}}}",
	         "{\"revision\":7}");
}

/* ---- Service ---------------------------------------------------------------- */

static const char svc[] = "{\"metadata\":{\"name\":\"dns\"},\"spec\":{\"clusterIP\":"
                          "\"10.96.0.10\",\"ports\":[{\"port\":53}]}}";

static void test_service_cluster_ip(void **state)
{
	const char *reason, *field;
	char *msg;

	(void)state;
	msg = update_as("services", svc, "{\"spec\":{\"clusterIP\":\"10.96.0.11\"}}", &reason,
	                &field);
	assert_non_null(msg);
	assert_string_equal(msg, "Service \"dns\" is invalid: spec.clusterIPs[0]: Invalid value: "
	                         "[]string{\"10.96.0.11\"}: may not change once set");
	assert_string_equal(reason, "FieldValueInvalid");
	assert_string_equal(field, "spec.clusterIPs[0]");
	free(msg);
	refused("services", svc, "{\"spec\":{\"clusterIPs\":[\"10.96.0.12\"]}}",
	        "Service \"dns\" is invalid: spec.clusterIPs[0]: Invalid value: "
	        "[]string{\"10.96.0.12\"}: may not change once set");
	refused(
	    "services", svc, "{\"spec\":{\"clusterIP\":\"None\"}}",
	    "Service \"dns\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"None\"}: "
	    "may not change once set");
	/* Left out (or cleared) is kept, as upstream's storage fills it in. */
	accepted("services", svc, "{\"spec\":{\"clusterIP\":null,\"ports\":[{\"port\":54}]}}");
	accepted("services", svc, "{\"spec\":{\"clusterIP\":\"\"}}");
	/* Headless stays headless; nothing set yet may be set; ExternalName is exempt. */
	accepted("services", "{\"metadata\":{\"name\":\"h\"},\"spec\":{\"clusterIP\":\"None\"}}",
	         "{\"spec\":{\"clusterIPs\":[\"None\"]}}");
	accepted("services", "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"ports\":[]}}",
	         "{\"spec\":{\"clusterIP\":\"10.96.0.20\"}}");
	accepted("services", svc,
	         "{\"spec\":{\"type\":\"ExternalName\",\"externalName\":\"example.com\","
	         "\"clusterIP\":\"\"}}");
	/* Dual-stack: the secondary may go, but only with SingleStack. */
	refused(
	    "services",
	    "{\"metadata\":{\"name\":\"ds\"},\"spec\":{\"clusterIP\":\"10.0.0.1\","
	    "\"clusterIPs\":[\"10.0.0.1\",\"fd00::1\"],\"ipFamilyPolicy\":\"PreferDualStack\"}}",
	    "{\"spec\":{\"clusterIPs\":[\"10.0.0.1\"]}}",
	    "Service \"ds\" is invalid: spec.ipFamilyPolicy: Invalid value: \"PreferDualStack\": "
	    "must be set to 'SingleStack' when releasing the secondary clusterIP");
	accepted(
	    "services",
	    "{\"metadata\":{\"name\":\"ds\"},\"spec\":{\"clusterIP\":\"10.0.0.1\","
	    "\"clusterIPs\":[\"10.0.0.1\",\"fd00::1\"],\"ipFamilyPolicy\":\"PreferDualStack\"}}",
	    "{\"spec\":{\"clusterIPs\":[\"10.0.0.1\"],\"ipFamilyPolicy\":\"SingleStack\"}}");
}

static void test_service_load_balancer(void **state)
{
	static const char lb[] =
	    "{\"metadata\":{\"name\":\"lb\"},\"spec\":{\"type\":\"LoadBalancer\","
	    "\"loadBalancerClass\":\"example.com/a\",\"externalTrafficPolicy\":\"Local\","
	    "\"healthCheckNodePort\":32000,\"ports\":[{\"port\":80}]}}";

	(void)state;
	refused("services", lb, "{\"spec\":{\"loadBalancerClass\":\"example.com/b\"}}",
	        "Service \"lb\" is invalid: spec.loadBalancerClass: Invalid value: "
	        "\"example.com/b\": may not change once set");
	refused("services", lb, "{\"spec\":{\"loadBalancerClass\":null}}",
	        "Service \"lb\" is invalid: spec.loadBalancerClass: Invalid value: \"null\": may not "
	        "change once set");
	refused("services", lb, "{\"spec\":{\"healthCheckNodePort\":32001}}",
	        "Service \"lb\" is invalid: spec.healthCheckNodePort: Forbidden: field is "
	        "immutable");
	accepted("services", lb, "{\"spec\":{\"healthCheckNodePort\":null}}");
	accepted("services", lb,
	         "{\"spec\":{\"externalTrafficPolicy\":\"Cluster\",\"healthCheckNodePort\":null}}");
}

/* ---- Node --------------------------------------------------------------------- */

static void test_node(void **state)
{
	static const char node[] =
	    "{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"podCIDR\":\"10.244.1.0/24\","
	    "\"providerID\":\"cube://n1\"}}";
	const char *reason, *field;
	char *msg;

	(void)state;
	msg =
	    update_as("nodes", node, "{\"spec\":{\"podCIDR\":\"10.244.2.0/24\"}}", &reason, &field);
	assert_non_null(msg);
	assert_string_equal(msg, "Node \"n1\" is invalid: spec.podCIDRs: Forbidden: node updates "
	                         "may not change podCIDR except from \"\" to valid");
	assert_string_equal(reason, "FieldValueForbidden");
	assert_string_equal(field, "spec.podCIDRs");
	free(msg);
	refused("nodes", node, "{\"spec\":{\"podCIDRs\":[\"10.244.1.0/24\",\"fd00:1::/64\"]}}",
	        "Node \"n1\" is invalid: spec.podCIDRs: Forbidden: node updates may not change "
	        "podCIDR except from \"\" to valid");
	refused("nodes", node, "{\"spec\":{\"providerID\":\"cube://other\"}}",
	        "Node \"n1\" is invalid: spec.providerID: Forbidden: node updates may not change "
	        "providerID except from \"\" to valid");
	refused("nodes", node, "{\"spec\":{\"externalID\":\"x\"}}",
	        "Node \"n1\" is invalid: spec.externalID: Forbidden: may not be updated");
	/* From unset to set is how they are assigned; the rest may change. */
	accepted("nodes", "{\"metadata\":{\"name\":\"n2\"},\"spec\":{}}",
	         "{\"spec\":{\"podCIDR\":\"10.244.3.0/24\",\"providerID\":\"cube://n2\"}}");
	accepted("nodes", node,
	         "{\"spec\":{\"podCIDRs\":[\"10.244.1.0/24\"],\"unschedulable\":true,\"taints\":"
	         "[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}");
}

/* Creates (old NULL) never meet the update rules. */
static void test_create_is_not_an_update(void **state)
{
	static const char *const plurals[] = {
	    "statefulsets", "jobs",           "configmaps",          "secrets",
	    "services",     "endpointslices", "controllerrevisions", "nodes"};
	(void)state;
	for (size_t i = 0; i < sizeof(plurals) / sizeof(plurals[0]); i++) {
		const struct resource *r = resource_lookup(plurals[i]);
		json_t *obj = js(!strcmp(plurals[i], "statefulsets") ? sts
		                 : !strcmp(plurals[i], "jobs")       ? job
		                                               : "{\"metadata\":{\"name\":\"x\"}}");
		struct validation v;
		if (r->defaults)
			r->defaults(obj);
		val_init(&v);
		r->validate(obj, NULL, &v);
		if (!val_ok(&v)) {
			char *msg = val_message(&v, r->kind, "x");
			fail_msg("%s create: %s", plurals[i], msg);
		}
		val_free(&v);
		json_decref(obj);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_statefulset_spec_is_fixed),
	    cmocka_unit_test(test_statefulset_mutable_fields),
	    cmocka_unit_test(test_workload_selectors_are_immutable),
	    cmocka_unit_test(test_job_completions),
	    cmocka_unit_test(test_job_fixed_fields),
	    cmocka_unit_test(test_job_template),
	    cmocka_unit_test(test_job_suspended_scheduling_directives),
	    cmocka_unit_test(test_immutable_configmap),
	    cmocka_unit_test(test_secret),
	    cmocka_unit_test(test_role_ref),
	    cmocka_unit_test(test_endpointslice_and_revision),
	    cmocka_unit_test(test_service_cluster_ip),
	    cmocka_unit_test(test_service_load_balancer),
	    cmocka_unit_test(test_node),
	    cmocka_unit_test(test_create_is_not_an_update),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
