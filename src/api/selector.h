/*
 * selector — label and field selectors, as the `labelSelector` and
 * `fieldSelector` list/watch parameters and metav1.LabelSelector objects
 * (Deployment/ReplicaSet `spec.selector`) express them.
 *
 * Behaviour follows apimachinery pkg/labels and pkg/fields: the same grammar,
 * the same validation of label keys and values, the same canonical String()
 * form and, in substance, the same error messages. Every parse or validation
 * failure returns NULL (or ERR_INVALID) with the detail in err_msg().
 *
 * Ownership: _parse/_from_json return owned selectors freed with the matching
 * _free (which accepts NULL); _string returns a malloc'd string. Other
 * functions borrow. A NULL selector pointer behaves as an empty one (matches
 * everything). A selector is immutable once built, so one may be shared
 * read-only between threads; err_msg is per thread.
 */
#ifndef CUBE_API_SELECTOR_H
#define CUBE_API_SELECTOR_H

#include <jansson.h>
#include <stdbool.h>

/* ---- label selectors ---------------------------------------------------- */

struct label_selector;

/*
 * Parse a label selector string:
 *   a=b  a==b  a!=b  a in (x,y)  a notin (x)  a  !a  a>1  a<5
 * joined by ',' (AND), whitespace allowed between tokens. "" (or NULL)
 * matches everything. NULL + ERR_INVALID on error, with upstream's message,
 * e.g. "unable to parse requirement: found 'x' expected: '('".
 */
struct label_selector *label_selector_parse(const char *text);

/*
 * Convert a metav1.LabelSelector object {matchLabels, matchExpressions}.
 * NULL (or JSON null) yields a selector that matches NOTHING, as upstream's
 * nil selector; {} (no requirements) matches everything. Invalid selectors
 * give NULL + ERR_INVALID with field errors whose paths are relative to the
 * selector ("matchExpressions[0].values: Required value: ..."), several
 * joined as "[e1, e2]".
 */
struct label_selector *label_selector_from_json(const json_t *sel);
/* Same, with error paths under `path` (e.g. "spec.selector"); NULL or "" = none. */
struct label_selector *label_selector_from_json_at(const json_t *sel, const char *path);

/*
 * Does the selector match these labels (an object of string -> string, or
 * NULL for none)? A label whose value is not a string counts as absent.
 */
bool label_selector_match(const struct label_selector *sel, const json_t *labels);

/* True when the selector does not restrict anything (the "nothing" selector
 * from label_selector_from_json(NULL) is not empty). */
bool label_selector_empty(const struct label_selector *sel);

/*
 * Canonical form, as upstream's String(): requirements sorted by key (stable),
 * in/notin values sorted, e.g. "app=web,tier in (a,b)". "" for an empty or
 * nothing selector. malloc'd.
 */
char *label_selector_string(const struct label_selector *sel);

void label_selector_free(struct label_selector *sel);

/*
 * Validate a label key (qualified name with an optional DNS-subdomain prefix)
 * or a label value (<= 63 chars of [A-Za-z0-9._-], alphanumeric at both
 * ends, or empty). 0, or ERR_INVALID with upstream's messages joined by "; ".
 */
int label_key_validate(const char *key);
int label_value_validate(const char *value);

/* ---- field selectors ---------------------------------------------------- */

struct field_selector;

/*
 * Parse a field selector: terms `f=v`, `f==v`, `f!=v` joined by ',' (AND),
 * in any order, values possibly empty, with `\,` `\=` `\\` escapes inside
 * values. "" (or NULL) matches everything. NULL + ERR_INVALID on error.
 * Field names are not checked here: see field_selector_validate.
 */
struct field_selector *field_selector_parse(const char *text);

/*
 * Does obj match? Each field is a dotted path into obj ("spec.nodeName");
 * a missing field (or null/object/array) reads as "", booleans as
 * "true"/"false", integers in decimal.
 */
bool field_selector_match(const struct field_selector *sel, const json_t *obj);

/*
 * 0 when every term's field is in the NULL-terminated `allowed` list (NULL =
 * empty list); otherwise ERR_INVALID "field label not supported: <name>".
 */
int field_selector_validate(const struct field_selector *sel, const char *const *allowed);

/*
 * The value an `=`/`==` term requires of `field`, or NULL when no such term
 * exists (a `!=` term does not count). Borrowed from sel.
 */
const char *field_selector_exact(const struct field_selector *sel, const char *field);

bool field_selector_empty(const struct field_selector *sel);

/* Canonical form: terms sorted, `==` written `=`, values re-escaped. malloc'd. */
char *field_selector_string(const struct field_selector *sel);

void field_selector_free(struct field_selector *sel);

#endif
