/*
 * cli — what every cube subcommand shares: the command table, usage and
 * error reporting, and the exit codes (0 fine, 1 the thing checked is not
 * fine or the operation failed, 2 the command line is wrong).
 *
 * Main thread only.
 */
#ifndef CUBE_CLI_H
#define CUBE_CLI_H

#include <stdbool.h>
#include <stdio.h>

struct loop;

#define EXIT_USAGE 2

struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
	const char *usage; /* full --help text */
};

/* Find and run argv[1] among cmds; prints the group's help otherwise. */
int cli_dispatch(const char *group, const struct cli_command *cmds, int argc, char **argv);
/* "cube <cmd>: <message>\nRun 'cube <cmd> --help' for usage." → EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* After getopt_long returned '?' or ':': name the offending argument. */
int cli_bad_flag(const char *cmd, char **argv);
/* "error: <message>" on stderr → 1. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run loop until SIGTERM or SIGINT (logged as upstream components do). */
void cli_run_until_signal(struct loop *loop);
/* A flag's boolean: "true"/"1" (or no value), "false"/"0"; -1 otherwise. */
int cli_parse_bool(const char *s, bool *out);
/* Print usage text (stdout) and return 0: for --help. */
int cli_help(const char *usage);

int cmd_pki(int argc, char **argv);
int cmd_certs(int argc, char **argv);
int cmd_apiserver(int argc, char **argv);
int cmd_server(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_controller_manager(int argc, char **argv);
int cmd_kubelet(int argc, char **argv);
int cmd_scheduler(int argc, char **argv);

#endif
