/*
 * yj — YAML to JSON and back, the way kubectl sees YAML.
 *
 * Manifests, kubeconfigs and component configuration files arrive as YAML
 * but every other part of cube works on jansson values. This module reads
 * YAML (libyaml) into jansson values with the YAML 1.1 scalar typing that
 * kubectl's sigs.k8s.io/yaml (go-yaml v2) applies, and writes jansson values
 * back out as kubectl-style block YAML (libyaml's emitter).
 *
 * Typing of plain (unquoted, untagged) scalars: null/Null/NULL/~/empty are
 * null; true/false/yes/no/on/off in lower, Title or UPPER case are booleans
 * (y and n stay strings); integers are decimal, 0x hex, 0o or leading-0
 * octal (0644 is 420), 0b binary, with optional sign and `_` separators; an
 * integer that does not fit int64 becomes a real, as do 1.5, .5, 1e3.
 * Timestamps stay strings as written. Quoted and block scalars, and any
 * scalar tagged !!str, are strings; !!int and the like type even quoted
 * text. .inf and .nan are errors: JSON cannot hold them. Mapping keys are
 * always strings, spelled as written. Anchors and aliases copy the anchored
 * value (within one document, and within a budget against "billion laughs");
 * `<<` merge keys add the keys the mapping does not itself have, earlier
 * merges winning over later ones.
 *
 * Ownership: yj_parse, yj_parse_all, yj_load_file and yj_load return a new
 * reference (json_decref it); yj_emit returns malloc'd text (free it). On
 * failure they return NULL (yj_load: the code) and leave the detail in
 * err_msg() (base/err.h).
 *
 * Thread-safety: no shared state; any thread may call any function.
 */
#ifndef CUBE_BASE_YAMLJSON_H
#define CUBE_BASE_YAMLJSON_H

#include <stddef.h>

#include <jansson.h>

/*
 * The first document of `buf` (need not be NUL-terminated). Empty input or
 * an empty document gives a JSON null. Errors: ERR_PARSE with
 * "yaml: line N: <problem>", N counted from 1.
 */
json_t *yj_parse(const char *buf, size_t len);

/*
 * Every document of a `---` separated stream, as a JSON array. Documents
 * that are null (empty, or only comments) are skipped, as kubectl does.
 */
json_t *yj_parse_all(const char *buf, size_t len);

/*
 * yj_parse of a file's contents. Errors: ERR_NOTFOUND if it does not exist,
 * ERR_IO if it cannot be read ("open PATH: strerror"), ERR_PARSE with the
 * path in front of the parser's message.
 */
json_t *yj_load_file(const char *path);
/* The same, for callers that act on the code (a missing file is often fine):
 * 0 with *out a new reference, or the code with *out NULL. */
int yj_load(const char *path, json_t **out);

/*
 * `v` as one YAML document: block style, 2-space indent, sequences under a
 * key not indented (`- name: x`), object keys in insertion order. Strings
 * that would read back as another type are double-quoted; multi-line
 * strings use `|` block scalars. yj_parse(yj_emit(v)) equals v.
 */
char *yj_emit(const json_t *v);

#endif
