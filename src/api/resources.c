#include "api/resources.h"

#include "api/selector.h"
#include "api/validation.h"

#include "pki/pki.h"

#include "base/alloc.h"
#include "base/b64.h"
#include "base/jx.h"
#include "base/sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared pieces of strategy --------------------------------------------- */

static json_t *obj_at(json_t *root, const char *path)
{
	json_t *v = jx_get(root, path);
	if (!json_is_object(v)) {
		v = json_object();
		jx_set(root, path, v);
	}
	return v;
}

static void default_str(json_t *o, const char *key, const char *value)
{
	const char *have = json_string_value(json_object_get(o, key));
	if (!have || !*have)
		json_object_set_new(o, key, json_string(value));
}

static void default_int(json_t *o, const char *key, json_int_t value)
{
	if (!json_is_integer(json_object_get(o, key)))
		json_object_set_new(o, key, json_integer(value));
}

/* imagePullPolicy: Always for :latest or untagged images, else IfNotPresent. */
static void default_container(json_t *c)
{
	const char *image = json_string_value(json_object_get(c, "image"));
	const char *slash = image ? strrchr(image, '/') : NULL;
	const char *tag = image ? strchr(slash ? slash : image, ':') : NULL;
	bool latest = !tag || strcmp(tag, ":latest") == 0;

	if (image && strchr(image, '@'))
		latest = false;
	default_str(c, "imagePullPolicy", latest ? "Always" : "IfNotPresent");
	default_str(c, "terminationMessagePath", "/dev/termination-log");
	default_str(c, "terminationMessagePolicy", "File");
	if (!json_object_get(c, "resources"))
		json_object_set_new(c, "resources", json_object());
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(c, "ports"), i, p) default_str(p, "protocol", "TCP");
}

static void default_pod_spec(json_t *spec)
{
	size_t i;
	json_t *c;

	default_str(spec, "restartPolicy", "Always");
	default_int(spec, "terminationGracePeriodSeconds", 30);
	default_str(spec, "dnsPolicy", "ClusterFirst");
	default_str(spec, "schedulerName", "default-scheduler");
	if (!json_object_get(spec, "securityContext"))
		json_object_set_new(spec, "securityContext", json_object());
	json_array_foreach(json_object_get(spec, "containers"), i, c) default_container(c);
	json_array_foreach(json_object_get(spec, "initContainers"), i, c) default_container(c);
}

static void validate_containers(struct validation *v, const json_t *spec, const char *path)
{
	json_t *cs = json_object_get(spec, "containers"), *c;
	char field[128];
	size_t i;

	if (json_array_size(cs) == 0) {
		snprintf(field, sizeof(field), "%s.containers", path);
		val_required(v, field);
		return;
	}
	json_array_foreach(cs, i, c)
	{
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *image = json_string_value(json_object_get(c, "image"));
		snprintf(field, sizeof(field), "%s.containers[%zu].name", path, i);
		if (!name || !*name)
			val_required(v, field);
		else
			val_dns_label(v, field, name);
		snprintf(field, sizeof(field), "%s.containers[%zu].image", path, i);
		if (!image || !*image)
			val_required(v, field);
	}
}

static bool in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static void validate_tolerations(struct validation *v, const json_t *spec, const char *path)
{
	static const char *const effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute",
					      NULL};
	static const char *const ops[] = {"Equal", "Exists", NULL};
	json_t *t;
	size_t i;
	char field[128];

	json_array_foreach(json_object_get(spec, "tolerations"), i, t)
	{
		const char *e = json_string_value(json_object_get(t, "effect"));
		const char *op = json_string_value(json_object_get(t, "operator"));
		snprintf(field, sizeof(field), "%s.tolerations[%zu].effect", path, i);
		if (e && *e && !in_list(effects, e))
			val_unsupported(v, field, e, effects);
		snprintf(field, sizeof(field), "%s.tolerations[%zu].operator", path, i);
		if (op && *op && !in_list(ops, op))
			val_unsupported(v, field, op, ops);
	}
}

static void validate_taints(struct validation *v, const json_t *spec)
{
	static const char *const effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute",
					      NULL};
	json_t *t;
	size_t i;
	char field[96];

	json_array_foreach(json_object_get(spec, "taints"), i, t)
	{
		const char *e = json_string_value(json_object_get(t, "effect"));
		const char *k = json_string_value(json_object_get(t, "key"));
		/* ValidateNode's path for them is metadata's, oddly: upstream's text. */
		snprintf(field, sizeof(field), "metadata.taints[%zu].key", i);
		if (!k || !*k)
			val_required(v, field);
		snprintf(field, sizeof(field), "metadata.taints[%zu].effect", i);
		if (!e || !*e)
			val_required(v, field);
		else if (!in_list(effects, e))
			val_unsupported(v, field, e, effects);
	}
}

/* ---- updates: what upstream's Validate*Update functions compare ------------ */

/* A value Go decodes to nil, or that apiequality.Semantic takes for it: a
 * field left out, null, an empty list or map. */
static bool is_nil(const json_t *v)
{
	return !v || json_is_null(v) || (json_is_array(v) && !json_array_size(v)) ||
	       (json_is_object(v) && !json_object_size(v));
}

/* apiequality.Semantic.DeepEqual of two decoded values. */
static bool sem_equal(const json_t *a, const json_t *b)
{
	const char *k;
	json_t *x;
	size_t i;

	if (is_nil(a) || is_nil(b))
		return is_nil(a) && is_nil(b);
	if (json_is_object(a) && json_is_object(b)) {
		json_object_foreach((json_t *)a, k, x)
		{
			if (!sem_equal(x, json_object_get(b, k)))
				return false;
		}
		json_object_foreach((json_t *)b, k, x)
		{
			if (!json_object_get(a, k) && !is_nil(x))
				return false;
		}
		return true;
	}
	if (json_is_array(a) && json_is_array(b)) {
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (i = 0; i < json_array_size(a); i++)
			if (!sem_equal(json_array_get(a, i), json_array_get(b, i)))
				return false;
		return true;
	}
	return json_equal(a, b);
}

/* ValidateImmutableField: "<field>: Invalid value: <now>: field is immutable". */
static void immutable(struct validation *v, const char *field, const json_t *now, const json_t *old)
{
	if (!sem_equal(now, old))
		val_invalid(v, field, now ? now : json_null(), "field is immutable");
}

/* The bad values of field errors as Go's %#v prints them. */
static void go_strings(struct sbuf *b, const json_t *list)
{
	json_t *s;
	size_t i;

	if (!json_is_array(list)) {
		sbuf_add(b, "[]string(nil)");
		return;
	}
	sbuf_add(b, "[]string{");
	json_array_foreach(list, i, s)
	{
		sbuf_add(b, i ? ", " : "");
		sbuf_quote(b, json_string_value(s) ? json_string_value(s) : "");
	}
	sbuf_addc(b, '}');
}

static int cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* map[string]string{"a":"b"}: fmt sorts the keys. */
static void go_string_map(struct sbuf *b, const json_t *map)
{
	size_t n = json_object_size(map), i = 0;
	const char **keys, *k;
	json_t *val;

	if (!json_is_object(map)) {
		sbuf_add(b, "map[string]string(nil)");
		return;
	}
	keys = xcalloc(n, sizeof(*keys));
	json_object_foreach((json_t *)map, k, val) keys[i++] = k;
	qsort(keys, n, sizeof(*keys), cmp_keys);
	sbuf_add(b, "map[string]string{");
	for (i = 0; i < n; i++) {
		const char *s = json_string_value(json_object_get(map, keys[i]));
		sbuf_add(b, i ? ", " : "");
		sbuf_quote(b, keys[i]);
		sbuf_addc(b, ':');
		sbuf_quote(b, s ? s : "");
	}
	sbuf_addc(b, '}');
	free(keys);
}

