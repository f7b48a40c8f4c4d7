/* jansson helpers, and the file helpers they are loaded with. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/strv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_paths(void **state)
{
	json_t *o = jx_parse("{\"metadata\":{\"name\":\"n1\",\"generation\":3},\"spec\":"
			     "{\"unschedulable\":true}}",
			     strlen("{\"metadata\":{\"name\":\"n1\",\"generation\":3},\"spec\":"
				    "{\"unschedulable\":true}}"));
	assert_non_null(o);
	assert_string_equal(jx_str(o, "metadata.name"), "n1");
	assert_int_equal(jx_int(o, "metadata.generation", -1), 3);
	assert_int_equal(jx_int(o, "metadata.name", -1), -1);
	assert_true(jx_bool(o, "spec.unschedulable", false));
	assert_null(jx_get(o, "spec.missing.deeper"));
	assert_int_equal(jx_set_str(o, "metadata.labels.app", "web"), 0);
	assert_string_equal(jx_str(o, "metadata.labels.app"), "web");
	assert_int_equal(jx_set(o, "metadata.name.x", json_true()), ERR_INVALID);
	char *s = jx_dump(o);
	assert_string_equal(s, "{\"metadata\":{\"name\":\"n1\",\"generation\":3,\"labels\":"
			       "{\"app\":\"web\"}},\"spec\":{\"unschedulable\":true}}");
	free(s);
	json_decref(o);
}

/* A view shares the picked values and has nothing else. */
static void test_pick(void **state)
{
	static const char *const paths[] = {"metadata.name", "spec.taints", "status.missing"};
	const char *text = "{\"metadata\":{\"name\":\"n1\",\"uid\":\"u\"},\"spec\":{\"taints\":"
			   "[{\"key\":\"k\"}],\"podCIDR\":\"x\"},\"status\":{\"phase\":\"y\"}}";
	json_t *o = jx_parse(text, strlen(text)), *view = jx_pick(o, paths, 3);
	char *s = jx_dump(view);

	assert_string_equal(s, "{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"taints\":[{\"key\":"
			       "\"k\"}]}}");
	assert_ptr_equal(jx_get(view, "spec.taints"), jx_get(o, "spec.taints"));
	free(s);
	json_decref(o);
	json_decref(view);
}

static void test_parse_error_names_position(void **state)
{
	assert_null(jx_parse("{\"a\":\n  ]", 9));
	assert_non_null(strstr(err_msg(), "line 2"));
	/* int64 stays exact */
	json_t *v = jx_parse("9223372036854775807", 19);
	assert_int_equal(json_integer_value(v), INT64_MAX);
	json_decref(v);
}

static void test_files(void **state)
{
	char dir[] = "/tmp/cube-jx-XXXXXX", path[256], *data;
	size_t len;
	struct stat st;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a/b/c.json", dir);
	assert_int_equal(file_read(path, &data, &len, 100), ERR_NOTFOUND);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	assert_int_equal(file_mkdirs(path, 0755), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(file_mkdirs(path, 0755), 0); /* there already */
	snprintf(path, sizeof(path), "%s/a/b/c.json", dir);
	assert_int_equal(file_write_atomic(path, "{\"k\":1}", 7, 0600), 0);
	/* Under a file: the walk names the component that is not a directory. */
	char under[300];
	snprintf(under, sizeof(under), "%s/d/e", path);
	assert_int_equal(file_mkdirs(under, 0755), ERR_IO);
	assert_non_null(strstr(err_msg(), "c.json/d"));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(file_read(path, &data, &len, 100), 0);
	assert_int_equal(len, 7);
	assert_string_equal(data, "{\"k\":1}");
	free(data);
	assert_int_equal(file_read(path, &data, &len, 3), ERR_TOOLARGE);
	json_t *v = jx_load_file(path);
	assert_int_equal(jx_int(v, "k", 0), 1);
	json_decref(v);
	char buf[256];
	assert_string_equal(file_dirname("/x/y/z", buf, sizeof(buf)), "/x/y");
	assert_string_equal(file_dirname("z", buf, sizeof(buf)), ".");
	char *j = file_join("/etc", "ca.crt");
	assert_string_equal(j, "/etc/ca.crt");
	free(j);
	j = file_join("/etc", "/abs");
	assert_string_equal(j, "/abs");
	free(j);
	unlink(path);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/a", dir);
	rmdir(path);
	rmdir(dir);
}

static void test_strv(void **state)
{
	struct strv sv = STRV_INIT;
	strv_push(&sv, "b");
	strv_push_unique(&sv, "a");
	strv_push_unique(&sv, "b");
	strv_pushf(&sv, "c%d", 1);
	assert_int_equal(sv.n, 3);
	assert_null(sv.v[3]);
	strv_sort(&sv);
	char *j = strv_join(&sv, ", ");
	assert_string_equal(j, "a, b, c1");
	free(j);
	assert_int_equal(strlist_len((const char *const *)sv.v), 3);
	strv_free(&sv);
	assert_int_equal(sv.n, 0);
}

static void test_condition_and_remove(void **state)
{
	json_t *node = json_loads("{\"status\":{\"conditions\":[{\"type\":\"MemoryPressure\","
				  "\"status\":\"False\"},{\"type\":\"Ready\",\"status\":\"True\"}]}}",
				  0, NULL);
	struct strv sv = STRV_INIT;

	(void)state;
	assert_string_equal(jx_str(jx_condition(json_object_get(node, "status"), "Ready"),
				   "status"),
			    "True");
	assert_null(jx_condition(json_object_get(node, "status"), "DiskPressure"));
	assert_null(jx_condition(NULL, "Ready"));
	json_decref(node);

	strv_push(&sv, "a");
	strv_push(&sv, "b");
	strv_push(&sv, "c");
	assert_true(strv_remove(&sv, "b"));
	assert_false(strv_remove(&sv, "b"));
	assert_int_equal(sv.n, 2);
	assert_string_equal(sv.v[0], "a");
	assert_string_equal(sv.v[1], "c");
	assert_null(sv.v[2]);
	strv_free(&sv);
}

/* Missing equals missing; missing is not JSON null; values by content. */
static void test_equal(void **state)
{
	json_t *one = json_pack("{s:i}", "a", 1), *same = json_pack("{s:i}", "a", 1);
	json_t *null = json_null();

	(void)state;
	assert_true(jx_equal(NULL, NULL));
	assert_false(jx_equal(NULL, null));
	assert_false(jx_equal(one, NULL));
	assert_true(jx_equal(one, same));
	assert_true(jx_equal(null, null));
	json_object_set_new(same, "a", json_integer(2));
	assert_false(jx_equal(one, same));
	json_decref(one);
	json_decref(same);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_parse_error_names_position),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_strv),
		cmocka_unit_test(test_condition_and_remove),
		cmocka_unit_test(test_equal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
