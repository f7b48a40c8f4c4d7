/*
 * timeutil — durations and timestamps as Kubernetes writes them.
 *
 * Go duration strings ("8760h", "1h30m", "2.5s", "5m0s") in both directions,
 * with one extension accepted on input: "d" for 24h days ("30d"), because
 * certificate lifetimes are spoken of in days. RFC 3339 timestamps as in
 * object metadata, and the short human durations of kubectl and kubeadm
 * ("364d", "9y", "<invalid>").
 *
 * Pure functions; any thread.
 */
#ifndef CUBE_BASE_TIMEUTIL_H
#define CUBE_BASE_TIMEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DURATION_BUF 40
#define TIME_BUF 40

/* 0, or ERR_INVALID with a message naming the bad text. */
int duration_parse(const char *s, int64_t *out_ns);
/* Go's Duration.String(): "0s", "1.5s", "5m0s", "8760h0m0s". Returns buf. */
char *duration_format(int64_t ns, char buf[DURATION_BUF]);
/* apimachinery ShortHumanDuration: "<invalid>", "0s", "45s", "3m", "5h", "364d", "9y". */
char *duration_short_human(int64_t ns, char buf[DURATION_BUF]);
/* apimachinery HumanDuration (kubectl AGE): "45s", "3m20s", "5h", "12d", "2y40d". */
char *duration_human(int64_t ns, char buf[DURATION_BUF]);

/* "2025-01-01T00:00:10Z" (UTC, seconds). Returns buf. */
char *time_format_rfc3339(int64_t ns, char buf[TIME_BUF]);
/* "2025-01-01T00:00:10.123456Z" (UTC, microseconds, as MicroTime). */
char *time_format_rfc3339_micro(int64_t ns, char buf[TIME_BUF]);
/* "2026-11-30T10:00:00+01:00" in the local zone ("Z" when it is UTC), as Go's
 * time.Now().Format(time.RFC3339) prints. */
char *time_format_rfc3339_local(int64_t ns, char buf[TIME_BUF]);
/* RFC 3339 with optional fraction and a Z or ±hh:mm offset. 0 or ERR_INVALID. */
int time_parse_rfc3339(const char *s, int64_t *out_ns);

/*
 * metav1.Time (micro false) or MicroTime (true) from JSON, as upstream's
 * time.Parse(time.RFC3339 / RFC3339Micro) reads it: out is the value as
 * upstream writes it back (UTC; whole seconds, or exactly six fractional
 * digits). ERR_INVALID with Go's text: `parsing time "x" as
 * "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"`, `parsing time
 * "...": month out of range`.
 */
int time_parse_go(const char *s, bool micro, char out[TIME_BUF]);
/* Days since 1970-01-01 to a proleptic Gregorian date. */
void time_civil(int64_t days, int64_t *y, unsigned *m, unsigned *d);

#endif