/* A *metav1.LabelSelector: "v1.LabelSelector{MatchLabels:..., MatchExpressions:...}". */
static char *go_label_selector(const json_t *sel)
{
	struct sbuf b = SBUF_INIT;
	json_t *exprs = json_object_get(sel, "matchExpressions"), *e;
	size_t i;

	if (!json_is_object(sel))
		return xstrdup("null");
	sbuf_add(&b, "v1.LabelSelector{MatchLabels:");
	go_string_map(&b, json_object_get(sel, "matchLabels"));
	sbuf_add(&b, ", MatchExpressions:[]v1.LabelSelectorRequirement");
	if (!json_is_array(exprs))
		sbuf_add(&b, "(nil)");
	else
		sbuf_addc(&b, '{');
	json_array_foreach(exprs, i, e)
	{
		sbuf_add(&b, i ? ", v1.LabelSelectorRequirement{Key:"
			       : "v1.LabelSelectorRequirement{Key:");
		sbuf_quote(&b, jx_str(e, "key") ? jx_str(e, "key") : "");
		sbuf_add(&b, ", Operator:");
		sbuf_quote(&b, jx_str(e, "operator") ? jx_str(e, "operator") : "");
		sbuf_add(&b, ", Values:");
		go_strings(&b, json_object_get(e, "values"));
		sbuf_addc(&b, '}');
	}
	sbuf_add(&b, json_is_array(exprs) ? "}}" : "}");
	return sbuf_take(&b);
}

/* ValidateImmutableField of a label selector (workloads' and Jobs' spec.selector). */
static void selector_immutable(struct validation *v, const json_t *now, const json_t *old)
{
	char *shown;

	if (sem_equal(now, old))
		return;
	shown = go_label_selector(now);
	val_invalid_shown(v, "spec.selector", shown, "field is immutable");
	free(shown);
}

/* ---- per kind -------------------------------------------------------------- */

static void pod_defaults(json_t *obj)
{
	json_t *spec = obj_at(obj, "spec"), *status = obj_at(obj, "status");
	default_pod_spec(spec);
	default_int(spec, "priority", 0);
	if (!json_object_get(spec, "enableServiceLinks"))
		json_object_set_new(spec, "enableServiceLinks", json_true());
	default_str(status, "phase", "Pending");
	default_str(status, "qosClass", "BestEffort");
}

/* The fields a user cannot see through ValidatePodUpdate's comparison: every
 * one a pod update may change, copied from the old spec into new. */
static void pod_spec_munge(json_t *spec, const json_t *old)
{
	static const char *const lists[] = {"containers", "initContainers"};
	static const char *const taken[] = {"activeDeadlineSeconds", "schedulingGates",
					    "tolerations"};
	json_t *c, *t;
	size_t i;

	for (size_t l = 0; l < 2; l++) {
		json_t *was = json_object_get(old, lists[l]);
		json_array_foreach(json_object_get(spec, lists[l]), i, c)
		{
			json_t *img = json_object_get(json_array_get(was, i), "image");
			if (img)
				json_object_set(c, "image", img);
			else
				json_object_del(c, "image");
		}
	}
	for (size_t k = 0; k < 3; k++) {
		if ((t = json_object_get(old, taken[k])))
			json_object_set(spec, taken[k], t);
		else
			json_object_del(spec, taken[k]);
	}
	/* A negative grace period (an old client's) may become 1. */
	t = json_object_get(old, "terminationGracePeriodSeconds");
	if (json_integer_value(t) < 0 &&
	    json_integer_value(json_object_get(spec, "terminationGracePeriodSeconds")) == 1)
		json_object_set(spec, "terminationGracePeriodSeconds", t);
	/* A gated pod's node selector may grow (not shrink, not change). */
	if (json_array_size(json_object_get(old, "schedulingGates")) > 0) {
		json_t *now = json_object_get(spec, "nodeSelector"), *had = json_object_get(old,
											    "nodeSelector");
		const char *k;
		bool kept = true;
		json_object_foreach(had, k, t) kept = kept && json_equal(t, json_object_get(now, k));
		if (kept) {
			if (had)
				json_object_set(spec, "nodeSelector", had);
			else
				json_object_del(spec, "nodeSelector");
		}
	}
}

/* "\n-  key: old\n+  key: new" for each top-level spec field that differs. */
static void spec_diff(char *out, size_t cap, const json_t *old, const json_t *now)
{
	size_t len = strlen(out);
	const char *k;
	json_t *val;
	json_t *keys = json_object();

	json_object_foreach((json_t *)old, k, val) json_object_set(keys, k, json_true());
	json_object_foreach((json_t *)now, k, val) json_object_set(keys, k, json_true());
	json_object_foreach(keys, k, val)
	{
		json_t *a = json_object_get(old, k), *b = json_object_get(now, k);
		if (json_equal(a, b) || len + 8 >= cap)
			continue;
		char *sa = a ? json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
		char *sb = b ? json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
		if (sa)
			len += (size_t)snprintf(out + len, cap - len, "\n-  %s: %s", k, sa);
		if (sb && len < cap)
			len += (size_t)snprintf(out + len, cap - len, "\n+  %s: %s", k, sb);
		free(sa);
		free(sb);
	}
	json_decref(keys);
}

/* A toleration with tolerationSeconds taken out, for comparison. */
static json_t *toleration_sans_seconds(const json_t *t)
{
	json_t *c = json_deep_copy(t);
	if (json_is_object(c))
		json_object_del(c, "tolerationSeconds");
	return c;
}

/* Existing tolerations stay (their tolerationSeconds may change); new ones may join. */
static void only_added_tolerations(struct validation *v, const json_t *now, const json_t *old)
{
	json_t *o, *n;
	size_t i, j;

	json_array_foreach(old, i, o)
	{
		json_t *a = toleration_sans_seconds(o);
		bool found = false;
		json_array_foreach(now, j, n)
		{
			json_t *b = toleration_sans_seconds(n);
			found = json_equal(a, b);
			json_decref(b);
			if (found)
				break;
		}
		json_decref(a);
		if (!found) {
			val_forbidden(v, "spec.tolerations",
				      "existing toleration can not be modified except its "
				      "tolerationSeconds");
			return;
		}
	}
}

/* Scheduling gates may only go. */
static void only_deleted_gates(struct validation *v, const json_t *now, const json_t *old)
{
	json_t *g, *h;
	size_t i, j;
	char field[96], msg[320];

	json_array_foreach(now, i, g)
	{
		const char *name = jx_str(g, "name");
		bool had = false;
		json_array_foreach(old, j, h)
		{
			const char *was = jx_str(h, "name");
			had = had || (name && was && !strcmp(was, name));
		}
		if (had)
			continue;
		snprintf(field, sizeof(field), "spec.schedulingGates[%zu].name", i);
		snprintf(msg, sizeof(msg), "only deletion is allowed, but found new scheduling gate '%s'",
			 name ? name : "");
		val_forbidden(v, field, msg);
	}
}

/* ValidatePodUpdate: only images, a shorter activeDeadlineSeconds, added
 * tolerations, removed scheduling gates (and what pod_spec_munge names) may
 * change in a pod's spec. */
