/* The supervisor's socket (cube/control.h): a request and its reply, a
 * reply far larger than one read ("status" of ten thousand nodes), and
 * the answer when nothing listens. The server runs on a loop of its own
 * thread, as `cube up`'s does; control_call blocks the test's thread. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cube/control.h"

#include "base/err.h"
#include "base/loop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ten thousand nodes' status entries: about 1.2 MB of JSON. */
#define NODES 10000

static json_t *answer(void *arg, const json_t *words)
{
	const char *verb = json_string_value(json_array_get(words, 0));
	json_t *nodes;

	(void)arg;
	if (!verb || strcmp(verb, "status"))
		return json_pack("{s:s}", "error", "unknown command");
	nodes = json_array();
	for (int i = 0; i < NODES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "node-%d", i);
		json_array_append_new(nodes, json_pack("{s:s, s:b, s:b, s:i, s:s}", "name", name,
						       "active", 1, "partitioned", 0,
						       "clockSkewSeconds", 0, "time",
						       "2026-12-03T17:20:00.000000Z"));
	}
	return json_pack("{s:o}", "nodes", nodes);
}

static void *serve(void *arg)
{
	loop_run(arg);
	return NULL;
}

static void test_call_and_big_reply(void **state)
{
	char dir[] = "/tmp/cube-control-XXXXXX", *path;
	struct loop *loop = loop_new();
	struct control *ctl;
	json_t *words, *r;
	pthread_t th;

	(void)state;
	assert_non_null(mkdtemp(dir));
	path = control_path(dir);
	ctl = control_listen(loop, path, answer, NULL);
	assert_non_null(ctl);
	assert_int_equal(pthread_create(&th, NULL, serve, loop), 0);

	words = json_pack("[s]", "status");
	r = control_call(path, words, 10);
	assert_non_null(r);
	assert_int_equal(json_array_size(json_object_get(r, "nodes")), NODES);
	json_decref(r);
	json_decref(words);

	words = json_pack("[s]", "nonsense");
	r = control_call(path, words, 10);
	assert_non_null(r);
	assert_string_equal(json_string_value(json_object_get(r, "error")), "unknown command");
	json_decref(r);

	loop_stop(loop);
	pthread_join(th, NULL);
	control_free(ctl);
	loop_free(loop);

	/* Nothing listens now: the CLI's words for it. */
	r = control_call(path, words, 10);
	assert_null(r);
	assert_non_null(strstr(err_msg(), "no cube up is running there"));
	json_decref(words);
	free(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_and_big_reply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
