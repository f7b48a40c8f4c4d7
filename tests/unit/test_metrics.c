#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"

static void assert_render(struct metrics *m, const char *want)
{
	char *got = metrics_render(m);
	assert_string_equal(got, want);
	free(got);
}

static void test_counter_labels_escaping(void **state)
{
	struct metrics *m = metrics_new();
	struct metric_family *f = metrics_counter(
	    m, "apiserver_request_total", "Counter of apiserver requests\nbroken out by \\verb.",
	    "verb,resource,code");
	metrics_inc(metrics_with(f, "LIST", "we\"ird\\va\nlue", "200"));
	metrics_add(metrics_with(f, "GET", "pods", "200"), 3);
	metrics_inc(metrics_with(f, "GET", "pods", "200"));
	metrics_add(metrics_with(f, "GET", "pods", "200"), -10); /* counters never go down */
	assert_true(metrics_value(metrics_with(f, "GET", "pods", "200")) == 4);
	assert_render(m, "# HELP apiserver_request_total Counter of apiserver requests\\nbroken "
	                 "out by \\\\verb.\n"
	                 "# TYPE apiserver_request_total counter\n"
	                 "apiserver_request_total{verb=\"GET\",resource=\"pods\",code=\"200\"} 4\n"
	                 "apiserver_request_total{verb=\"LIST\",resource=\"we\\\"ird\\\\va\\nlue\","
	                 "code=\"200\"} 1\n");
	metrics_free(m);
}

/* A deleted object's series go; the others stay in order. */
static void test_remove(void **state)
{
	struct metrics *m = metrics_new();
	struct metric_family *f = metrics_gauge(m, "kube_x", "X.", "name,condition");
	metrics_set(metrics_with(f, "a", "approved"), 1);
	metrics_set(metrics_with(f, "b", "approved"), 0);
	metrics_set(metrics_with(f, "c", "approved"), 1);
	metrics_remove(f, "b", "approved");
	metrics_remove(f, "zz", "approved"); /* none: nothing */
	assert_render(m, "# HELP kube_x X.\n"
	                 "# TYPE kube_x gauge\n"
	                 "kube_x{name=\"a\",condition=\"approved\"} 1\n"
	                 "kube_x{name=\"c\",condition=\"approved\"} 1\n");
	metrics_remove(f, "a", "approved");
	metrics_remove(f, "c", "approved");
	assert_render(m, "");
	metrics_free(m);
}

static void test_gauge_and_plain_counter(void **state)
{
	struct metrics *m = metrics_new();
	struct metric_family *g = metrics_gauge(m, "workqueue_depth", "Current depth.", "name");
	metrics_set(metrics_with(g, "csr"), 0.5);
	metrics_set(metrics_with(g, "node"), 7);
	metrics_add(metrics_with(g, "node"), -9);
	metrics_counter(m, "rest_client_exec_plugin_calls_total", "Exec plugin calls.", NULL);
	/* A labelled family nobody used yet is left out, as the Go client does. */
	metrics_counter(m, "unused_total", "Never touched.", "code");
	assert_render(m, "# HELP rest_client_exec_plugin_calls_total Exec plugin calls.\n"
	                 "# TYPE rest_client_exec_plugin_calls_total counter\n"
	                 "rest_client_exec_plugin_calls_total 0\n"
	                 "# HELP workqueue_depth Current depth.\n"
	                 "# TYPE workqueue_depth gauge\n"
	                 "workqueue_depth{name=\"csr\"} 0.5\n"
	                 "workqueue_depth{name=\"node\"} -2\n");
	metrics_free(m);
}

static void test_histogram(void **state)
{
	static const double buckets[] = {0.005, 0.1, 1, 1800, 31104000, INFINITY};
	struct metrics *m = metrics_new();
	struct metric_family *h =
	    metrics_histogram(m, "request_duration_seconds", "Latency.", "verb", buckets, 6);
	struct metric_series *s = metrics_with(h, "GET");
	/* Exact binary fractions so the sum has a known shortest form. */
	const double obs[] = {0.00390625, 0.5, 1, 2000, 1e5, 4e7};
	for (size_t i = 0; i < 6; i++)
		metrics_observe(s, obs[i]);
	assert_int_equal(metrics_count(s), 6);
	assert_true(metrics_value(s) == 40102001.50390625);
	assert_render(m, "# HELP request_duration_seconds Latency.\n"
	                 "# TYPE request_duration_seconds histogram\n"
	                 "request_duration_seconds_bucket{verb=\"GET\",le=\"0.005\"} 1\n"
	                 "request_duration_seconds_bucket{verb=\"GET\",le=\"0.1\"} 1\n"
	                 "request_duration_seconds_bucket{verb=\"GET\",le=\"1\"} 3\n"
	                 "request_duration_seconds_bucket{verb=\"GET\",le=\"1800\"} 3\n"
	                 "request_duration_seconds_bucket{verb=\"GET\",le=\"3.1104e+07\"} 5\n"
	                 "request_duration_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 6\n"
	                 "request_duration_seconds_sum{verb=\"GET\"} 4.010200150390625e+07\n"
	                 "request_duration_seconds_count{verb=\"GET\"} 6\n");
	metrics_free(m);
}

static void test_histogram_no_labels(void **state)
{
	static const double buckets[] = {1, 2};
	struct metrics *m = metrics_new();
	struct metric_family *h = metrics_histogram(m, "h", "H.", NULL, buckets, 2);
	metrics_observe(metrics_with(h), 2);
	assert_render(m, "# HELP h H.\n"
	                 "# TYPE h histogram\n"
	                 "h_bucket{le=\"1\"} 0\n"
	                 "h_bucket{le=\"2\"} 1\n"
	                 "h_bucket{le=\"+Inf\"} 1\n"
	                 "h_sum 2\n"
	                 "h_count 1\n");
	metrics_free(m);
}

