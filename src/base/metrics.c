#include "base/alloc.h"
#include "base/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM, KIND_GAUGE_FUNC };

static const char *const kind_names[] = {"counter", "gauge", "histogram", "gauge"};

struct metric_series {
	struct metric_family *fam;
	double value;      /* counter/gauge value, histogram sum */
	uint64_t count;    /* histogram observations */
	uint64_t *buckets; /* histogram: per-bucket (not cumulative), +Inf last */
	char *values[];    /* one per label of the family */
};

struct metric_family {
	char *name, *help;
	enum kind kind;
	char **labels;
	size_t nlabels;
	double *bounds;
	size_t nbounds;
	double (*fn)(void *arg);
	void *arg;
	/* Guards the series array and every series' numbers. */
	pthread_mutex_t mu;
	/* Sorted by label values, so lookup is a bisection and rendering needs no sort. */
	struct metric_series **series;
	size_t nseries, capseries;
};

struct collector {
	void (*fn)(void *arg);
	void *arg;
};

struct metrics {
	pthread_mutex_t mu;          /* guards the family array and function gauges' fn/arg */
	struct metric_family **fams; /* sorted by name */
	size_t nfams, capfams;
	struct collector *collectors; /* metrics_on_render's, also under mu */
	size_t ncollectors;
};

void metrics_on_render(struct metrics *m, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&m->mu);
	m->collectors = realloc(m->collectors, (m->ncollectors + 1) * sizeof(*m->collectors));
	if (!m->collectors)
		abort();
	m->collectors[m->ncollectors++] = (struct collector){fn, arg};
	pthread_mutex_unlock(&m->mu);
}

void metrics_off_render(struct metrics *m, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->ncollectors; i++)
		if (m->collectors[i].fn == fn && m->collectors[i].arg == arg) {
			m->collectors[i] = m->collectors[--m->ncollectors];
			break;
		}
	pthread_mutex_unlock(&m->mu);
}

/* Grow an array of pointers to hold one more element. */
static void *grow(void *arr, size_t len, size_t *cap)
{
	if (len < *cap)
		return arr;
	*cap = *cap ? *cap * 2 : 8;
	return xrealloc(arr, *cap * sizeof(void *));
}

/* ---- float formatting ---- */

/*
 * Go's strconv/ftoa.go (formatDigits, case 'g'), which the Prometheus client's
 * writeFloat calls with precision -1:
 *
 *	// %e is used if the exponent from the conversion
 *	// is less than -4 or greater than or equal to the precision.
 *	// if precision was the shortest possible, use precision 6 for this decision.
 *	if shortest { eprec = 6 }
 *
 * So 100000 stays "100000" but 1e6 is "1e+06" and 31104000 is "3.1104e+07",
 * as real kubelet scrapes show. The digits are the shortest that read back as
 * the same double; Go's exponent has at least two digits, as C's %e does.
 */
