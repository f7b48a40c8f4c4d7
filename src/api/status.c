#include "api/status.h"

#include "base/err.h"

static json_t *details(const char *group, const char *kind, const char *name, const char *uid)
{
	json_t *d = json_object();
	if (name && *name) /* StatusDetails' fields are omitempty */
		json_object_set_new(d, "name", json_string(name));
	if (group && *group)
		json_object_set_new(d, "group", json_string(group));
	if (kind)
		json_object_set_new(d, "kind", json_string(kind));
	if (uid)
		json_object_set_new(d, "uid", json_string(uid));
	return d;
}

json_t *status_failure(int err, const char *message, const char *group, const char *kind,
		       const char *name)
{
	json_t *s = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s}", "kind", "Status", "apiVersion", "v1",
			      "metadata", "status", "Failure", "message", message ? message : "",
			      "reason", err_reason(err));
	if (kind || name)
		json_object_set_new(s, "details", details(group, kind, name, NULL));
	json_object_set_new(s, "code", json_integer(err_http_status(err)));
	return s;
}

json_t *status_success(int http_code, const char *group, const char *kind, const char *name,
		       const char *uid)
{
	json_t *s = json_pack("{s:s,s:s,s:{},s:s}", "kind", "Status", "apiVersion", "v1",
			      "metadata", "status", "Success");
	if (kind || name)
		json_object_set_new(s, "details", details(group, kind, name, uid));
	json_object_set_new(s, "code", json_integer(http_code));
	return s;
}

void status_add_cause(json_t *status, const char *reason, const char *message, const char *field)
{
	json_t *d = json_object_get(status, "details"), *causes;
	if (!d) {
		d = json_object();
		json_object_set_new(status, "details", d);
	}
	causes = json_object_get(d, "causes");
	if (!causes) {
		causes = json_array();
		json_object_set_new(d, "causes", causes);
	}
	json_t *c = json_object();
	/* Go's StatusCause omits what is empty. */
	if (reason && *reason)
		json_object_set_new(c, "reason", json_string(reason));
	if (message && *message)
		json_object_set_new(c, "message", json_string(message));
	if (field && *field)
		json_object_set_new(c, "field", json_string(field));
	json_array_append_new(causes, c);
}
