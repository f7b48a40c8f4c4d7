/*
 * openapi — the OpenAPI documents of the API cube serves, made from the
 * schema table (schema.h: fields, types, required, enums, list types,
 * patch keys, descriptions) and the resource table (resources.h: paths,
 * verbs, subresources). Nothing in them is written twice: a field added to
 * a message's table appears in every document that reaches the message.
 *
 *   - v3: one document per group-version ("api/v1", "apis/apps/v1"), with
 *     the paths of its resources and the definitions they reach, under
 *     components.schemas — what kubectl explain and kubectl's check for
 *     fieldValidation read;
 *   - v2: one document for everything, in JSON, and in the protobuf form
 *     kubectl 1.27 and 1.28 ask for (gnostic's openapi.v2.Document):
 *     their client-side apply takes patch keys from it.
 *
 * Definitions are named as upstream's ("io.k8s.api.core.v1.Pod") and carry
 * x-kubernetes-group-version-kind, x-kubernetes-patch-merge-key and
 * -strategy, x-kubernetes-list-type and -map-keys, x-kubernetes-map-type;
 * v3 also carries upstream's defaults ({} for a struct, "" for a required
 * string). The descriptions are ours.
 *
 * The builders return new documents (the caller's). Pure functions of the
 * constant tables: any thread.
 */
#ifndef CUBE_API_OPENAPI_H
#define CUBE_API_OPENAPI_H

#include <jansson.h>
#include <stddef.h>

struct sbuf;

/* The v3 document of group ("" for core) and version, or NULL when no
 * served resource is in that group-version. */
json_t *openapi_v3(const char *group, const char *version);

/* The v2 document (swagger 2.0) of every served resource. */
json_t *openapi_v2(void);

/* doc (openapi_v2's, or any swagger 2.0 of the same shapes) in protobuf:
 * a gnostic openapi.v2.Document, appended to out. */
void openapi_v2_protobuf(const json_t *doc, struct sbuf *out);

#endif
