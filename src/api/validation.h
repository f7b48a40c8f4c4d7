/*
 * validation — field errors as the API server reports them.
 *
 * Strategies add errors while checking an object; the handler turns them
 * into a 422 Status whose message and causes read like upstream's:
 *   Pod "p" is invalid: spec.containers: Required value
 * with details.causes[{reason:"FieldValueRequired", message, field}].
 *
 * Owned by the handler that made it; one thread.
 */
#ifndef CUBE_API_VALIDATION_H
#define CUBE_API_VALIDATION_H

#include <jansson.h>
#include <stdbool.h>

struct validation {
	json_t *causes; /* array of {reason, message, field} */
};

void val_init(struct validation *v);
void val_free(struct validation *v);
bool val_ok(const struct validation *v);

void val_required(struct validation *v, const char *field);
/* "Required value: <detail>", as field.Required with a detail. */
void val_required_detail(struct validation *v, const char *field, const char *detail);
/* value is printed JSON-quoted if a string, as is otherwise. */
void val_invalid(struct validation *v, const char *field, const json_t *value, const char *detail);
void val_invalid_str(struct validation *v, const char *field, const char *value,
		     const char *detail);
/* The same with the value already shown as upstream shows it: Go's %#v of
 * a struct or list ("v1.LabelSelector{...}", "[]string{\"a\"}"). */
void val_invalid_shown(struct validation *v, const char *field, const char *shown,
		       const char *detail);
void val_unsupported(struct validation *v, const char *field, const char *value,
		     const char *const *supported);
/* The same with the value as Go's %#v shows it ("[]string{\"x\"}"). */
void val_unsupported_shown(struct validation *v, const char *field, const char *shown,
			   const char *const *supported);
void val_forbidden(struct validation *v, const char *field, const char *detail);
void val_too_long(struct validation *v, const char *field, const char *value, int max);

/* DNS-1123 subdomain (most names), label (namespaces, containers). On
 * failure add upstream's message for field and return false. */
bool val_dns_subdomain(struct validation *v, const char *field, const char *name);
bool val_dns_label(struct validation *v, const char *field, const char *name);
/* Labels and annotations of an object's metadata. */
void val_metadata_maps(struct validation *v, const json_t *meta);
/* A field that may not change: "field is immutable". */
void val_immutable(struct validation *v, const char *field, const json_t *now, const json_t *old);

/* "<Kind> \"<name>\" is invalid: <e1>" or "...: [e1, e2]". malloc'd. */
char *val_message(const struct validation *v, const char *kind, const char *name);

#endif