static void pod_update_validate(struct validation *v, const json_t *spec, const json_t *old)
{
	json_t *now_ads = json_object_get(spec, "activeDeadlineSeconds");
	json_t *old_ads = json_object_get(old, "activeDeadlineSeconds");

	if (json_array_size(json_object_get(spec, "containers")) !=
		    json_array_size(json_object_get(old, "containers")) ||
	    json_array_size(json_object_get(spec, "initContainers")) !=
		    json_array_size(json_object_get(old, "initContainers"))) {
		val_forbidden(v, "spec.containers", "pod updates may not add or remove containers");
		return;
	}
	if (now_ads && !json_is_null(now_ads)) {
		json_int_t n = json_integer_value(now_ads);
		if (!json_is_integer(now_ads) || n < 0 || n > 2147483647) {
			val_invalid(v, "spec.activeDeadlineSeconds", now_ads,
				    "must be between 0 and 2147483647, inclusive");
			return;
		}
		if (json_is_integer(old_ads) && json_integer_value(old_ads) < n) {
			val_invalid(v, "spec.activeDeadlineSeconds", now_ads,
				    "must be less than or equal to previous value");
			return;
		}
	} else if (old_ads && !json_is_null(old_ads)) {
		val_invalid(v, "spec.activeDeadlineSeconds", json_null(),
			    "must not update from a positive integer to nil value");
	}
	only_added_tolerations(v, json_object_get(spec, "tolerations"),
			       json_object_get(old, "tolerations"));
	only_deleted_gates(v, json_object_get(spec, "schedulingGates"),
			   json_object_get(old, "schedulingGates"));

	json_t *munged = json_deep_copy(spec);
	pod_spec_munge(munged, old);
	if (!json_equal(munged, old)) {
		char msg[2048] = "pod updates may not change fields other than "
				 "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec."
				 "activeDeadlineSeconds`,`spec.tolerations` (only additions to "
				 "existing tolerations),`spec.terminationGracePeriodSeconds` (allow "
				 "it to be set to 1 if it was previously negative)";
		spec_diff(msg, sizeof(msg), old, munged);
		val_forbidden(v, "spec", msg);
	}
	json_decref(munged);
}

static void pod_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	const json_t *spec = json_object_get(obj, "spec");
	validate_containers(v, spec, "spec");
	validate_tolerations(v, spec, "spec");
	if (old)
		pod_update_validate(v, spec, json_object_get(old, "spec"));
}

/* The node's pod CIDRs as the v1 conversion has them: podCIDRs, or the
 * singular podCIDR alone. A new reference. */
static json_t *node_cidrs(const json_t *spec)
{
	json_t *list = json_object_get(spec, "podCIDRs");
	const char *one = jx_str(spec, "podCIDR");

	if (json_array_size(list))
		return json_incref(list);
	return one && *one ? json_pack("[s]", one) : json_array();
}

/* ValidateNodeUpdate: podCIDRs and providerID may only go from unset to
 * set; externalID never changes. */
static void node_update_validate(struct validation *v, const json_t *spec, const json_t *old)
{
	static const char cidr[] = "node updates may not change podCIDR except from \"\" to valid";
	json_t *was = node_cidrs(old), *now = node_cidrs(spec);
	const char *pid = jx_str(old, "providerID");
	size_t i;

	if (json_array_size(was) && json_array_size(was) != json_array_size(now))
		val_forbidden(v, "spec.podCIDRs", cidr);
	else
		for (i = 0; i < json_array_size(was); i++)
			if (!json_equal(json_array_get(was, i), json_array_get(now, i)))
				val_forbidden(v, "spec.podCIDRs", cidr);
	if (pid && *pid &&
	    strcmp(pid, jx_str(spec, "providerID") ? jx_str(spec, "providerID") : ""))
		val_forbidden(v, "spec.providerID",
			      "node updates may not change providerID except from \"\" to valid");
	json_decref(was);
	json_decref(now);
}

static void node_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	const json_t *spec = json_object_get(obj, "spec"), *was = jx_get(old, "spec");
	const char *ext = jx_str(spec, "externalID"), *had = jx_str(was, "externalID");

	/* ValidateNode, then ValidateNodeUpdate. */
	validate_taints(v, spec);
	if (old)
		node_update_validate(v, spec, was);
	if (old && strcmp(ext ? ext : "", had ? had : ""))
		val_forbidden(v, "spec.externalID", "may not be updated");
}

/* A namespace starts Active, with the namespace controller's finalizer
 * (upstream's PrepareForCreate appends it to any given list). */
static void namespace_prepare(json_t *obj)
{
	json_t *spec = json_object_get(obj, "spec"), *fins, *f;
	bool has = false;
	size_t i;

	if (!json_is_object(spec))
		json_object_set_new(obj, "spec", spec = json_object());
	if (!json_is_array(fins = json_object_get(spec, "finalizers")))
		json_object_set_new(spec, "finalizers", fins = json_array());
	json_array_foreach(fins, i, f)
	{
		const char *name = json_string_value(f);
		has = has || (name && !strcmp(name, "kubernetes"));
	}
	if (!has)
		json_array_append_new(fins, json_string("kubernetes"));
	json_object_set_new(obj, "status", json_pack("{s:s}", "phase", "Active"));
}

static void namespace_defaults(json_t *obj)
{
	json_t *status = obj_at(obj, "status");
	/* spec.finalizers: namespace_prepare, on create only; spec itself is
	 * always there, as Go's NamespaceSpec (not omitempty) is. */
	obj_at(obj, "spec");
	default_str(status, "phase", "Active");
	/* Every namespace carries its name as a label (1.22+). */
	if (jx_str(obj, "metadata.name"))
		json_object_set_new(obj_at(obj, "metadata.labels"), "kubernetes.io/metadata.name",
				    json_string(jx_str(obj, "metadata.name")));
}

static void namespace_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	const char *name = jx_str(obj, "metadata.name");
	if (name)
		val_dns_label(v, "metadata.name", name);
}

/* Workloads with a pod template and a selector that must match it. */
static void workload_spec_validate(const json_t *obj, struct validation *v)
{
	const json_t *sel = jx_get(obj, "spec.selector");
	const json_t *labels = jx_get(obj, "spec.template.metadata.labels");
	struct label_selector *ls;

	if (!sel) {
		val_required(v, "spec.selector");
	} else if (!(ls = label_selector_from_json_at(sel, "spec.selector"))) {
		val_invalid(v, "spec.selector", sel, "invalid label selector");
	} else {
		if (label_selector_empty(ls))
			val_invalid(v, "spec.selector", sel,
				    "empty selector is invalid for deployment");
		else if (!label_selector_match(ls, labels))
			val_invalid(v, "spec.template.metadata.labels", labels ? labels : json_null(),
				    "`selector` does not match template `labels`");
		label_selector_free(ls);
	}
	validate_containers(v, jx_get(obj, "spec.template.spec"), "spec.template.spec");
	if (json_integer_value(jx_get(obj, "spec.replicas")) < 0)
		val_invalid(v, "spec.replicas", jx_get(obj, "spec.replicas"),
			    "must be greater than or equal to 0");
}

/* Deployments, ReplicaSets, DaemonSets: in apps/v1 the strategies' update
 * check adds an immutable selector after the spec's errors. */
static void workload_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	workload_spec_validate(obj, v);
	if (old)
		selector_immutable(v, jx_get(obj, "spec.selector"), jx_get(old, "spec.selector"));
}

/* ValidateStatefulSetUpdate: besides scaling, rolling out and retention, a
 * StatefulSet's spec is fixed: its selector, serviceName, claim templates,
 * podManagementPolicy, revisionHistoryLimit (mutable only from 1.33). One
 * error for all of them. */
