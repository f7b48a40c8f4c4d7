#include "base/fdlimit.h"

#include "base/err.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The most any process may ask for (fs.nr_open); 0 when unknown. */
static long nr_open(void)
{
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	long n = 0;

	if (f) {
		if (fscanf(f, "%ld", &n) != 1 || n < 0)
			n = 0;
		fclose(f);
	}
	return n;
}

static long as_long(rlim_t v)
{
	return v == RLIM_INFINITY || v > (rlim_t)LONG_MAX ? LONG_MAX : (long)v;
}

/* v capped at fs.nr_open: the kernel refuses a limit above it. */
static rlim_t capped(rlim_t v, long nr)
{
	return nr > 0 && (v == RLIM_INFINITY || v > (rlim_t)nr) ? (rlim_t)nr : v;
}

int fdlimit_raise(void)
{
	struct rlimit rl;
	rlim_t want;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return err_set(ERR_IO, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
	want = capped(rl.rlim_max, nr_open());
	if (rl.rlim_cur == RLIM_INFINITY || (want != RLIM_INFINITY && rl.rlim_cur >= want))
		return 0;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return err_set(ERR_IO, "setrlimit(RLIMIT_NOFILE, %ld): %s", as_long(want),
			       strerror(errno));
	return 0;
}

long fdlimit_current(void)
{
	struct rlimit rl;
	return getrlimit(RLIMIT_NOFILE, &rl) < 0 ? 0 : as_long(rl.rlim_cur);
}

int fdlimit_ensure(long need, const char *what)
{
	struct rlimit rl, up;
	long nr = nr_open();
	int e;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return err_set(ERR_IO, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
	if (as_long(rl.rlim_cur) >= need)
		return 0;
	if (as_long(capped(rl.rlim_max, nr)) >= need) {
		up = (struct rlimit){.rlim_cur = capped(rl.rlim_max, nr), .rlim_max = rl.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			return 0;
		return err_set(ERR_UNAVAILABLE,
			       "%s needs %ld file descriptors; raising the limit from %ld failed: "
			       "setrlimit: %s",
			       what, need, as_long(rl.rlim_cur), strerror(errno));
	}
	if (nr > 0 && need > nr)
		return err_set(ERR_UNAVAILABLE,
			       "%s needs %ld file descriptors, more than the kernel lets one process "
			       "open (fs.nr_open = %ld). Raise that first, as root (`sysctl -w "
			       "fs.nr_open=%ld`), then the limit (`ulimit -n %ld`, or LimitNOFILE=%ld "
			       "in a systemd unit)",
			       what, need, nr, need, need, need);
	/* Root with CAP_SYS_RESOURCE may raise the hard limit: try. */
	up = (struct rlimit){.rlim_cur = (rlim_t)need, .rlim_max = (rlim_t)need};
	if (setrlimit(RLIMIT_NOFILE, &up) == 0)
		return 0;
	e = errno;
	return err_set(ERR_UNAVAILABLE,
		       "%s needs %ld file descriptors, but this process may open at most %ld "
		       "(its hard limit, ulimit -Hn) and may not raise that (setrlimit: %s; it "
		       "takes root with CAP_SYS_RESOURCE). Raise the limit where cube starts: "
		       "`ulimit -n %ld` in a root shell or a nofile line in "
		       "/etc/security/limits.conf, `prlimit --nofile=%ld:%ld cube ...` as root, or "
		       "LimitNOFILE=%ld in a systemd unit",
		       what, need, as_long(rl.rlim_max), strerror(e), need, need, need, need);
}