void metrics_format_float(double v, char out[METRICS_FLOAT_MAX])
{
	if (isnan(v)) {
		strcpy(out, "NaN");
		return;
	}
	if (isinf(v)) {
		strcpy(out, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == 0) { /* the client special-cases 0, which also turns -0 into "0" */
		strcpy(out, "0");
		return;
	}
	int prec = 0;
	for (; prec < 17; prec++) {
		snprintf(out, METRICS_FLOAT_MAX, "%.*e", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
	int exp = atoi(strchr(out, 'e') + 1);
	if (exp < -4 || exp >= 6)
		return;
	/* Same rounding position as the %e digits, so the same digits. */
	int decimals = prec - exp > 0 ? prec - exp : 0;
	snprintf(out, METRICS_FLOAT_MAX, "%.*f", decimals, v);
}

/* ---- registry ---- */

struct metrics *metrics_new(void)
{
	struct metrics *m = xcalloc(1, sizeof(*m));
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

static void series_free(struct metric_series *s, size_t nlabels)
{
	for (size_t i = 0; i < nlabels; i++)
		free(s->values[i]);
	free(s->buckets);
	free(s);
}

static void family_free(struct metric_family *f)
{
	for (size_t i = 0; i < f->nseries; i++)
		series_free(f->series[i], f->nlabels);
	for (size_t i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->series);
	free(f->labels);
	free(f->bounds);
	free(f->name);
	free(f->help);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfams; i++)
		family_free(m->fams[i]);
	free(m->fams);
	free(m->collectors);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static struct metrics *default_registry;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
	default_registry = metrics_new();
}

struct metrics *metrics_default(void)
{
	pthread_once(&default_once, default_init);
	return default_registry;
}

/* Split "a, b,c" into owned names; returns the count. */
static size_t parse_labels(const char *labels, char ***out)
{
	*out = NULL;
	size_t n = 0, cap = 0;
	while (labels && *labels) {
		size_t len = strcspn(labels, ",");
		const char *p = labels, *end = labels + len;
		while (p < end && *p == ' ')
			p++;
		while (end > p && end[-1] == ' ')
			end--;
		*out = grow(*out, n, &cap);
		(*out)[n++] = xstrndup(p, (size_t)(end - p));
		labels += len + (labels[len] == ',');
	}
	if (n > METRICS_MAX_LABELS)
		abort();
	return n;
}

static bool same_shape(const struct metric_family *f, char **labels, size_t nlabels,
                       const double *bounds, size_t nbounds)
{
	if (f->nlabels != nlabels || f->nbounds != nbounds)
		return false;
	for (size_t i = 0; i < nlabels; i++)
		if (strcmp(f->labels[i], labels[i]) != 0)
			return false;
	return nbounds == 0 || memcmp(f->bounds, bounds, nbounds * sizeof(double)) == 0;
}

/* Index of the first family whose name is >= name. Registry locked. */
static size_t family_pos(const struct metrics *m, const char *name)
{
	size_t lo = 0, hi = m->nfams;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(m->fams[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct metric_series *series_new(struct metric_family *f, const char *const *values)
{
	struct metric_series *s = xcalloc(1, sizeof(*s) + f->nlabels * sizeof(char *));
	s->fam = f;
	for (size_t i = 0; i < f->nlabels; i++)
		s->values[i] = xstrdup(values[i]);
	if (f->kind == KIND_HISTOGRAM)
		s->buckets = xcalloc(f->nbounds + 1, sizeof(uint64_t));
	return s;
}

static struct metric_family *family_get(struct metrics *m, enum kind kind, const char *name,
                                        const char *help, const char *labels, const double *bounds,
                                        size_t nbounds)
{
	char **names;
	size_t nlabels = parse_labels(labels, &names);

	pthread_mutex_lock(&m->mu);
	size_t pos = family_pos(m, name);
	struct metric_family *f = NULL;
	if (pos < m->nfams && strcmp(m->fams[pos]->name, name) == 0) {
		f = m->fams[pos];
		/* A second registration must describe the same metric. */
		if (f->kind != kind || !same_shape(f, names, nlabels, bounds, nbounds))
			abort();
		for (size_t i = 0; i < nlabels; i++)
			free(names[i]);
		free(names);
		pthread_mutex_unlock(&m->mu);
		return f;
	}

	f = xcalloc(1, sizeof(*f));
	f->name = xstrdup(name);
	f->help = xstrdup(help ? help : "");
	f->kind = kind;
	f->labels = names;
	f->nlabels = nlabels;
	if (nbounds) {
		f->bounds = xrealloc(NULL, nbounds * sizeof(double));
		memcpy(f->bounds, bounds, nbounds * sizeof(double));
	}
	f->nbounds = nbounds;
	pthread_mutex_init(&f->mu, NULL);
	if (nlabels == 0 && kind != KIND_GAUGE_FUNC) {
		f->series = grow(NULL, 0, &f->capseries);
		f->series[f->nseries++] = series_new(f, NULL);
	}

	m->fams = grow(m->fams, m->nfams, &m->capfams);
	memmove(&m->fams[pos + 1], &m->fams[pos], (m->nfams - pos) * sizeof(*m->fams));
	m->fams[pos] = f;
	m->nfams++;
	pthread_mutex_unlock(&m->mu);
	return f;
}

struct metric_family *metrics_counter(struct metrics *m, const char *name, const char *help,
                                      const char *labels)
{
	return family_get(m, KIND_COUNTER, name, help, labels, NULL, 0);
}

struct metric_family *metrics_gauge(struct metrics *m, const char *name, const char *help,
                                    const char *labels)
{
	return family_get(m, KIND_GAUGE, name, help, labels, NULL, 0);
}

struct metric_family *metrics_histogram(struct metrics *m, const char *name, const char *help,
                                        const char *labels, const double *buckets, size_t nbuckets)
{
	/* An explicit +Inf bound would duplicate the implicit one; Go drops it too. */
	if (nbuckets && isinf(buckets[nbuckets - 1]) && buckets[nbuckets - 1] > 0)
		nbuckets--;
	for (size_t i = 1; i < nbuckets; i++)
		if (!(buckets[i - 1] < buckets[i]))
			abort();
	return family_get(m, KIND_HISTOGRAM, name, help, labels, buckets, nbuckets);
}

void metrics_gauge_func(struct metrics *m, const char *name, const char *help,
                        double (*fn)(void *arg), void *arg)
{
	struct metric_family *f = family_get(m, KIND_GAUGE_FUNC, name, help, NULL, NULL, 0);
	pthread_mutex_lock(&m->mu);
	f->fn = fn;
	f->arg = arg;
	pthread_mutex_unlock(&m->mu);
}

/* ---- series ---- */

static int values_cmp(char *const *a, const char *const *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int c = strcmp(a[i], b[i]);
		if (c)
			return c;
	}
	return 0;
}

/* The position of values among f's series (found) or where they would go.
 * Called with f->mu held. */
static size_t series_pos(const struct metric_family *f, const char *const *values, bool *found)
{
	size_t lo = 0, hi = f->nseries;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = values_cmp(f->series[mid]->values, values, f->nlabels);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void label_values(const struct metric_family *f, va_list ap, const char **values)
{
	for (size_t i = 0; i < f->nlabels; i++) {
		values[i] = va_arg(ap, const char *);
		if (!values[i])
			values[i] = "";
	}
}

struct metric_series *metrics_with(struct metric_family *f, ...)
{
	if (f->kind == KIND_GAUGE_FUNC)
		abort();
	const char *values[METRICS_MAX_LABELS];
	struct metric_series *s;
	va_list ap;
	bool found;
	size_t at;

	va_start(ap, f);
	label_values(f, ap, values);
	va_end(ap);
	pthread_mutex_lock(&f->mu);
	at = series_pos(f, values, &found);
	if (found) {
		s = f->series[at];
	} else {
		s = series_new(f, values);
		f->series = grow(f->series, f->nseries, &f->capseries);
		memmove(&f->series[at + 1], &f->series[at], (f->nseries - at) * sizeof(*f->series));
		f->series[at] = s;
		f->nseries++;
	}
	pthread_mutex_unlock(&f->mu);
	return s;
}

void metrics_remove(struct metric_family *f, ...)
{
	const char *values[METRICS_MAX_LABELS];
	va_list ap;
	bool found;
	size_t at;

	if (f->kind == KIND_GAUGE_FUNC)
		abort();
	va_start(ap, f);
	label_values(f, ap, values);
	va_end(ap);
	pthread_mutex_lock(&f->mu);
	at = series_pos(f, values, &found);
	if (found) {
		series_free(f->series[at], f->nlabels);
		memmove(&f->series[at], &f->series[at + 1], (f->nseries - at - 1) * sizeof(*f->series));
		f->nseries--;
	}
	pthread_mutex_unlock(&f->mu);
}

void metrics_add(struct metric_series *s, double d)
{
	struct metric_family *f = s->fam;
	if (f->kind != KIND_COUNTER && f->kind != KIND_GAUGE)
		abort();
	/* Counters only go up; a negative delta is a caller bug we refuse to render. */
	if (f->kind == KIND_COUNTER && d < 0)
		return;
	pthread_mutex_lock(&f->mu);
	s->value += d;
	pthread_mutex_unlock(&f->mu);
}

void metrics_inc(struct metric_series *s)
{
	metrics_add(s, 1);
}

void metrics_set(struct metric_series *s, double v)
{
	struct metric_family *f = s->fam;
	if (f->kind != KIND_GAUGE)
		abort();
	pthread_mutex_lock(&f->mu);
	s->value = v;
	pthread_mutex_unlock(&f->mu);
}

void metrics_observe(struct metric_series *s, double v)
{
	struct metric_family *f = s->fam;
	if (f->kind != KIND_HISTOGRAM)
		abort();
	/* First bucket with v <= bound (the "le" semantics); past the end is +Inf. */
	size_t lo = 0, hi = f->nbounds;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->bounds[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	pthread_mutex_lock(&f->mu);
	s->buckets[lo]++;
	s->count++;
	s->value += v;
	pthread_mutex_unlock(&f->mu);
}

double metrics_value(const struct metric_series *s)
{
	pthread_mutex_lock(&s->fam->mu);
	double v = s->value;
	pthread_mutex_unlock(&s->fam->mu);
	return v;
}

uint64_t metrics_count(const struct metric_series *s)
{
	pthread_mutex_lock(&s->fam->mu);
	uint64_t n = s->count;
	pthread_mutex_unlock(&s->fam->mu);
	return n;
}

/* ---- rendering ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_putn(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap ? b->cap * 2 : 4096;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
	buf_putn(b, s, strlen(s));
}

static void buf_float(struct buf *b, double v)
{
	char tmp[METRICS_FLOAT_MAX];
	metrics_format_float(v, tmp);
	buf_puts(b, tmp);
}

/* HELP text escapes \ and newline; label values also escape the quote. */
static void buf_escaped(struct buf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_puts(b, "\\\\");
		else if (*s == '\n')
			buf_puts(b, "\\n");
		else if (*s == '"' && quote)
			buf_puts(b, "\\\"");
		else
			buf_putn(b, s, 1);
	}
}

/* One line: name+suffix{labels[,le="..."]} value. `le` is NULL when absent. */
static void put_sample(struct buf *b, const struct metric_family *f, const struct metric_series *s,
                       const char *suffix, const char *le, double value)
{
	buf_puts(b, f->name);
	buf_puts(b, suffix);
	char sep = '{';
	for (size_t i = 0; s && i < f->nlabels; i++) {
		buf_putn(b, &sep, 1);
		buf_puts(b, f->labels[i]);
		buf_puts(b, "=\"");
		buf_escaped(b, s->values[i], true);
		buf_puts(b, "\"");
		sep = ',';
	}
	if (le) {
		buf_putn(b, &sep, 1);
		buf_puts(b, "le=\"");
		buf_puts(b, le);
		buf_puts(b, "\"");
		sep = ',';
	}
	if (sep == ',')
		buf_puts(b, "}");
	buf_puts(b, " ");
	buf_float(b, value);
	buf_puts(b, "\n");
}

static void put_histogram(struct buf *b, const struct metric_family *f,
                          const struct metric_series *s)
{
	char le[METRICS_FLOAT_MAX];
	uint64_t cum = 0;
	for (size_t i = 0; i < f->nbounds; i++) {
		cum += s->buckets[i];
		metrics_format_float(f->bounds[i], le);
		/* The Go client writes counts through writeFloat too, hence doubles. */
		put_sample(b, f, s, "_bucket", le, (double)cum);
	}
	put_sample(b, f, s, "_bucket", "+Inf", (double)s->count);
	put_sample(b, f, s, "_sum", NULL, s->value);
	put_sample(b, f, s, "_count", NULL, (double)s->count);
}

static void put_family(struct buf *b, struct metric_family *f)
{
	pthread_mutex_lock(&f->mu);
	/* As the Go client: a vector nobody has touched yet is left out. */
	if (f->nseries == 0 && f->kind != KIND_GAUGE_FUNC)
		goto out;
	buf_puts(b, "# HELP ");
	buf_puts(b, f->name);
	buf_puts(b, " ");
	buf_escaped(b, f->help, false);
	buf_puts(b, "\n# TYPE ");
	buf_puts(b, f->name);
	buf_puts(b, " ");
	buf_puts(b, kind_names[f->kind]);
	buf_puts(b, "\n");
	if (f->kind == KIND_GAUGE_FUNC)
		put_sample(b, f, NULL, "", NULL, f->fn ? f->fn(f->arg) : 0);
	for (size_t i = 0; i < f->nseries; i++) {
		if (f->kind == KIND_HISTOGRAM)
			put_histogram(b, f, f->series[i]);
		else
			put_sample(b, f, f->series[i], "", NULL, f->series[i]->value);
	}
out:
	pthread_mutex_unlock(&f->mu);
}

char *metrics_render(struct metrics *m)
{
	struct buf b = {0};
	struct collector *run = NULL;
	size_t n;

	/* The collectors run unlocked: they update series of this registry. */
	pthread_mutex_lock(&m->mu);
	n = m->ncollectors;
	if (n) {
		run = malloc(n * sizeof(*run));
		if (!run)
			abort();
		memcpy(run, m->collectors, n * sizeof(*run));
	}
	pthread_mutex_unlock(&m->mu);
	for (size_t i = 0; i < n; i++)
		run[i].fn(run[i].arg);
	free(run);
	buf_putn(&b, "", 0); /* an empty registry still yields "" */
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->nfams; i++)
		put_family(&b, m->fams[i]);
	pthread_mutex_unlock(&m->mu);
	return b.p;
}
