/*
 * pb — Kubernetes protobuf request bodies, decoded to the JSON the API uses.
 *
 * kubectl 1.32 sends some bodies as `application/vnd.kubernetes.protobuf`
 * and does not retry with JSON after a 415 (kubectl-wire.md §0.3, §9). A body
 * is the magic "k8s\0" followed by a runtime.Unknown envelope
 * {1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType};
 * `raw` is the object, decoded through the kinds' schema (api/schema.h:
 * upstream's field numbers and types as data) into the object the JSON API
 * would have received:
 *
 *   - "apiVersion" and "kind" come from the envelope;
 *   - []byte fields become base64 strings, meta.v1.Time an RFC 3339 string
 *     ("2026-11-30T10:00:00Z"), MicroTime one with 6 fractional digits,
 *     resource.Quantity its string, IntOrString a number or a string,
 *     RawExtension and FieldsV1 the JSON they carry, a named slice
 *     (ExtraValue) an array; an inlined message (Volume's VolumeSource,
 *     Probe's ProbeHandler) writes its fields into its parent's object;
 *   - Go's encoder writes every non-pointer field even when empty, so empty
 *     strings, zero numbers, false, zero Times and empty messages are treated
 *     as unset and omitted. Pointer fields (spec.replicas, expirationSeconds,
 *     gracePeriodSeconds, emptyDir: {}, ...) are only on the wire when set,
 *     so they are kept even when zero or empty. List elements and map values
 *     are always kept (a label may have the value "").
 *   - Fields the schema does not know (a newer client's) are skipped.
 *
 * Kinds: every kind of schema_kinds (all that cube serves, with DeleteOptions
 * under any apiVersion: the captured drain fallback sends "v1").
 *
 * Errors: ERR_INVALID (400) for anything malformed (bad magic, truncated
 * varint, length past the end, wrong wire type for the schema, groups,
 * invalid UTF-8, nesting past PB_MAX_DEPTH), with err_msg() naming the field
 * path ("Deployment.spec.template.spec.containers[0].image: ...");
 * ERR_UNSUPPORTED (415) for a kind without a schema or a content encoding.
 * Any input is safe: nothing is read outside [buf, buf+len).
 *
 * Ownership: results are new references the caller json_decref()s.
 * Threads: pure functions over constant tables; any thread.
 */
#ifndef CUBE_API_PROTOBUF_H
#define CUBE_API_PROTOBUF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The 4 bytes every Kubernetes protobuf body starts with. */
#define PB_MAGIC "k8s\0"
#define PB_MAGIC_LEN 4
/* Deepest nesting of messages accepted (the tables need about 8). */
#define PB_MAX_DEPTH 32

/* Whether buf starts with PB_MAGIC. */
bool pb_has_magic(const unsigned char *buf, size_t len);

/* Whether pb_decode has a schema for (apiVersion, kind). */
bool pb_kind_supported(const char *api_version, const char *kind);

/*
 * Decode a whole body (magic + envelope). Returns 0 and *out (owned), or
 * ERR_INVALID / ERR_UNSUPPORTED with *out = NULL and err_msg() set.
 */
int pb_parse(const unsigned char *buf, size_t len, json_t **out);

/* pb_parse returning the object, or NULL with err_msg() set. */
json_t *pb_decode(const unsigned char *buf, size_t len);

#endif
