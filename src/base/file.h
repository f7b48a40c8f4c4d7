/*
 * file — whole-file reads and crash-safe writes.
 *
 * file_write_atomic writes to a temporary in the same directory, fsyncs it,
 * renames it over the target and fsyncs the directory: a reader sees the old
 * file or the new one, never half of either, even across a crash. Key
 * material is written with mode 0600 from the first byte.
 *
 * Any thread; errors are negative codes with err_msg() set.
 */
#ifndef CUBE_BASE_FILE_H
#define CUBE_BASE_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Read a whole file; *out is malloc'd and NUL-terminated. 0 or an error
 * (ERR_NOTFOUND for a missing file, ERR_IO otherwise, ERR_TOOLARGE past max). */
int file_read(const char *path, char **out, size_t *len, size_t max);
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* The same replacement (readers see the old file or the new one), without
 * the fsyncs: for files made again when a crash loses them (rebuilt at every
 * start, or checked when read and remade if they do not load). */
int file_replace(const char *path, const void *data, size_t len, mode_t mode);
/* mkdir -p with `mode` for the directories it creates. */
int file_mkdirs(const char *path, mode_t mode);
int file_exists(const char *path);
/* Directory part of path into buf ("." when none). */
char *file_dirname(const char *path, char *buf, size_t n);
/* `rel` resolved against directory `dir` unless already absolute; malloc'd. */
char *file_join(const char *dir, const char *rel);

#endif
