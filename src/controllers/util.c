/* What the workload controllers share: owner references, pod states as
 * upstream's podutil reads them, pods made from a template. */
#include "controllers/internal.h"

#include "base/jx.h"
#include "base/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const json_t *controller_ref(const json_t *obj)
{
	const json_t *r;
	size_t i;
	json_array_foreach(jx_get(obj, "metadata.ownerReferences"), i, r) if (
		json_is_true(json_object_get(r, "controller"))) return r;
	return NULL;
}

const char *index_namespace(const json_t *obj)
{
	return jx_str(obj, "metadata.namespace");
}

const char *index_controller_uid(const json_t *obj)
{
	return jx_str(controller_ref(obj), "uid");
}

const char *obj_key(const json_t *obj, char *buf, size_t n)
{
	return informer_key(obj, buf, n);
}

bool pod_active(const json_t *pod)
{
	const char *phase = jx_str(pod, "status.phase") ?: "";
	return strcmp(phase, "Succeeded") && strcmp(phase, "Failed") &&
	       !jx_get(pod, "metadata.deletionTimestamp");
}

bool pod_ready(const json_t *pod)
{
	const json_t *c = jx_condition(json_object_get(pod, "status"), "Ready");
	return c && !strcmp(jx_str(c, "status") ?: "", "True");
}

bool pod_available(const json_t *pod, int64_t min_ready_s, int64_t now_ns)
{
	const json_t *c = jx_condition(json_object_get(pod, "status"), "Ready");
	int64_t since;

	if (!pod_ready(pod))
		return false;
	if (min_ready_s <= 0)
		return true;
	if (time_parse_rfc3339(jx_str(c, "lastTransitionTime"), &since) < 0)
		return false;
	return since + min_ready_s * NS_PER_SEC < now_ns;
}

json_t *owner_ref_to(const json_t *owner, const char *api_version, const char *kind)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "apiVersion", api_version, "kind", kind,
			 "name", jx_str(owner, "metadata.name") ?: "", "uid",
			 jx_str(owner, "metadata.uid") ?: "", "controller", 1,
			 "blockOwnerDeletion", 1);
}

json_t *adopt_patch(const json_t *owner, const char *api_version, const char *kind,
		    const json_t *obj)
{
	return json_pack("{s:{s:[o],s:s}}", "metadata", "ownerReferences",
			 owner_ref_to(owner, api_version, kind), "uid",
			 jx_str(obj, "metadata.uid") ?: "");
}

json_t *release_patch(const json_t *owner, const json_t *obj)
{
	return json_pack("{s:{s:[{s:s,s:s}],s:s}}", "metadata", "ownerReferences", "$patch",
			 "delete", "uid", jx_str(owner, "metadata.uid") ?: "", "uid",
			 jx_str(obj, "metadata.uid") ?: "");
}

json_t *pod_from_template(const json_t *tmpl, const json_t *owner, const char *api_version,
			  const char *kind)
{
	const json_t *md = json_object_get(tmpl, "metadata");
	char prefix[300];
	const json_t *spec = json_object_get(tmpl, "spec");
	json_t *pod = json_pack("{s:s,s:s,s:{},s:o}", "apiVersion", "v1", "kind", "Pod", "metadata",
				"spec", spec ? json_deep_copy(spec) : json_object());
	json_t *meta = json_object_get(pod, "metadata");
	static const char *const copied[] = {"labels", "annotations", "finalizers"};

	for (size_t i = 0; i < sizeof(copied) / sizeof(copied[0]); i++)
		if (json_object_get(md, copied[i]))
			json_object_set_new(meta, copied[i],
					    json_deep_copy(json_object_get(md, copied[i])));
	/* "<owner>-", unless that is not a valid pod name prefix (too long). */
	snprintf(prefix, sizeof(prefix), "%s-", jx_str(owner, "metadata.name") ?: "");
	if (strlen(prefix) > 253 - 5)
		prefix[strlen(prefix) - 1] = '\0';
	json_object_set_new(meta, "generateName", json_string(prefix));
	json_object_set_new(meta, "namespace",
			    json_string(jx_str(owner, "metadata.namespace") ?: "default"));
	json_object_set_new(meta, "ownerReferences",
			    json_pack("[o]", owner_ref_to(owner, api_version, kind)));
	return pod;
}

uint32_t fnv32_bytes(const void *extra, size_t n, uint32_t h, bool a)
{
	const unsigned char *p = extra;
	for (size_t i = 0; i < n; i++)
		h = a ? (h ^ p[i]) * 16777619u : (h * 16777619u) ^ p[i];
	return h;
}

uint32_t fnv32_json(const json_t *v, uint32_t h, bool a)
{
	char *text = json_dumps(v ? v : json_null(), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (text)
		h = fnv32_bytes(text, strlen(text), h, a);
	free(text);
	return h;
}

void hash_encode(uint32_t h, char *out, size_t n)
{
	static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
	char digits[16];
	size_t i;

	snprintf(digits, sizeof(digits), "%u", h);
	for (i = 0; digits[i] && i + 1 < n; i++)
		out[i] = alphabet[(unsigned char)digits[i] % 27];
	out[i] = '\0';
}
