/* Tables as Go's tabwriter prints them (minwidth 10, padding 3), as
 * kubeadm's and kubectl's; kubeadm's dates. */
#include "cube/cli.h"

#include "base/clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void cli_table_row(struct cli_table *t, const char *const *cells)
{
	for (size_t i = 0; i < t->ncols; i++)
		strv_push(&t->cells, cells[i] ? cells[i] : "");
}

void cli_table_print(struct cli_table *t)
{
	size_t w[CLI_TABLE_COLS] = {0}, rows = t->cells.n / t->ncols;

	for (size_t i = 0; i < t->cells.n; i++) {
		size_t len = strlen(t->cells.v[i]) + 3;
		if (len < 10)
			len = 10;
		if (len > w[i % t->ncols])
			w[i % t->ncols] = len;
	}
	for (size_t r = 0; r < rows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *cell = t->cells.v[r * t->ncols + c];
			/* The last column is not padded, as tabwriter leaves it. */
			if (c + 1 == t->ncols)
				printf("%s\n", cell);
			else
				printf("%-*s", (int)w[c], cell);
		}
	}
	strv_free(&t->cells);
}

/* "Dec 30, 2025 23:36 UTC": Go's "Jan 02, 2006 15:04 MST", as kubeadm prints. */
char *cli_expires(int64_t ns, char *buf, size_t n)
{
	time_t t = (time_t)(ns / NS_PER_SEC);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "%b %d, %Y %H:%M UTC", &tm);
	return buf;
}

