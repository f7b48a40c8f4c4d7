/*
 * fdlimit — the process's file-descriptor limit (RLIMIT_NOFILE).
 *
 * fdlimit_raise() is what Go programs do at start since Go 1.19: the soft
 * limit goes up to the hard one, so a daemon is not held to the 1,024 a
 * login shell hands out by default (cube uses epoll, never select(), so
 * descriptors past 1,023 are fine).
 *
 * fdlimit_ensure() is for a command that knows how many descriptors it
 * will hold (cube up --nodes N): it raises the soft limit, and the hard
 * one too when the hard one is too low and the process may raise it (root
 * with CAP_SYS_RESOURCE: it simply tries), never past the kernel's
 * fs.nr_open. When that cannot be done it says so before anything starts,
 * instead of the command failing later, piecemeal, with EMFILE.
 *
 * Any thread (the limit is the process's); call them at start, before
 * other threads open files. Errors are negative codes with err_msg() set.
 */
#ifndef CUBE_BASE_FDLIMIT_H
#define CUBE_BASE_FDLIMIT_H

/* Raise the soft limit to the hard limit (at most fs.nr_open). 0, or
 * ERR_IO when getrlimit/setrlimit failed (the limits are unchanged). */
int fdlimit_raise(void);

/* The soft limit now: how many descriptors the process may hold (LONG_MAX
 * when unlimited). */
long fdlimit_current(void);

/*
 * Make sure the process may hold `need` descriptors: 0 when the soft
 * limit already allows it or could be raised far enough (the soft limit
 * then goes to the hard one, or both to `need` when the hard one had to
 * rise). Otherwise ERR_UNAVAILABLE, the limits unchanged, and err_msg()
 * says who needs how many (`what`, e.g. "cube up --nodes 5000"), what the
 * limit is, and how to raise it: `ulimit -n`, prlimit, limits.conf,
 * LimitNOFILE= for a systemd unit; or sysctl fs.nr_open when even root may
 * not go that high.
 */
int fdlimit_ensure(long need, const char *what);

#endif