static void statefulset_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	static const char *const changeable[] = {"replicas",
						 "ordinals",
						 "template",
						 "updateStrategy",
						 "persistentVolumeClaimRetentionPolicy",
						 "minReadySeconds",
						 NULL};
	json_t *now, *was;

	workload_spec_validate(obj, v);
	if (!old)
		return;
	now = json_deep_copy(jx_get(obj, "spec"));
	was = json_deep_copy(jx_get(old, "spec"));
	for (size_t i = 0; changeable[i]; i++) {
		json_object_del(now, changeable[i]);
		json_object_del(was, changeable[i]);
	}
	if (!sem_equal(now, was))
		val_forbidden(v, "spec",
			      "updates to statefulset spec for fields other than 'replicas', "
			      "'ordinals', 'template', 'updateStrategy', "
			      "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
			      "forbidden");
	json_decref(now);
	json_decref(was);
}

static void template_defaults(json_t *obj)
{
	json_t *spec = obj_at(obj, "spec");
	default_int(spec, "replicas", 1);
	default_pod_spec(obj_at(obj, "spec.template.spec"));
}

static void deployment_defaults(json_t *obj)
{
	json_t *spec = obj_at(obj, "spec"), *strategy = obj_at(obj, "spec.strategy");
	template_defaults(obj);
	default_int(spec, "revisionHistoryLimit", 10);
	default_int(spec, "progressDeadlineSeconds", 600);
	default_str(strategy, "type", "RollingUpdate");
	if (!strcmp(json_string_value(json_object_get(strategy, "type")), "RollingUpdate")) {
		json_t *ru = obj_at(obj, "spec.strategy.rollingUpdate");
		if (!json_object_get(ru, "maxUnavailable"))
			json_object_set_new(ru, "maxUnavailable", json_string("25%"));
		if (!json_object_get(ru, "maxSurge"))
			json_object_set_new(ru, "maxSurge", json_string("25%"));
	}
}

static void daemonset_defaults(json_t *obj)
{
	json_t *spec = obj_at(obj, "spec"), *strategy = obj_at(obj, "spec.updateStrategy");
	default_pod_spec(obj_at(obj, "spec.template.spec"));
	default_int(spec, "revisionHistoryLimit", 10);
	default_str(strategy, "type", "RollingUpdate");
}

static void statefulset_defaults(json_t *obj)
{
	json_t *spec = obj_at(obj, "spec");
	template_defaults(obj);
	default_int(spec, "revisionHistoryLimit", 10);
	default_str(spec, "podManagementPolicy", "OrderedReady");
	default_str(obj_at(obj, "spec.updateStrategy"), "type", "RollingUpdate");
}

/* batch/v1 Job: SetDefaults_Job, and on create generateSelector — the
 * controller-uid and job-name labels on the template (both spellings),
 * the selector on batch.kubernetes.io/controller-uid — unless
 * manualSelector. The uid is the server's by now (prepare_create). */
static void job_defaults(json_t *obj)
{
	static const char *const name_labels[] = {"job-name", "batch.kubernetes.io/job-name"};
	static const char *const uid_labels[] = {"controller-uid",
						 "batch.kubernetes.io/controller-uid"};
	json_t *spec = obj_at(obj, "spec");
	const char *uid = jx_str(obj, "metadata.uid"), *name = jx_str(obj, "metadata.name");

	if (!json_object_get(spec, "completions") && !json_object_get(spec, "parallelism")) {
		json_object_set_new(spec, "completions", json_integer(1));
		json_object_set_new(spec, "parallelism", json_integer(1));
	}
	default_int(spec, "parallelism", 1);
	default_int(spec, "backoffLimit", 6);
	default_str(spec, "completionMode", "NonIndexed");
	if (!json_object_get(spec, "suspend"))
		json_object_set_new(spec, "suspend", json_false());
	default_str(spec, "podReplacementPolicy",
		    json_object_get(spec, "podFailurePolicy") ? "Failed" : "TerminatingOrFailed");
	default_pod_spec(obj_at(obj, "spec.template.spec"));
	if (json_is_true(json_object_get(spec, "manualSelector")) || !uid || !name)
		return;
	json_t *labels = obj_at(obj, "spec.template.metadata.labels");
	if (json_object_get(labels, uid_labels[1]))
		return; /* generated at create already */
	for (int i = 0; i < 2; i++) {
		if (!json_object_get(labels, name_labels[i]))
			json_object_set_new(labels, name_labels[i], json_string(name));
		if (!json_object_get(labels, uid_labels[i]))
			json_object_set_new(labels, uid_labels[i], json_string(uid));
	}
	json_t *ml = obj_at(obj, "spec.selector.matchLabels");
	if (!json_object_get(ml, uid_labels[1]))
		json_object_set_new(ml, uid_labels[1], json_string(uid));
}

/* validateCompletions: fixed, except that an Indexed Job may scale
 * (ElasticIndexedJob, GA in 1.31) with parallelism changed to match. */
static void job_completions_update(struct validation *v, const json_t *obj, const json_t *old)
{
	const json_t *now = jx_get(obj, "spec.completions"), *was = jx_get(old, "spec.completions");
	const char *mode = jx_str(obj, "spec.completionMode");

	if (!mode || strcmp(mode, "Indexed")) {
		immutable(v, "spec.completions", now, was);
		return;
	}
	/* A nil count is validateJobSpec's error, not this one's. */
	if (sem_equal(now, was) || is_nil(now))
		return;
	if (!json_equal(now, jx_get(obj, "spec.parallelism")))
		val_invalid(v, "spec.completions", now,
			    "can only be modified in tandem with spec.parallelism");
}

/* Keep in tmpl (a copy of the old template) what the new one has at path. */
static void take_from(json_t *tmpl, const json_t *now, const char *path)
{
	json_t *x = jx_get(now, path);
	if (x)
		jx_set(tmpl, path, json_deep_copy(x));
	else
		jx_del(tmpl, path);
}

/* validatePodTemplateUpdate: a Job's pod template is fixed, except where
 * its pods go while it is suspended and has never started
 * (AllowMutableSchedulingDirectives). */
static void job_template_update(struct validation *v, const json_t *obj, const json_t *old)
{
	static const char *const taken[] = {"spec.nodeSelector", "spec.tolerations",
					    "metadata.annotations", "metadata.labels",
					    "spec.schedulingGates"};
	const json_t *now = jx_get(obj, "spec.template"),
		     *started = jx_get(old, "status.startTime");
	json_t *was = json_deep_copy(jx_get(old, "spec.template"));

	if (!was)
		was = json_object();
	if (json_is_true(jx_get(old, "spec.suspend")) && (!started || json_is_null(started))) {
		json_t *aff = jx_get(now, "spec.affinity"), *had = jx_get(was, "spec.affinity");
		if (!json_is_object(aff) && json_is_object(had)) {
			/* Cleared: fine if node affinity was all it had. */
			const char *k;
			json_t *x;
			bool rest = false;
			json_object_del(had, "nodeAffinity");
			json_object_foreach(had, k, x) rest = rest || !json_is_null(x);
			if (!rest)
				jx_del(was, "spec.affinity");
		} else if (json_is_object(aff)) {
			if (!json_is_object(had))
				jx_set(was, "spec.affinity", had = json_object());
			take_from(had, aff, "nodeAffinity");
		}
		for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
			take_from(was, now, taken[i]);
	}
	immutable(v, "spec.template", now, was);
	json_decref(was);
}

/* ValidateJobSpecUpdate, after the spec's own errors, in upstream's order. */
static void job_update_validate(struct validation *v, const json_t *obj, const json_t *old)
{
	static const char *const fixed[] = {"completionMode", "podFailurePolicy",
					    "backoffLimitPerIndex", "managedBy", "successPolicy"};
	char field[64];

	job_completions_update(v, obj, old);
	selector_immutable(v, jx_get(obj, "spec.selector"), jx_get(old, "spec.selector"));
	job_template_update(v, obj, old);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		snprintf(field, sizeof(field), "spec.%s", fixed[i]);
		immutable(v, field, jx_get(obj, field), jx_get(old, field));
	}
}

