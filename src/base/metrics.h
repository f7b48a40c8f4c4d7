/*
 * metrics — a Prometheus registry rendered in text exposition format 0.0.4.
 *
 * Components register counters, gauges and histograms once (typically at
 * start-up), look up a labelled series with metrics_with() and update it on
 * their hot paths. /metrics handlers call metrics_render(). The output matches
 * what the Prometheus Go client writes for the same data: families sorted by
 * name, series sorted by label values, floats formatted as Go's
 * strconv.FormatFloat(v, 'g', -1, 64), so scrapes and golden files compare
 * byte for byte with upstream components.
 *
 * Ownership: the registry owns every family and series. Names, help texts,
 * label names, label values and buckets are copied. Family and series
 * pointers stay valid until metrics_free() (a series' until metrics_remove
 * of it), so callers may cache them. The
 * default registry (metrics_default) lives for the whole process.
 *
 * Misuse is a programming error and aborts: registering a name again with a
 * different type, labels or buckets; metrics_set on a counter; metrics_observe
 * on anything but a histogram; more than METRICS_MAX_LABELS labels.
 *
 * Thread-safety: every function may be called from any thread. A function
 * gauge's callback runs inside metrics_render() with the registry locked, so
 * it must not call back into the registry.
 */
#ifndef CUBE_BASE_METRICS_H
#define CUBE_BASE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_MAX_LABELS 16
/* Enough for any double formatted by metrics_format_float, with the NUL. */
#define METRICS_FLOAT_MAX 32

struct metrics;
struct metric_family;
struct metric_series;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m); /* NULL is a no-op */
/* The process-wide registry, created on first use. */
struct metrics *metrics_default(void);

/*
 * Register (or find) a family. `labels` is NULL for none or comma-separated
 * label names ("verb,resource,code"). A family without labels has exactly one
 * series, created now, so it renders as 0 before the first update.
 */
struct metric_family *metrics_counter(struct metrics *m, const char *name, const char *help,
                                      const char *labels);
struct metric_family *metrics_gauge(struct metrics *m, const char *name, const char *help,
                                    const char *labels);
/* `buckets` are ascending upper bounds; the +Inf bucket is implicit. */
struct metric_family *metrics_histogram(struct metrics *m, const char *name, const char *help,
                                        const char *labels, const double *buckets, size_t nbuckets);
/*
 * A label-less gauge whose value is fn(arg), evaluated at render time.
 * Registering the same name again replaces fn and arg.
 */
void metrics_gauge_func(struct metrics *m, const char *name, const char *help,
                        double (*fn)(void *arg), void *arg);

/*
 * The series for the given label values: one `const char *` per label of the
 * family, in registration order (none for a label-less family). Created on
 * first use; a NULL value counts as "".
 */
struct metric_series *metrics_with(struct metric_family *f, ...);

/*
 * Forget the series with these label values (a deleted object's): pointers
 * to it are no longer valid. Nothing when there is none.
 */
void metrics_remove(struct metric_family *f, ...);

void metrics_inc(struct metric_series *s);               /* counter, gauge */
void metrics_add(struct metric_series *s, double d);     /* counters ignore d < 0 */
void metrics_set(struct metric_series *s, double v);     /* gauge */
void metrics_observe(struct metric_series *s, double v); /* histogram */

/* Counter or gauge value; a histogram's sum. */
double metrics_value(const struct metric_series *s);
/* A histogram's number of observations (0 for other types). */
uint64_t metrics_count(const struct metric_series *s);

/*
 * fn(arg) runs at the start of every metrics_render, on the rendering
 * thread, before any series is read: where a gauge that is a function of
 * live state is brought up to date (workqueue_unfinished_work_seconds).
 * metrics_off_render before arg goes.
 */
void metrics_on_render(struct metrics *m, void (*fn)(void *arg), void *arg);
void metrics_off_render(struct metrics *m, void (*fn)(void *arg), void *arg);

/* The exposition text of every family with at least one series. Caller frees. */
char *metrics_render(struct metrics *m);

/*
 * `v` as Go's strconv.FormatFloat(v, 'g', -1, 64), with the Prometheus
 * client's special cases: "+Inf", "-Inf", "NaN", and "0" for -0.
 */
void metrics_format_float(double v, char out[METRICS_FLOAT_MAX]);

#endif
