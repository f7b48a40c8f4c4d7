/*
 * clusterrole-aggregation-controller (upstream
 * pkg/controller/clusterroleaggregation, 1.32): a ClusterRole with an
 * aggregationRule holds the union of the rules of every other ClusterRole
 * its selectors match — selectors in order, the matched roles by name, a
 * rule already present not added twice. admin, edit and view are built this
 * way from the system:aggregate-to-* roles and from whatever a user labels
 * rbac.authorization.k8s.io/aggregate-to-<role>: "true".
 *
 * Any ClusterRole change enqueues every aggregated role. The new rules are
 * applied server-side as upstream's are (field manager
 * clusterrole-aggregation-controller, force): no resourceVersion, so the
 * roles that aggregate one another (admin takes edit's rules, edit
 * view's) never conflict over a version the informer has not seen yet, as
 * updates did, each one an error line. The controller's service account
 * holds `escalate` on clusterroles, so it may grant what it does not hold
 * itself.
 *
 * Threads: the loop's.
 */
#include "controllers/internal.h"
#include "controllers/keyed.h"

#include "api/selector.h"

#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "clusterrole-aggregation-controller"
#define ROLES_PATH "/apis/rbac.authorization.k8s.io/v1/clusterroles"
#define WORKERS 5

struct aggregation {
	struct rest_client *rest; /* its service account's (cm_client) */
	struct controller_manager *m;
	struct informer *roles;
	struct keyed *work;
};

/* Every aggregated role, whatever changed: membership is by label. */
static void enqueue_all(struct aggregation *c)
{
	json_t **all;
	size_t n = informer_list(c->roles, &all);
	for (size_t i = 0; i < n; i++)
		if (json_object_get(all[i], "aggregationRule"))
			keyed_add(c->work, jx_str(all[i], "metadata.name") ?: "");
	free(all);
}

static void on_role(void *arg, json_t *obj)
{
	(void)obj;
	enqueue_all(arg);
}

static void on_role_update(void *arg, json_t *old, json_t *obj)
{
	(void)old;
	(void)obj;
	enqueue_all(arg);
}

static bool rule_in(const json_t *rules, const json_t *rule)
{
	json_t *r;
	size_t i;
	json_array_foreach(rules, i, r) if (json_equal(r, rule)) return true;
	return false;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(jx_str(*(json_t *const *)a, "metadata.name") ?: "",
	              jx_str(*(json_t *const *)b, "metadata.name") ?: "");
}

/* The union of the selected roles' rules (a new array), or NULL when a
 * selector is not one. */
static json_t *aggregate(struct aggregation *c, const json_t *role)
{
	const char *self = jx_str(role, "metadata.name");
	json_t *rules = json_array(), *sel, **all;
	size_t n = informer_list(c->roles, &all), i;

	qsort(all, n, sizeof(*all), by_name);
	json_array_foreach(jx_get(role, "aggregationRule.clusterRoleSelectors"), i, sel)
	{
		struct label_selector *ls = label_selector_from_json(sel);
		if (!ls) {
			/* Upstream returns the selector's error and retries. */
			json_decref(rules);
			free(all);
			return NULL;
		}
		for (size_t k = 0; k < n; k++) {
			json_t *r;
			size_t j;
			if (!strcmp(jx_str(all[k], "metadata.name") ?: "", self ?: "") ||
			    !label_selector_match(ls, jx_get(all[k], "metadata.labels")))
				continue;
			json_array_foreach(json_object_get(all[k], "rules"), j,
			                   r) if (!rule_in(rules, r)) json_array_append(rules, r);
		}
		label_selector_free(ls);
	}
	free(all);
	return rules;
}

static void on_updated(struct ksync *s, void *arg, int status, json_t *body, const char *err)
{
	char msg[512];
	(void)arg;
	if (status != 200)
		ksync_fail(s, "%s", api_error(msg, sizeof(msg), status, body, err));
}

static void sync_role(void *ctl, struct ksync *s)
{
	struct aggregation *c = ctl;
	const json_t *role = informer_get(c->roles, ksync_key(s));
	json_t *rules, *applied;
	char path[512];

	if (!role || !json_object_get(role, "aggregationRule"))
		return;
	if (!(rules = aggregate(c, role))) {
		ksync_fail(s, "%s", err_msg()[0] ? err_msg() : "invalid label selector");
		return;
	}
	/* An absent rules list and an empty one are the same to upstream. */
	if (json_equal(rules, json_object_get(role, "rules")) ||
	    (!json_array_size(rules) && !json_array_size(json_object_get(role, "rules")))) {
		json_decref(rules);
		return;
	}
	LOG_V(2, "\"Updating aggregated ClusterRole\" clusterRole=\"%s\" rules=%zu", ksync_key(s),
	      json_array_size(rules));
	/* The applied configuration: the role's name and its rules alone. */
	applied = json_pack("{s:s,s:s,s:{s:s},s:o}", "apiVersion", "rbac.authorization.k8s.io/v1",
			    "kind", "ClusterRole", "metadata", "name", ksync_key(s), "rules", rules);
	snprintf(path, sizeof(path), ROLES_PATH "/%s?fieldManager=" NAME "&force=true",
		 ksync_key(s));
	ksync_call(s, "PATCH", path, "application/apply-patch+yaml", applied, on_updated, NULL);
	json_decref(applied);
}

struct aggregation *aggregation_new(struct controller_manager *m)
{
	struct aggregation *c = calloc(1, sizeof(*c));
	struct informer_handlers h = {on_role, on_role_update, on_role, NULL};

	if (!c)
		abort();
	c->m = m;
	c->rest = cm_client(m, NAME);
	h.arg = c;
	c->roles = cm_informer(m, ROLES_PATH, &h);
	c->work = keyed_new(m, "ClusterRoleAggregator", c->rest, WORKERS, sync_role, c, "%s failed with : %s");
	return c;
}

void aggregation_stop(struct aggregation *c)
{
	if (c)
		keyed_stop(c->work);
}

void aggregation_free(struct aggregation *c)
{
	if (!c)
		return;
	keyed_free(c->work);
	free(c);
}