static void job_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	static const char *const policies[] = {"OnFailure", "Never", NULL};
	static const char *const counts[] = {"spec.parallelism", "spec.completions",
					     "spec.backoffLimit", "spec.activeDeadlineSeconds", NULL};
	const char *rp = jx_str(obj, "spec.template.spec.restartPolicy");

	workload_spec_validate(obj, v);
	if (!rp || !in_list(policies, rp))
		val_unsupported(v, "spec.template.spec.restartPolicy", rp ? rp : "", policies);
	for (size_t i = 0; counts[i]; i++) {
		json_t *n = jx_get(obj, counts[i]);
		if (json_is_integer(n) && json_integer_value(n) < 0)
			val_invalid(v, counts[i], n, "must be greater than or equal to 0");
	}
	if (old)
		job_update_validate(v, obj, old);
}

/* ---- rbac.authorization.k8s.io/v1 (upstream's rbac validation) ----------- */

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* SetDefaults_Subject / _RoleBinding: the API group a kind implies. */
static void rbac_binding_defaults(json_t *obj)
{
	json_t *sub;
	size_t i;
	json_t *ref = json_object_get(obj, "roleRef");

	if (json_is_object(ref))
		default_str(ref, "apiGroup", RBAC_GROUP);
	json_array_foreach(json_object_get(obj, "subjects"), i, sub)
	{
		const char *kind = jx_str(sub, "kind");
		if (!json_is_object(sub) || json_object_get(sub, "apiGroup"))
			continue;
		if (kind && (!strcmp(kind, "User") || !strcmp(kind, "Group")))
			json_object_set_new(sub, "apiGroup", json_string(RBAC_GROUP));
		else if (kind && !strcmp(kind, "ServiceAccount"))
			json_object_set_new(sub, "apiGroup", json_string(""));
	}
}

/* ValidatePolicyRule: verbs always; resource rules need groups and
 * resources; non-resource URLs only in cluster roles, never with resources. */
static void rbac_rules_validate(struct validation *v, const json_t *obj, bool cluster)
{
	json_t *rule;
	size_t i;
	char field[96];

	json_array_foreach(json_object_get(obj, "rules"), i, rule)
	{
		json_t *urls = json_object_get(rule, "nonResourceURLs");
		snprintf(field, sizeof(field), "rules[%zu].verbs", i);
		if (!json_array_size(json_object_get(rule, "verbs")))
			val_required_detail(v, field, "verbs must contain at least one value");
		if (json_array_size(urls)) {
			snprintf(field, sizeof(field), "rules[%zu].nonResourceURLs", i);
			if (!cluster)
				val_invalid(v, field, urls,
					    "namespaced rules cannot apply to non-resource URLs");
			else if (json_array_size(json_object_get(rule, "resources")) ||
				 json_array_size(json_object_get(rule, "apiGroups")))
				val_invalid(v, field, urls,
					    "rules cannot apply to both regular resources and "
					    "non-resource URLs");
			continue;
		}
		snprintf(field, sizeof(field), "rules[%zu].apiGroups", i);
		if (!json_array_size(json_object_get(rule, "apiGroups")))
			val_required_detail(v, field,
					    "resource rules must supply at least one api group");
		snprintf(field, sizeof(field), "rules[%zu].resources", i);
		if (!json_array_size(json_object_get(rule, "resources")))
			val_required_detail(v, field, "resource rules must supply at least one resource");
	}
}

static void role_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	(void)old;
	rbac_rules_validate(v, obj, false);
}

static void clusterrole_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	json_t *sel;
	size_t i;
	char field[96];

	(void)old;
	rbac_rules_validate(v, obj, true);
	json_array_foreach(jx_get(obj, "aggregationRule.clusterRoleSelectors"), i, sel)
	{
		struct label_selector *ls;
		snprintf(field, sizeof(field), "aggregationRule.clusterRoleSelectors[%zu]", i);
		if (!(ls = label_selector_from_json_at(sel, field)))
			val_invalid(v, field, sel, "invalid label selector");
		label_selector_free(ls);
	}
}

/* ValidateRoleBindingUpdate: a binding's roleRef (a struct of three strings)
 * is fixed; the error shows the new one as Go's %#v. */
static void role_ref_update(struct validation *v, const json_t *ref, const json_t *old)
{
	static const char *const keys[] = {"apiGroup", "kind", "name"};
	static const char *const shown[] = {"rbac.RoleRef{APIGroup:", ", Kind:", ", Name:"};
	struct sbuf b = SBUF_INIT;
	bool same = true;
	char *text;

	for (size_t i = 0; i < 3; i++) {
		const char *now = jx_str(ref, keys[i]), *was = jx_str(old, keys[i]);
		same = same && !strcmp(now ? now : "", was ? was : "");
		sbuf_add(&b, shown[i]);
		sbuf_quote(&b, now ? now : "");
	}
	sbuf_addc(&b, '}');
	text = sbuf_take(&b);
	if (!same)
		val_invalid_shown(v, "roleRef", text, "cannot change roleRef");
	free(text);
}

/* ValidateRoleBinding / ValidateClusterRoleBinding (and their updates). */
static void rbac_binding_validate(const json_t *obj, const json_t *old, struct validation *v,
				  bool cluster)
{
	static const char *const groups[] = {RBAC_GROUP, NULL};
	static const char *const role_kinds[] = {"Role", "ClusterRole", NULL};
	static const char *const cluster_kinds[] = {"ClusterRole", NULL};
	static const char *const subject_kinds[] = {"ServiceAccount", "User", "Group", NULL};
	static const char *const sa_groups[] = {"", NULL};
	const json_t *ref = json_object_get(obj, "roleRef");
	const char *g = jx_str(ref, "apiGroup"), *k = jx_str(ref, "kind"), *n = jx_str(ref, "name");
	json_t *sub;
	size_t i;
	char field[96];

	if (!g || !in_list(groups, g))
		val_unsupported(v, "roleRef.apiGroup", g ? g : "", groups);
	if (!k || !in_list(cluster ? cluster_kinds : role_kinds, k))
		val_unsupported(v, "roleRef.kind", k ? k : "", cluster ? cluster_kinds : role_kinds);
	if (!n || !*n)
		val_required(v, "roleRef.name");
	json_array_foreach(json_object_get(obj, "subjects"), i, sub)
	{
		const char *sk = jx_str(sub, "kind"), *sg = jx_str(sub, "apiGroup") ?: "";
		const char *sn = jx_str(sub, "name");
		snprintf(field, sizeof(field), "subjects[%zu].name", i);
		if (!sn || !*sn)
			val_required(v, field);
		snprintf(field, sizeof(field), "subjects[%zu].kind", i);
		if (!sk || !in_list(subject_kinds, sk)) {
			val_unsupported(v, field, sk ? sk : "", subject_kinds);
			continue;
		}
		snprintf(field, sizeof(field), "subjects[%zu].apiGroup", i);
		if (!strcmp(sk, "ServiceAccount")) {
			if (*sg)
				val_unsupported(v, field, sg, sa_groups);
			snprintf(field, sizeof(field), "subjects[%zu].namespace", i);
			if (cluster && !*(jx_str(sub, "namespace") ?: ""))
				val_required(v, field);
		} else if (strcmp(sg, RBAC_GROUP)) {
			val_unsupported(v, field, sg, groups);
		}
	}
	if (old)
		role_ref_update(v, ref, json_object_get(old, "roleRef"));
}

static void rolebinding_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	rbac_binding_validate(obj, old, v, false);
}

static void clusterrolebinding_validate(const json_t *obj, const json_t *old,
					struct validation *v)
{
	rbac_binding_validate(obj, old, v, true);
}

