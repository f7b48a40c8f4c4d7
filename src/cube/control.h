/*
 * control — the supervisor's socket: how `cube fault` and `cube restart`
 * reach the processes of a running `cube up` as an operator reaches a
 * node's systemd and network (restart a kubelet, cut its route to the API
 * server, restart the controller manager with other --controllers).
 *
 * <data-dir>/cube.sock, a Unix socket made 0600 (whoever may use it owns the
 * cluster, as root on a node does). One request per connection: a JSON array
 * of strings (the command's words) and a newline; one reply: a JSON object,
 * {"error": "..."} on failure, and a newline.
 *
 * Ownership: the server belongs to its loop's thread and is freed with
 * control_free; control_call is a blocking client for the CLI (main thread).
 */
#ifndef CUBE_CONTROL_H
#define CUBE_CONTROL_H

#include <jansson.h>

struct loop;
struct control;

/* The reply to words (a JSON array of strings): a new reference, with
 * "error" set on failure. Runs on the server's loop. */
typedef json_t *(*control_fn)(void *arg, const json_t *words);

/* "<dir>/cube.sock" (malloc'd). */
char *control_path(const char *dir);
/*
 * Listen at path. Refuses (NULL with err_msg()) when another process
 * answers there — a second `cube up` on the same data dir; a stale socket
 * left by a crash is replaced.
 */
struct control *control_listen(struct loop *loop, const char *path, control_fn fn, void *arg);
/* Stop listening and remove the socket. NULL is a no-op. */
void control_free(struct control *c);

/*
 * Send words to the supervisor at path and wait (at most timeout_s) for its
 * reply: a new reference, or NULL with err_msg() ("no cube up is running on
 * DIR ..." when nothing listens). A reply with "error" is returned as is.
 */
json_t *control_call(const char *path, const json_t *words, int timeout_s);

#endif