static double ttl_fn(void *arg)
{
	return *(double *)arg;
}

static void test_gauge_func(void **state)
{
	struct metrics *m = metrics_new();
	double ttl = INFINITY;
	metrics_gauge_func(m, "kubelet_certificate_manager_client_ttl_seconds",
	                   "Gauge of the TTL (time-to-live) of the Kubelet's client certificate.",
	                   ttl_fn, &ttl);
	const char *want = "# HELP kubelet_certificate_manager_client_ttl_seconds Gauge of the "
	                   "TTL (time-to-live) of the Kubelet's client certificate.\n"
	                   "# TYPE kubelet_certificate_manager_client_ttl_seconds gauge\n"
	                   "kubelet_certificate_manager_client_ttl_seconds +Inf\n";
	assert_render(m, want);
	ttl = 86400; /* evaluated at render time */
	char *got = metrics_render(m);
	assert_non_null(strstr(got, "kubelet_certificate_manager_client_ttl_seconds 86400\n"));
	free(got);
	metrics_free(m);
}

static void test_float_format(void **state)
{
	static const struct {
		double v;
		const char *want;
	} cases[] = {
	    {0, "0"},
	    {-0.0, "0"},
	    {1, "1"},
	    {-1, "-1"},
	    {0.5, "0.5"},
	    {-2.5, "-2.5"},
	    {0.1, "0.1"},
	    {0.1 + 0.2, "0.30000000000000004"},
	    {100000, "100000"},
	    {123456.789, "123456.789"},
	    {1e6, "1e+06"},
	    {1234567.5, "1.2345675e+06"},
	    {31104000, "3.1104e+07"},
	    {1e21, "1e+21"},
	    {0.0001, "0.0001"},
	    {1e-05, "1e-05"},
	    {1.5e-7, "1.5e-07"},
	    {5e-324, "5e-324"},
	    {DBL_MAX, "1.7976931348623157e+308"},
	    {1e100, "1e+100"},
	    {NAN, "NaN"},
	    {INFINITY, "+Inf"},
	    {-INFINITY, "-Inf"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[METRICS_FLOAT_MAX];
		metrics_format_float(cases[i].v, buf);
		assert_string_equal(buf, cases[i].want);
	}
}

static void test_ordering(void **state)
{
	struct metrics *m = metrics_new();
	struct metric_family *z = metrics_gauge(m, "zeta", "Z.", "a,b");
	metrics_gauge(m, "alpha", "A.", NULL);
	metrics_gauge(m, "mid", "M.", NULL);
	metrics_set(metrics_with(z, "b", "a"), 1);
	metrics_set(metrics_with(z, "a", "z"), 2);
	metrics_set(metrics_with(z, "a", "b"), 3);
	metrics_set(metrics_with(z, "", "c"), 4);
	assert_render(m, "# HELP alpha A.\n# TYPE alpha gauge\nalpha 0\n"
	                 "# HELP mid M.\n# TYPE mid gauge\nmid 0\n"
	                 "# HELP zeta Z.\n# TYPE zeta gauge\n"
	                 "zeta{a=\"\",b=\"c\"} 4\n"
	                 "zeta{a=\"a\",b=\"b\"} 3\n"
	                 "zeta{a=\"a\",b=\"z\"} 2\n"
	                 "zeta{a=\"b\",b=\"a\"} 1\n");
	metrics_free(m);
}

static void test_reregister(void **state)
{
	struct metrics *m = metrics_new();
	struct metric_family *a = metrics_counter(m, "x_total", "X.", "code");
	struct metric_family *b = metrics_counter(m, "x_total", "X again.", "code");
	assert_ptr_equal(a, b);
	struct metric_series *s = metrics_with(a, "200");
	assert_ptr_equal(s, metrics_with(b, "200"));
	metrics_inc(s);
	assert_true(metrics_value(metrics_with(b, "200")) == 1);
	assert_ptr_equal(metrics_default(), metrics_default());
	metrics_free(m);
	metrics_free(NULL);
}

#define NTHREADS 4
#define NINCS 100000

struct worker {
	struct metric_family *f;
	char name[8];
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < NINCS; i++) {
		metrics_inc(metrics_with(w->f, "shared"));
		if (i % 1000 == 0) /* concurrent creation of series next to updates */
			metrics_inc(metrics_with(w->f, w->name));
	}
	return NULL;
}

static void test_concurrency(void **state)
{
	struct metrics *m = metrics_new();
	struct metric_family *f = metrics_counter(m, "c_total", "C.", "who");
	pthread_t th[NTHREADS];
	struct worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i].f = f;
		w[i].name[0] = (char)('a' + i);
		w[i].name[1] = '\0';
		assert_int_equal(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_true(metrics_value(metrics_with(f, "shared")) == NTHREADS * NINCS);
	assert_render(m, "# HELP c_total C.\n# TYPE c_total counter\n"
	                 "c_total{who=\"a\"} 100\n"
	                 "c_total{who=\"b\"} 100\n"
	                 "c_total{who=\"c\"} 100\n"
	                 "c_total{who=\"d\"} 100\n"
	                 "c_total{who=\"shared\"} 400000\n");
	metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counter_labels_escaping),
	    cmocka_unit_test(test_gauge_and_plain_counter),
	    cmocka_unit_test(test_remove),
	    cmocka_unit_test(test_histogram),
	    cmocka_unit_test(test_histogram_no_labels),
	    cmocka_unit_test(test_gauge_func),
	    cmocka_unit_test(test_float_format),
	    cmocka_unit_test(test_ordering),
	    cmocka_unit_test(test_reregister),
	    cmocka_unit_test(test_concurrency),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