static void csr_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	const char *req = jx_str(obj, "spec.request");
	const char *signer = jx_str(obj, "spec.signerName");
	json_t *usages = jx_get(obj, "spec.usages"), *u;
	json_t *exp = jx_get(obj, "spec.expirationSeconds");
	size_t i;

	if (!req || !*req) {
		val_required(v, "spec.request");
	} else if (!old || strcmp(req, jx_str(old, "spec.request") ?: "")) {
		/* Parsed when it is new: an update that keeps it (approval,
		 * status) has nothing to check again, and the parse is most of
		 * a CSR write's cost in a bootstrap storm. */
		/* spec.request is base64 of a PEM CERTIFICATE REQUEST. */
		size_t n = 0;
		unsigned char *pem = b64_decode(req, &n);
		X509_REQ *x = pem ? pki_csr_parse((char *)pem, n) : NULL;
		if (!x)
			val_invalid_str(v, "spec.request", "<redacted>",
					"invalid certificate request");
		X509_REQ_free(x);
		free(pem);
	}
	if (!signer || !*signer)
		val_required(v, "spec.signerName");
	if (json_array_size(usages) == 0)
		val_required(v, "spec.usages");
	json_array_foreach(usages, i, u)
	{
		unsigned bit;
		if (!json_is_string(u) || pki_usage_parse(json_string_value(u), &bit) < 0) {
			char field[64];
			snprintf(field, sizeof(field), "spec.usages[%zu]", i);
			val_invalid(v, field, u, "unsupported usage");
		}
	}
	if (exp && json_integer_value(exp) < 600)
		val_invalid(v, "spec.expirationSeconds", exp,
			    "may not specify a duration less than 600 seconds (10 minutes)");
	if (old) {
		val_immutable(v, "spec", json_object_get(obj, "spec"),
			      json_object_get(old, "spec"));
	}
}

static void lease_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	json_t *d = jx_get(obj, "spec.leaseDurationSeconds");
	if (d && json_integer_value(d) <= 0)
		val_invalid(v, "spec.leaseDurationSeconds", d, "must be greater than 0");
}

static void event_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	if (!jx_get(obj, "involvedObject"))
		val_required(v, "involvedObject");
}

static void service_defaults(json_t *obj)
{
	json_t *spec = obj_at(obj, "spec"), *p;
	size_t i;
	default_str(spec, "type", "ClusterIP");
	default_str(spec, "sessionAffinity", "None");
	json_array_foreach(json_object_get(spec, "ports"), i, p)
	{
		default_str(p, "protocol", "TCP");
		if (!json_object_get(p, "targetPort") && json_object_get(p, "port"))
			json_object_set(p, "targetPort", json_object_get(p, "port"));
	}
}

/* stringData is write-only: the v1 conversion merges it into data (its
 * values win) and nothing stores it. */
static void secret_defaults(json_t *obj)
{
	json_t *sd = json_object_get(obj, "stringData"), *v;
	const char *k;

	default_str(obj, "type", "Opaque");
	if (json_is_object(sd) && json_object_size(sd)) {
		json_t *data = obj_at(obj, "data");
		json_object_foreach(sd, k, v)
		{
			const char *text = json_string_value(v) ? json_string_value(v) : "";
			char *b64 = b64_encode(text, strlen(text));
			json_object_set_new(data, k, json_string(b64));
			free(b64);
		}
	}
	json_object_del(obj, "stringData");
}

static const char *ip_at(const json_t *ips, size_t i)
{
	const char *ip = jx_array_str(ips, i);
	return ip ? ip : "";
}

/* The clusterIPs a Service update leaves, as upstream's REST storage makes
 * them before validation (patchAllocatedValues, then normalizeClusterIPs):
 * left out means kept; a changed singular clusterIP moves the list along.
 * old_ips: the stored ones (clusterIPs, or the singular alone). New refs. */
static json_t *service_ips(const json_t *spec, const json_t *old, json_t **old_ips)
{
	json_t *ips = json_object_get(spec, "clusterIPs"),
	       *had = json_object_get(old, "clusterIPs");
	const char *ip = jx_str(spec, "clusterIP"), *was = jx_str(old, "clusterIP");

	if (!json_array_size(had))
		had = was && *was ? json_pack("[s]", was) : json_array();
	else
		json_incref(had);
	if (!was || !*was)
		was = ip_at(had, 0);
	ips = json_array_size(ips) ? json_deep_copy(ips) : json_array();
	if (!ip || !*ip)
		ip = was;
	if (!json_array_size(ips) && json_array_size(had)) {
		json_decref(ips);
		ips = json_deep_copy(had);
	}
	if (strcmp(ip, was) && json_equal(ips, had)) {
		json_decref(ips);
		ips = *ip ? json_pack("[s]", ip) : json_array();
	}
	*old_ips = had;
	return ips;
}

static bool is_headless(const json_t *ips)
{
	return json_array_size(ips) == 1 && !strcmp(ip_at(ips, 0), "None");
}

static void ips_invalid(struct validation *v, const char *field, const json_t *ips,
			const char *detail)
{
	struct sbuf b = SBUF_INIT;
	char *shown;

	go_strings(&b, json_array_size(ips) ? ips : NULL);
	shown = sbuf_take(&b);
	val_invalid_shown(v, field, shown, detail);
	free(shown);
}

/* validateUpgradeDowngradeClusterIPs: the primary clusterIP never changes
 * once set (a secondary may come and go), unless ExternalName is involved. */
static void service_ips_update(struct validation *v, const json_t *spec, const json_t *old)
{
	static const char changed[] = "may not change once set";
	json_t *had, *ips;
	size_t n, m;

	if (!strcmp(jx_str(spec, "type") ? jx_str(spec, "type") : "", "ExternalName") ||
	    !strcmp(jx_str(old, "type") ? jx_str(old, "type") : "", "ExternalName"))
		return;
	ips = service_ips(spec, old, &had);
	n = json_array_size(had);
	m = json_array_size(ips);
	if (is_headless(had) && is_headless(ips)) {
		/* headless stays headless */
	} else if (n == m) {
		for (size_t i = 0; i < n; i++) {
			char field[48];
			snprintf(field, sizeof(field), "spec.clusterIPs[%zu]", i);
			if (strcmp(ip_at(had, i), ip_at(ips, i)))
				ips_invalid(v, field, ips, changed);
		}
	} else if (n > m) {
		if (!m)
			ips_invalid(v, "spec.clusterIPs[0]", ips,
				    "primary clusterIP can not be unset");
		else if (strcmp(ip_at(had, 0), ip_at(ips, 0)))
			ips_invalid(v, "spec.clusterIPs[0]", ips, changed);
		if (m == 1 &&
		    strcmp(jx_str(spec, "ipFamilyPolicy") ? jx_str(spec, "ipFamilyPolicy") : "",
			   "SingleStack")) {
			json_t *p = json_object_get(spec, "ipFamilyPolicy");
			val_invalid(v, "spec.ipFamilyPolicy", p ? p : json_null(),
				    "must be set to 'SingleStack' when releasing the secondary "
				    "clusterIP");
		}
	} else if (n && strcmp(ip_at(had, 0), ip_at(ips, 0))) {
		ips_invalid(v, "spec.clusterIPs[0]", ips, changed);
	}
	json_decref(had);
	json_decref(ips);
}

static bool is_type(const json_t *spec, const char *type)
{
	const char *t = jx_str(spec, "type");
	return t && !strcmp(t, type);
}

/* NeedsHealthCheck: a LoadBalancer with externalTrafficPolicy Local. */
static bool needs_health_check(const json_t *spec)
{
	const char *p = jx_str(spec, "externalTrafficPolicy");
	return is_type(spec, "LoadBalancer") && p && !strcmp(p, "Local");
}

