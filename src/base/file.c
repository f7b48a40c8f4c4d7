#include "base/file.h"

#include "base/err.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read(const char *path, char **out, size_t *len, size_t max)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "open %s: %s", path,
			       strerror(errno));
	for (;;) {
		size_t r;
		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap + 1);
			if (!buf)
				abort();
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (n > max) {
			fclose(f);
			free(buf);
			return err_set(ERR_TOOLARGE, "%s: larger than %zu bytes", path, max);
		}
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		int e = errno;
		fclose(f);
		free(buf);
		return err_set(ERR_IO, "read %s: %s", path, strerror(e));
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

char *file_dirname(const char *path, char *buf, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(buf, n, ".");
	else if (slash == path)
		snprintf(buf, n, "/");
	else
		snprintf(buf, n, "%.*s", (int)(slash - path), path);
	return buf;
}

char *file_join(const char *dir, const char *rel)
{
	char *out;
	if (rel[0] == '/' || !dir || !*dir)
		out = strdup(rel);
	else if (asprintf(&out, "%s/%s", dir, rel) < 0)
		out = NULL;
	if (!out)
		abort();
	return out;
}

static int fsync_dir(const char *path)
{
	char dir[4096];
	int fd = open(file_dirname(path, dir, sizeof(dir)), O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return err_set(ERR_IO, "open %s: %s", dir, strerror(errno));
	fsync(fd);
	close(fd);
	return 0;
}

static int write_replace(const char *path, const void *data, size_t len, mode_t mode,
			 bool durable)
{
	char tmp[4096];
	const char *p = data;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return err_set(ERR_IO, "create %s: %s", tmp, strerror(errno));
	/* The umask may have narrowed it; the caller's mode is the contract. */
	fchmod(fd, mode);
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			goto fail;
		p += w;
		len -= (size_t)w;
	}
	if (durable && fsync(fd) < 0)
		goto fail;
	close(fd);
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return err_set(ERR_IO, "rename %s: %s", path, strerror(e));
	}
	return durable ? fsync_dir(path) : 0;
fail:;
	int e = errno;
	close(fd);
	unlink(tmp);
	return err_set(ERR_IO, "write %s: %s", tmp, strerror(e));
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	return write_replace(path, data, len, mode, true);
}

int file_replace(const char *path, const void *data, size_t len, mode_t mode)
{
	return write_replace(path, data, len, mode, false);
}

int file_mkdirs(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return err_set(ERR_INVALID, "bad directory path \"%s\"", path);
	/* Most calls find the parents there: one syscall, not one a component. */
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return err_set(ERR_IO, "mkdir %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return err_set(ERR_IO, "mkdir %s: %s", buf, strerror(errno));
	return 0;
}

int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}
