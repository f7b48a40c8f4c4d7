/*
 * intern — one copy of a string that many owners share.
 *
 * Ten thousand hollow kubelets in one process each hold the same CA bundle,
 * server URL and user agent; str_intern gives all of them one copy. The
 * copies live until the process exits and are never freed, so intern only
 * what is common and small in number (configuration), never what a request
 * brings. Thread-safe.
 */
#ifndef CUBE_BASE_INTERN_H
#define CUBE_BASE_INTERN_H

/* The process's copy of s (NULL for NULL): equal strings, equal pointers. */
const char *str_intern(const char *s);

#endif