/* ValidateServiceUpdate: clusterIPs, then a LoadBalancer's class and its
 * health check node port (left out means kept, as patchAllocatedValues
 * fills it). ipFamilies are not checked: cube allocates no addresses. */
static void service_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	const json_t *spec = json_object_get(obj, "spec"), *was = jx_get(old, "spec");

	if (!old)
		return;
	service_ips_update(v, spec, was);
	if (is_type(was, "LoadBalancer") && is_type(spec, "LoadBalancer")) {
		json_t *now = json_object_get(spec, "loadBalancerClass");
		if (!sem_equal(now, json_object_get(was, "loadBalancerClass")))
			val_invalid(v, "spec.loadBalancerClass", now ? now : json_null(),
				    "may not change once set");
	}
	if (needs_health_check(was) && needs_health_check(spec)) {
		json_int_t now = json_integer_value(json_object_get(spec, "healthCheckNodePort"));
		json_int_t had = json_integer_value(json_object_get(was, "healthCheckNodePort"));
		if (now && now != had)
			val_forbidden(v, "spec.healthCheckNodePort", "field is immutable");
	}
}

/* reflect.DeepEqual of two maps: null is a left-out map, {} is not. */
static bool same_map(const json_t *a, const json_t *b)
{
	if (json_is_null(a))
		a = NULL;
	if (json_is_null(b))
		b = NULL;
	return jx_equal(a, b);
}

/* ValidateConfigMapUpdate / ValidateSecretUpdate: once immutable is true
 * it stays, and so do the contents (a Secret's stringData is in data by
 * now, as upstream's conversion has it). */
static void immutable_contents(struct validation *v, const json_t *obj, const json_t *old,
			       const char *const *fields)
{
	static const char msg[] = "field is immutable when `immutable` is set";

	if (!json_is_true(json_object_get(old, "immutable")))
		return;
	if (!json_is_true(json_object_get(obj, "immutable")))
		val_forbidden(v, "immutable", msg);
	for (; *fields; fields++)
		if (!same_map(json_object_get(obj, *fields), json_object_get(old, *fields)))
			val_forbidden(v, *fields, msg);
}

static void configmap_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	static const char *const contents[] = {"data", "binaryData", NULL};
	if (old)
		immutable_contents(v, obj, old, contents);
}

static void secret_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	static const char *const contents[] = {"data", NULL};
	if (!old)
		return;
	immutable(v, "type", json_object_get(obj, "type"), json_object_get(old, "type"));
	immutable_contents(v, obj, old, contents);
}

static void endpointslice_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	if (old)
		immutable(v, "addressType", json_object_get(obj, "addressType"),
			  json_object_get(old, "addressType"));
}

/* ValidateControllerRevisionUpdate: the data is fixed (the revision number
 * may change: a rollback renumbers an old revision). */
static void controllerrevision_validate(const json_t *obj, const json_t *old, struct validation *v)
{
	if (old)
		immutable(v, "data", json_object_get(obj, "data"), json_object_get(old, "data"));
}

/* ---- the table --------------------------------------------------------------- */

static const char *const pod_fields[] = {"spec.nodeName", "spec.restartPolicy",
					 "spec.schedulerName", "spec.serviceAccountName",
					 "spec.hostNetwork", "status.phase", "status.podIP",
					 "status.nominatedNodeName", NULL};
static const char *const node_fields[] = {"spec.unschedulable", NULL};
static const char *const event_fields[] = {"involvedObject.kind", "involvedObject.namespace",
					   "involvedObject.name", "involvedObject.uid",
					   "involvedObject.apiVersion",
					   "involvedObject.resourceVersion",
					   "involvedObject.fieldPath", "reason", "reportingComponent",
					   "source", "type", NULL};
static const char *const csr_fields[] = {"spec.signerName", NULL};
static const char *const secret_fields[] = {"type", NULL};
static const char *const ns_fields[] = {"status.phase", NULL};
static const char *const no_fields[] = {NULL};

#define STATUS_SUB(g, v, k) {"status", g, v, k, VERB_GET | VERB_UPDATE | VERB_PATCH}
#define SCALE_SUB {"scale", "autoscaling", "v1", "Scale", VERB_GET | VERB_UPDATE | VERB_PATCH}

