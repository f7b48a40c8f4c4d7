/*
 * patch — the three PATCH body formats the API server accepts.
 *
 *   application/json-patch+json            RFC 6902 (patch_json)
 *   application/merge-patch+json           RFC 7386 (patch_merge)
 *   application/strategic-merge-patch+json Kubernetes SMP (patch_strategic)
 *
 * application/apply-patch+yaml (server-side apply) is not a patch of the
 * stored object and is handled by the caller before patch_apply.
 *
 * Upstream behaviour is the specification: the JSON patch and merge patch
 * follow gopkg.in/evanphx/json-patch.v4 as the apiserver uses it, the
 * strategic merge patch follows apimachinery's strategicpatch (apply side)
 * with merge keys from a static table of the k8s.io/api struct tags
 * (kubectl-wire.md §10), and the status codes and messages follow the
 * apiserver's PATCH handler (endpoints/handlers/patch.go). Where this module
 * knowingly differs, patch.c says so next to the code.
 *
 * Ownership: every function returns a new value (or NULL) and leaves its
 * arguments unchanged. Errors set err_msg() to the message the apiserver
 * would put in the Status; patch_detail() keeps the underlying reason the
 * apiserver hides (e.g. jsonpatch's "testing value /x failed: test failed").
 *
 * Threads: pure functions; any thread. patch_detail() is per thread.
 */
#ifndef CUBE_API_PATCH_H
#define CUBE_API_PATCH_H

#include <jansson.h>
#include <stddef.h>

/* The message upstream gives every 422 from a failed patch operation. */
#define PATCH_MSG_REJECTED "the server rejected our request due to an error in our request"

/*
 * RFC 7386 merge patch: null deletes a member, objects merge recursively,
 * anything else (including a non-object patch) replaces. As upstream, nulls
 * inside a newly added value are pruned. Never fails.
 */
json_t *patch_merge(const json_t *target, const json_t *patch);

/*
 * RFC 6902 JSON patch (add, remove, replace, move, copy, test; JSON Pointer
 * with ~0/~1 and "-"). NULL on error:
 *   ERR_INVALID (400)        ops is not an array of objects
 *   ERR_TOOLARGE (413)       more than 10000 operations
 *   ERR_UNPROCESSABLE (422)  an operation failed (missing path, failed test,
 *                            unknown or missing "op", copies adding more
 *                            than upstream's 3 MiB); err_msg() is
 *                            PATCH_MSG_REJECTED, patch_detail() the reason.
 * A null ops is an empty patch, as upstream.
 */
json_t *patch_json(const json_t *target, const json_t *ops);

/*
 * Strategic merge patch of an object of `kind` ("Pod", "Deployment", ...;
 * NULL or unknown kinds get ObjectMeta knowledge only). Lists with a merge
 * key merge element-wise, other lists are replaced whole. Supports $patch
 * (replace, delete, merge), $retainKeys, $setElementOrder/<list> and
 * $deleteFromPrimitiveList/<list>. NULL on error: ERR_INVALID (400) for a
 * malformed patch (unknown directive, missing merge key, ...), or
 * ERR_UNPROCESSABLE (422, PATCH_MSG_REJECTED) for lists of lists, as
 * upstream. A null patch changes nothing.
 */
json_t *patch_strategic(const json_t *target, const json_t *patch, const char *kind);

/*
 * Parse `body` by Content-Type (parameters after ';' ignored) and apply it
 * to target. Returns 0 with *out set to the new object, or:
 *   ERR_UNSUPPORTED (415) unknown Content-Type, with upstream's message
 *   ERR_INVALID (400)     body is not valid JSON or not the right shape
 *   ERR_UNPROCESSABLE, ERR_TOOLARGE as the functions above, and 422 when
 *                         the result is not a JSON object.
 */
int patch_apply(const json_t *target, const char *content_type, const char *body, size_t len,
                const char *kind, json_t **out);

/* The reason behind the last failure on this thread ("" if none). */
const char *patch_detail(void);

#endif
