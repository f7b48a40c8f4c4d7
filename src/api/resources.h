/*
 * resources — the one table of API resources. Each row drives routing,
 * discovery, printing and the per-kind strategy (defaulting and validation
 * on create and update, and what each subresource may change). Adding a
 * resource is one row plus its strategy functions.
 *
 * The table is constant; any thread.
 */
#ifndef CUBE_API_RESOURCES_H
#define CUBE_API_RESOURCES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum verb {
	VERB_GET = 1 << 0,
	VERB_LIST = 1 << 1,
	VERB_WATCH = 1 << 2,
	VERB_CREATE = 1 << 3,
	VERB_UPDATE = 1 << 4,
	VERB_PATCH = 1 << 5,
	VERB_DELETE = 1 << 6,
	VERB_DELETECOLLECTION = 1 << 7,
};
#define VERBS_ALL 0xff

#define RESOURCE_MAX_SUBS 4

struct subresource {
	const char *name;   /* "status", "binding", "eviction", "approval", "scale", "proxy", "log" */
	const char *group;  /* of the kind it takes and returns */
	const char *version;
	const char *kind;
	unsigned verbs;
};

struct validation; /* collects field errors: api/validation.h */

struct resource {
	const char *group; /* "" for core */
	const char *version;
	const char *kind;
	const char *plural;
	const char *singular;
	const char *short_names[3];
	const char *categories[2];
	bool namespaced;
	unsigned verbs;
	struct subresource subs[RESOURCE_MAX_SUBS];
	/* Fields besides metadata.name/namespace accepted in fieldSelector. */
	const char *const *field_labels;
	/* Fill defaults on create (and update) of the main resource. */
	void (*defaults)(json_t *obj);
	/* Check an object; old is NULL on create. Adds errors to v. */
	void (*validate)(const json_t *obj, const json_t *old, struct validation *v);
	/* How its objects may be named (enum name_rule). */
	unsigned char name_rule;
	/* What the generic handlers do differently for it (RES_*). */
	unsigned rules;
	/* Upstream's PrepareForCreate beyond the generic metadata stamping. */
	void (*prepare_create)(json_t *obj);
};

/* Upstream's name validation functions (ValidateObjectMeta's nameFn). */
enum name_rule {
	NAME_SUBDOMAIN,    /* DNS-1123 subdomain: most kinds */
	NAME_LABEL,        /* DNS-1123 label: namespaces */
	NAME_PATH_SEGMENT, /* any path segment (422): RBAC's kubeadm:..., system:... */
	NAME_KEY_SEGMENT,  /* unvalidated, but a storage key segment (400): CSRs */
};

enum {
	RES_NO_GENERATION = 1 << 0, /* no metadata.generation (nodes, namespaces) */
	RES_KEEPS_STATUS = 1 << 1,  /* a create keeps the status it is given */
	RES_ORPHANS = 1 << 2,       /* deletion orphans dependents by default (Jobs) */
	RES_GRACEFUL = 1 << 3,      /* a bound object terminates through its node (pods) */
};

extern const struct resource resources[];
extern const size_t resources_count;

const struct resource *resource_find(const char *group, const char *version, const char *plural);
const struct resource *resource_by_kind(const char *group, const char *kind);
/* "pods" → row, also by singular or short name (for humans and tests). */
const struct resource *resource_lookup(const char *name);
const struct subresource *resource_sub(const struct resource *r, const char *name);
/* "v1" or "apps/v1". Returns buf. */
const char *resource_api_version(const struct resource *r, char *buf, size_t n);
/* "pods" or "deployments.apps": how messages name the resource. */
const char *resource_qualified(const struct resource *r, char *buf, size_t n);
/* Names of the verbs in discovery order ("create", "delete", ...). */
void resource_verb_names(unsigned verbs, const char **out, size_t *n);

#endif