const struct resource resources[] = {
	{"", "v1", "Namespace", "namespaces", "namespace", {"ns"}, {NULL}, false,
	 VERBS_ALL & ~VERB_DELETECOLLECTION,
	 {{"finalize", "", "v1", "Namespace", VERB_UPDATE}, STATUS_SUB("", "v1", "Namespace")},
	 ns_fields,
	 namespace_defaults, namespace_validate, NAME_LABEL, RES_NO_GENERATION | RES_KEEPS_STATUS, namespace_prepare},
	{"", "v1", "Node", "nodes", "node", {"no"}, {NULL}, false, VERBS_ALL,
	 {STATUS_SUB("", "v1", "Node"),
	  {"proxy", "", "v1", "NodeProxyOptions",
	   VERB_GET | VERB_CREATE | VERB_UPDATE | VERB_PATCH | VERB_DELETE}},
	 node_fields, NULL, node_validate, NAME_SUBDOMAIN, RES_NO_GENERATION | RES_KEEPS_STATUS, NULL},
	{"", "v1", "Pod", "pods", "pod", {"po"}, {"all"}, true, VERBS_ALL,
	 {STATUS_SUB("", "v1", "Pod"),
	  {"binding", "", "v1", "Binding", VERB_CREATE},
	  {"eviction", "policy", "v1", "Eviction", VERB_CREATE},
	  {"log", "", "v1", "Pod", VERB_GET}},
	 pod_fields, pod_defaults, pod_validate, NAME_SUBDOMAIN, RES_GRACEFUL, NULL},
	{"", "v1", "Event", "events", "event", {"ev"}, {NULL}, true, VERBS_ALL, {{NULL}},
	 event_fields, NULL, event_validate, NAME_SUBDOMAIN, 0, NULL},
	{"", "v1", "Secret", "secrets", "secret", {NULL}, {NULL}, true, VERBS_ALL, {{NULL}},
	 secret_fields, secret_defaults, secret_validate, NAME_SUBDOMAIN, 0, NULL},
	{"", "v1", "ConfigMap", "configmaps", "configmap", {"cm"}, {NULL}, true, VERBS_ALL,
	 {{NULL}}, no_fields, NULL, configmap_validate, NAME_SUBDOMAIN, 0, NULL},
	{"", "v1", "Service", "services", "service", {"svc"}, {"all"}, true,
	 VERBS_ALL & ~VERB_DELETECOLLECTION, {STATUS_SUB("", "v1", "Service")}, no_fields,
	 service_defaults, service_validate, NAME_SUBDOMAIN, 0, NULL},
	{"", "v1", "Endpoints", "endpoints", "endpoints", {"ep"}, {NULL}, true, VERBS_ALL,
	 {{NULL}}, no_fields, NULL, NULL, NAME_SUBDOMAIN, 0, NULL},
	{"", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", {"sa"}, {NULL}, true,
	 VERBS_ALL, {{"token", "authentication.k8s.io", "v1", "TokenRequest", VERB_CREATE}},
	 no_fields, NULL, NULL, NAME_SUBDOMAIN, 0, NULL},
	{"apps", "v1", "Deployment", "deployments", "deployment", {"deploy"}, {"all"}, true,
	 VERBS_ALL, {STATUS_SUB("apps", "v1", "Deployment"), SCALE_SUB}, no_fields,
	 deployment_defaults, workload_validate, NAME_SUBDOMAIN, 0, NULL},
	{"apps", "v1", "ReplicaSet", "replicasets", "replicaset", {"rs"}, {"all"}, true,
	 VERBS_ALL, {STATUS_SUB("apps", "v1", "ReplicaSet"), SCALE_SUB}, no_fields,
	 template_defaults, workload_validate, NAME_SUBDOMAIN, 0, NULL},
	{"apps", "v1", "StatefulSet", "statefulsets", "statefulset", {"sts"}, {"all"}, true,
	 VERBS_ALL, {STATUS_SUB("apps", "v1", "StatefulSet"), SCALE_SUB}, no_fields,
	 statefulset_defaults, statefulset_validate, NAME_SUBDOMAIN, 0, NULL},
	{"apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", {NULL},
	 {NULL}, true, VERBS_ALL, {{NULL}}, no_fields, NULL, controllerrevision_validate,
	 NAME_SUBDOMAIN, 0, NULL},
	{"apps", "v1", "DaemonSet", "daemonsets", "daemonset", {"ds"}, {"all"}, true,
	 VERBS_ALL, {STATUS_SUB("apps", "v1", "DaemonSet")}, no_fields, daemonset_defaults,
	 workload_validate, NAME_SUBDOMAIN, 0, NULL},
	{"batch", "v1", "Job", "jobs", "job", {NULL}, {"all"}, true, VERBS_ALL,
	 {STATUS_SUB("batch", "v1", "Job")}, no_fields, job_defaults, job_validate, NAME_SUBDOMAIN, RES_ORPHANS, NULL},
	{RBAC_GROUP, "v1", "ClusterRole", "clusterroles", "clusterrole", {NULL}, {NULL}, false,
	 VERBS_ALL, {{NULL}}, no_fields, NULL, clusterrole_validate, NAME_PATH_SEGMENT, 0, NULL},
	{RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", {NULL},
	 {NULL}, false, VERBS_ALL, {{NULL}}, no_fields, rbac_binding_defaults,
	 clusterrolebinding_validate, NAME_PATH_SEGMENT, 0, NULL},
	{RBAC_GROUP, "v1", "Role", "roles", "role", {NULL}, {NULL}, true, VERBS_ALL, {{NULL}},
	 no_fields, NULL, role_validate, NAME_PATH_SEGMENT, 0, NULL},
	{RBAC_GROUP, "v1", "RoleBinding", "rolebindings", "rolebinding", {NULL}, {NULL}, true,
	 VERBS_ALL, {{NULL}}, no_fields, rbac_binding_defaults, rolebinding_validate, NAME_PATH_SEGMENT, 0, NULL},
	{"certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests",
	 "certificatesigningrequest", {"csr"}, {NULL}, false, VERBS_ALL,
	 {STATUS_SUB("certificates.k8s.io", "v1", "CertificateSigningRequest"),
	  {"approval", "certificates.k8s.io", "v1", "CertificateSigningRequest",
	   VERB_GET | VERB_UPDATE | VERB_PATCH}},
	 csr_fields, NULL, csr_validate, NAME_KEY_SEGMENT, 0, NULL},
	{"coordination.k8s.io", "v1", "Lease", "leases", "lease", {NULL}, {NULL}, true, VERBS_ALL,
	 {{NULL}}, no_fields, NULL, lease_validate, NAME_SUBDOMAIN, 0, NULL},
	{"discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", {NULL},
	 {NULL}, true, VERBS_ALL, {{NULL}}, no_fields, NULL, endpointslice_validate,
	 NAME_SUBDOMAIN, 0, NULL},
	/* cube serves no custom resources, so it has no CustomResourceDefinitions:
	 * the list is always empty, and nothing may be created. kubectl asks it
	 * whether a kind is a CRD before it validates a kind without a PATCH
	 * path (the reviews, TokenRequest), and gets upstream's answer. */
	{"apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
	 "customresourcedefinition", {"crd", "crds"}, {"api-extensions"}, false,
	 VERB_GET | VERB_LIST | VERB_WATCH, {{NULL}}, no_fields, NULL, NULL, NAME_SUBDOMAIN, 0, NULL},
	{"authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews",
	 "subjectaccessreview", {NULL}, {NULL}, false, VERB_CREATE, {{NULL}}, no_fields, NULL,
	 NULL, NAME_SUBDOMAIN, 0, NULL},
	{"authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews",
	 "localsubjectaccessreview", {NULL}, {NULL}, true, VERB_CREATE, {{NULL}}, no_fields, NULL,
	 NULL, NAME_SUBDOMAIN, 0, NULL},
	{"authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
	 "selfsubjectaccessreview", {NULL}, {NULL}, false, VERB_CREATE, {{NULL}}, no_fields, NULL,
	 NULL, NAME_SUBDOMAIN, 0, NULL},
	{"authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
	 "selfsubjectrulesreview", {NULL}, {NULL}, false, VERB_CREATE, {{NULL}}, no_fields, NULL,
	 NULL, NAME_SUBDOMAIN, 0, NULL},
	{"authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews",
	 "selfsubjectreview", {NULL}, {NULL}, false, VERB_CREATE, {{NULL}}, no_fields, NULL,
	 NULL, NAME_SUBDOMAIN, 0, NULL},
	{"authentication.k8s.io", "v1", "TokenReview", "tokenreviews", "tokenreview", {NULL},
	 {NULL}, false, VERB_CREATE, {{NULL}}, no_fields, NULL, NULL, NAME_SUBDOMAIN, 0, NULL},
};
const size_t resources_count = sizeof(resources) / sizeof(resources[0]);

const struct resource *resource_find(const char *group, const char *version, const char *plural)
{
	for (size_t i = 0; i < resources_count; i++)
		if (!strcmp(resources[i].group, group) && !strcmp(resources[i].version, version) &&
		    !strcmp(resources[i].plural, plural))
			return &resources[i];
	return NULL;
}

const struct resource *resource_by_kind(const char *group, const char *kind)
{
	for (size_t i = 0; i < resources_count; i++)
		if (!strcmp(resources[i].group, group) && !strcmp(resources[i].kind, kind))
			return &resources[i];
	return NULL;
}

const struct resource *resource_lookup(const char *name)
{
	for (size_t i = 0; i < resources_count; i++) {
		const struct resource *r = &resources[i];
		if (!strcmp(r->plural, name) || !strcmp(r->singular, name))
			return r;
		for (size_t j = 0; j < 3 && r->short_names[j]; j++)
			if (!strcmp(r->short_names[j], name))
				return r;
	}
	return NULL;
}

const struct subresource *resource_sub(const struct resource *r, const char *name)
{
	for (size_t i = 0; i < RESOURCE_MAX_SUBS && r->subs[i].name; i++)
		if (!strcmp(r->subs[i].name, name))
			return &r->subs[i];
	return NULL;
}

const char *resource_api_version(const struct resource *r, char *buf, size_t n)
{
	if (*r->group)
		snprintf(buf, n, "%s/%s", r->group, r->version);
	else
		snprintf(buf, n, "%s", r->version);
	return buf;
}

const char *resource_qualified(const struct resource *r, char *buf, size_t n)
{
	if (*r->group)
		snprintf(buf, n, "%s.%s", r->plural, r->group);
	else
		snprintf(buf, n, "%s", r->plural);
	return buf;
}

void resource_verb_names(unsigned verbs, const char **out, size_t *n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} order[] = {{VERB_CREATE, "create"}, {VERB_DELETE, "delete"},
		     {VERB_DELETECOLLECTION, "deletecollection"}, {VERB_GET, "get"},
		     {VERB_LIST, "list"}, {VERB_PATCH, "patch"}, {VERB_UPDATE, "update"},
		     {VERB_WATCH, "watch"}};
	*n = 0;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (verbs & order[i].bit)
			out[(*n)++] = order[i].name;
}
