/*
 * printers — server-side printing: objects as meta.k8s.io/v1 Tables.
 *
 * kubectl 1.32 has no client-side printers for built-in kinds; it asks for
 * `as=Table` and prints the columns and cells the server computed (including
 * AGE). This module reproduces upstream's printers (pkg/printers/
 * internalversion/printers.go) for the kinds cube serves, and the envelope
 * the apiserver wraps around them (rows[].object per includeObject,
 * Completed row conditions for finished pods, no columnDefinitions on watch
 * events after the first). Cells always include the wide (priority 1)
 * columns, as the apiserver always generates with Wide: true.
 *
 * Kinds with a printer: Node, Pod, CertificateSigningRequest, Lease, Event
 * (core/v1 and events.k8s.io/v1 field names), Deployment, ReplicaSet,
 * DaemonSet, StatefulSet, Namespace, Service, Endpoints, EndpointSlice,
 * ConfigMap, Secret. Any other kind gets NAME, AGE.
 *
 * Ownership: every function returns a new reference (or NULL where stated);
 * arguments are borrowed and never modified. Pure functions of their
 * arguments (time comes in as now_ns): any thread.
 */
#ifndef CUBE_API_PRINTERS_H
#define CUBE_API_PRINTERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* The columnDefinitions array for a Kind: [{name,type,format,description,
 * priority}], priority 1 marking the -o wide columns. */
json_t *printers_columns(const char *kind);

/* The cells array for one object of that Kind, one per column (wide ones
 * included): JSON strings, or integers where upstream puts int64 cells. */
json_t *printers_cells(const char *kind, const json_t *obj, int64_t now_ns);

/*
 * rows[].object for includeObject `include`: "Metadata" (also NULL or "") →
 * a PartialObjectMetadata (meta.k8s.io/v1) carrying obj's metadata without
 * managedFields; "Object" → obj itself (a new reference); "None" → NULL.
 */
json_t *printers_row_object(const json_t *obj, const char *include);

/*
 * A whole Table for `items` (an array of objects of `kind`). list_rv and
 * continue_token go to metadata when non-empty (may be NULL). include as for
 * printers_row_object (parse it first with printers_include_parse). With
 * !with_columns, columnDefinitions is null: watch events after the first.
 */
json_t *printers_table(const char *kind, const json_t *items, const char *list_rv,
		       const char *continue_token, const char *include, bool with_columns,
		       int64_t now_ns);

/*
 * Validate the includeObject query parameter: 0 with *out set to "Metadata"
 * (for NULL, "" or "Metadata"), "Object" or "None" (static strings); else
 * ERR_INVALID with upstream's 400 message ("Unable to convert to Table as
 * requested: includeObject: Invalid value: ...").
 */
int printers_include_parse(const char *s, const char **out);

#endif
