/*
 * strv — a growable, owned vector of strings.
 *
 * The vector owns its strings (copied in). v is always NULL-terminated, so
 * `sv.v` can be passed wherever a `const char *const *` list is wanted.
 * Not thread-safe; owned by whoever made it.
 */
#ifndef CUBE_BASE_STRV_H
#define CUBE_BASE_STRV_H

#include <stdbool.h>
#include <stddef.h>

struct strv {
	char **v;
	size_t n, cap;
};

#define STRV_INIT {NULL, 0, 0}

void strv_push(struct strv *sv, const char *s);
void strv_pushf(struct strv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Push unless an equal string is already there. */
void strv_push_unique(struct strv *sv, const char *s);
bool strv_has(const struct strv *sv, const char *s);
/* Remove the first element equal to s, keeping the order; false if absent. */
bool strv_remove(struct strv *sv, const char *s);
void strv_sort(struct strv *sv);
/* "a, b, c" (malloc'd). */
char *strv_join(const struct strv *sv, const char *sep);
void strv_free(struct strv *sv);
/* strdup that aborts on allocation failure; NULL stays NULL. */
char *str_dup(const char *s);
/* asprintf that aborts on allocation failure; malloc'd. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Count of a NULL-terminated list; 0 for NULL. */
size_t strlist_len(const char *const *list);

#endif
