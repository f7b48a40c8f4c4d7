/*
 * b64 — base64 as Kubernetes objects and JWTs carry it: the standard padded
 * alphabet ([]byte fields of JSON objects, Secret data, kubeconfig *-data)
 * and base64url without padding (Go's RawURLEncoding: JWT segments, CSR
 * name digests). OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock underneath.
 *
 * Ownership: results are malloc'd, the caller frees them; decoded bytes are
 * NUL-terminated (not counted in *len) so text can be used as a string.
 * Threads: any.
 */
#ifndef CUBE_BASE_B64_H
#define CUBE_BASE_B64_H

#include <stddef.h>

char *b64_encode(const void *data, size_t len);
/* NULL when text is NULL, empty or not padded base64. len may be NULL. */
unsigned char *b64_decode(const char *text, size_t *len);

char *b64url_encode(const void *data, size_t len);
/* The first n characters of text, unpadded base64url; NULL when malformed. */
unsigned char *b64url_decode(const char *text, size_t n, size_t *len);

#endif
