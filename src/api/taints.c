#include "api/taints.h"

#include <string.h>

static const char *str(const json_t *obj, const char *key)
{
	const char *v = json_string_value(json_object_get(obj, key));
	return v ? v : "";
}

bool toleration_tolerates(const json_t *tol, const json_t *taint)
{
	const char *effect = str(tol, "effect"), *key = str(tol, "key"), *op = str(tol, "operator");

	if (*effect && strcmp(effect, str(taint, "effect")))
		return false;
	if (*key && strcmp(key, str(taint, "key")))
		return false;
	if (!strcmp(op, "Exists"))
		return true;
	if (!*op || !strcmp(op, "Equal"))
		return !strcmp(str(tol, "value"), str(taint, "value"));
	return false;
}

const json_t *tolerations_find(const json_t *tolerations, const json_t *taint)
{
	const json_t *t;
	size_t i;
	json_array_foreach(tolerations, i, t) if (toleration_tolerates(t, taint)) return t;
	return NULL;
}

bool taint_effect_in(const json_t *taint, const char *const *effects)
{
	const char *e = str(taint, "effect");
	for (size_t i = 0; effects[i]; i++)
		if (!strcmp(e, effects[i]))
			return true;
	return false;
}

const json_t *taints_first_untolerated(const json_t *taints, const json_t *tolerations)
{
	static const char *const hard[] = {"NoSchedule", "NoExecute", NULL};
	const json_t *t;
	size_t i;
	json_array_foreach(taints, i, t) if (taint_effect_in(t, hard) &&
					     !tolerations_find(tolerations, t)) return t;
	return NULL;
}
