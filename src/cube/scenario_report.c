/*
 * The scenario's report: one self-contained HTML page — inline CSS, an
 * inline SVG timeline (a lane per node: its Ready state, its taints, the
 * pods bound to it; rows for CSRs and warning events; the script's actions
 * as numbered vertical lines), the expectations with measured and expected
 * timings, every timeline entry, and the diagnostic commands with their
 * output. No scripts, no network: it opens from disk anywhere.
 */
#include "cube/scenario_int.h"

#include "base/err.h"
#include "base/file.h"
#include "base/sbuf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 1100   /* the SVG's width */
#define LEFT 120 /* lane labels */
#define RIGHT 20
#define TOP 72 /* action numbers, in up to three rows */
#define LANE_H 58
#define ROW_H 26

static void esc(struct sbuf *b, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<':
			sbuf_add(b, "&lt;");
			break;
		case '>':
			sbuf_add(b, "&gt;");
			break;
		case '&':
			sbuf_add(b, "&amp;");
			break;
		case '"':
			sbuf_add(b, "&quot;");
			break;
		default:
			sbuf_addc(b, *s);
		}
	}
}

static double x_of(const struct scen_record *r, double t)
{
	double end = r->end > 0 ? r->end : 1;
	return LEFT + (t < 0 ? 0 : t > end ? end : t) / end * (W - LEFT - RIGHT);
}

static const char *ready_color(const char *ready)
{
	if (!strcmp(ready, "True"))
		return "#2e7d32";
	if (!strcmp(ready, "False"))
		return "#c62828";
	if (!strcmp(ready, "Unknown"))
		return "#ef6c00";
	return "#bdbdbd";
}

static const char *const taint_color[TAINT_KINDS] = {"#f9a825", "#6a1b9a", "#ffe082", "#b39ddb",
                                                     "#78909c"};

/* A tick every 1, 2, 5, 10, ... seconds: about ten across. */
static double tick_step(double end)
{
	static const double steps[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1200};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (end / steps[i] <= 12)
			return steps[i];
	return 3600;
}

static void axis(struct sbuf *b, const struct scen_record *r, double bottom)
{
	double step = tick_step(r->end);

	for (double t = 0; t <= r->end + 1e-9; t += step) {
		double x = x_of(r, t);
		sbuf_addf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>",
		          x, TOP, x, bottom);
		sbuf_addf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">%gs</text>", x,
		          bottom + 14, t);
	}
}

static void lane(struct sbuf *b, const struct scen_record *r, const struct lane *l, double y,
                 int max_pods)
{
	sbuf_addf(b, "<text x=\"8\" y=\"%.1f\" class=\"label\">", y + 14);
	esc(b, l->node);
	sbuf_add(b, "</text>");
	for (size_t i = 0; i < l->n; i++) {
		const struct sample *s = &l->v[i];
		double x0 = x_of(r, s->t), x1 = x_of(r, i + 1 < l->n ? l->v[i + 1].t : r->end);
		int bar = 0;

		sbuf_addf(b,
		          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"18\" fill=\"%s\">"
		          "<title>",
		          x0, y, x1 - x0 > 0.5 ? x1 - x0 : 0.5, ready_color(s->ready));
		esc(b, l->node);
		sbuf_addf(b, " Ready=%s from t+%.1fs, %d pods</title></rect>", s->ready, s->t,
		          s->pods);
		for (int k = 0; k < TAINT_KINDS; k++) {
			if (!(s->taints & (1u << k)))
				continue;
			sbuf_addf(b,
			          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"5\" "
			          "fill=\"%s\"><title>%s:%s</title></rect>",
			          x0, y + 20 + 6 * bar, x1 - x0 > 0.5 ? x1 - x0 : 0.5,
			          taint_color[k], scen_taints[k].key, scen_taints[k].effect);
			bar++;
		}
	}
	/* Pods bound to the node: a step line under the taints. */
	if (l->n && max_pods > 0) {
		double base = y + LANE_H - 8, h = 14;
		sbuf_addf(b, "<polyline class=\"pods\" points=\"");
		for (size_t i = 0; i < l->n; i++) {
			double x0 = x_of(r, l->v[i].t),
			       x1 = x_of(r, i + 1 < l->n ? l->v[i + 1].t : r->end);
			double py = base - h * l->v[i].pods / max_pods;
			sbuf_addf(b, "%.1f,%.1f %.1f,%.1f ", x0, py, x1, py);
		}
		sbuf_add(b, "\"/>");
		/* A count is labelled where it changes and lasts long enough to read. */
		for (size_t i = 0; i < l->n; i++)
			if ((i == 0 || l->v[i].pods != l->v[i - 1].pods) &&
			    x_of(r, i + 1 < l->n ? l->v[i + 1].t : r->end) - x_of(r, l->v[i].t) >=
			        12)
				sbuf_addf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"podn\">%d</text>",
				          x_of(r, l->v[i].t) + 2,
				          base - h * l->v[i].pods / max_pods - 2, l->v[i].pods);
	}
}

/* CSRs and warning events as markers on rows of their own. */
static void markers(struct sbuf *b, const struct scen_record *r, double y)
{
	sbuf_addf(b, "<text x=\"8\" y=\"%.1f\" class=\"label\">CSRs</text>", y + 12);
	sbuf_addf(b, "<text x=\"8\" y=\"%.1f\" class=\"label\">events</text>", y + ROW_H + 12);
	for (size_t i = 0; i < r->entries.n; i++) {
		const struct entry *e = &r->entries.v[i];
		const char *fill;
		double x = x_of(r, e->t), yy;

		if (e->kind == E_CSR) {
			fill = strstr(e->text, "Denied")     ? "#c62828"
			       : strstr(e->text, "Approved") ? "#2e7d32"
			       : strstr(e->text, "Issued")   ? "#00838f"
			                                     : "#1565c0";
			yy = y + 8;
			sbuf_addf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\">", x, yy,
			          fill);
		} else if (e->kind == E_EVENT) {
			yy = y + ROW_H + 8;
			sbuf_addf(b, "<path d=\"M%.1f %.1f l4 4 l-4 4 l-4 -4 z\" fill=\"%s\">", x,
			          yy - 4, strstr(e->text, "Warning") ? "#d84315" : "#546e7a");
		} else {
			continue;
		}
		sbuf_addf(b, "<title>t+%.1fs ", e->t);
		esc(b, e->who);
		sbuf_add(b, ": ");
		esc(b, e->text);
		sbuf_add(b, e->kind == E_CSR ? "</title></circle>" : "</title></path>");
	}
}

/* Numbered circles above the lanes, a dashed line down; circles that
 * would overlap the previous one go on a row above. */
static void actions(struct sbuf *b, const struct scen_record *r, double bottom)
{
	double last_x = -100;
	int n = 0, row = 0;

	for (size_t i = 0; i < r->entries.n; i++) {
		const struct entry *e = &r->entries.v[i];
		double x = x_of(r, e->t), cy;
		if (e->kind != E_ACTION)
			continue;
		n++;
		row = x - last_x < 20 ? (row + 1) % 3 : 0;
		last_x = x;
		cy = TOP - 12 - 20 * row;
		sbuf_addf(b,
		          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"act\"/>"
		          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"9\" class=\"actdot\"><title>",
		          x, cy, x, bottom, x, cy);
		esc(b, e->text);
		sbuf_addf(b,
		          "</title></circle><text x=\"%.1f\" y=\"%.1f\" class=\"actn\">%d</text>",
		          x, cy + 4, n);
	}
}

static int by_node(const void *a, const void *b)
{
	return strcmp((*(const struct lane *const *)a)->node,
	              (*(const struct lane *const *)b)->node);
}

static void svg(struct sbuf *b, const struct scen_record *r)
{
	int max_pods = 0;
	double y = TOP, bottom;

	for (size_t i = 0; i < r->lanes.n; i++)
		for (size_t k = 0; k < r->lanes.v[i].n; k++)
			if (r->lanes.v[i].v[k].pods > max_pods)
				max_pods = r->lanes.v[i].v[k].pods;
	bottom = TOP + LANE_H * (double)r->lanes.n + 2 * ROW_H;
	sbuf_addf(b,
	          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
	          "viewBox=\"0 0 %d %.0f\" id=\"timeline\">",
	          W, bottom + 24, W, bottom + 24);
	axis(b, r, bottom);
	/* Lanes in the nodes' name order, whatever order they were seen in. */
	const struct lane **sorted = calloc(r->lanes.n + 1, sizeof(*sorted));
	if (!sorted)
		abort();
	for (size_t i = 0; i < r->lanes.n; i++)
		sorted[i] = &r->lanes.v[i];
	qsort(sorted, r->lanes.n, sizeof(*sorted), by_node);
	for (size_t i = 0; i < r->lanes.n; i++, y += LANE_H)
		lane(b, r, sorted[i], y + 4, max_pods);
	free(sorted);
	markers(b, r, y);
	actions(b, r, bottom);
	sbuf_add(b, "</svg>\n");
}

static void legend(struct sbuf *b)
{
	static const struct {
		const char *color, *what;
	} keys[] = {
	    {"#2e7d32", "Ready=True"},
	    {"#c62828", "Ready=False"},
	    {"#ef6c00", "Ready=Unknown"},
	    {"#f9a825", "unreachable:NoSchedule"},
	    {"#6a1b9a", "unreachable:NoExecute"},
	    {"#ffe082", "not-ready:NoSchedule"},
	    {"#b39ddb", "not-ready:NoExecute"},
	    {"#1565c0", "CSR created"},
	    {"#2e7d32", "CSR approved"},
	    {"#00838f", "CSR issued"},
	    {"#c62828", "CSR denied"},
	};
	sbuf_add(b, "<p class=\"legend\">");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		sbuf_addf(b, "<span><i style=\"background:%s\"></i>%s</span>", keys[i].color,
		          keys[i].what);
	sbuf_add(b,
	         "<span><i class=\"line\"></i>pods bound to the node</span>"
	         "<span><i class=\"dot\"></i>the scenario's actions (numbered below)</span></p>\n");
}

static void action_list(struct sbuf *b, const struct scen_record *r)
{
	sbuf_add(b, "<ol class=\"actions\">");
	for (size_t i = 0; i < r->entries.n; i++)
		if (r->entries.v[i].kind == E_ACTION) {
			sbuf_addf(b, "<li><b>t+%.1fs</b> ", r->entries.v[i].t);
			esc(b, r->entries.v[i].text);
			sbuf_add(b, "</li>");
		}
	sbuf_add(b, "</ol>\n");
}

static void expectations(struct sbuf *b, const struct scen_record *r)
{
	sbuf_add(b, "<h2>Expectations</h2><table><tr><th></th><th>what</th><th>result</th></tr>");
	for (size_t i = 0; i < r->expects.n; i++) {
		const struct expect *e = &r->expects.v[i];
		sbuf_addf(b, "<tr class=\"%s\"><td>%s</td><td>", e->ok ? "pass" : "fail",
		          e->ok ? "PASS" : "FAIL");
		esc(b, e->what);
		sbuf_add(b, "</td><td>");
		esc(b, e->detail);
		sbuf_add(b, "</td></tr>");
	}
	sbuf_add(b, "</table>\n");
}

static void timeline_table(struct sbuf *b, const struct scen_record *r)
{
	sbuf_add(b, "<h2>Timeline</h2><table class=\"tl\">");
	for (size_t i = 0; i < r->entries.n; i++) {
		const struct entry *e = &r->entries.v[i];
		if (e->kind == E_SAY) {
			sbuf_add(b, "<tr class=\"say\"><td></td><td colspan=\"2\">");
			esc(b, e->text);
			sbuf_add(b, "</td></tr>");
			continue;
		}
		sbuf_addf(b, "<tr class=\"k%d\"><td>t+%.1fs</td><td>", (int)e->kind, e->t);
		esc(b, e->who);
		sbuf_add(b, "</td><td>");
		esc(b, e->text);
		sbuf_add(b, "</td></tr>");
	}
	sbuf_add(b, "</table>\n");
}

static void commands(struct sbuf *b, const struct scen_record *r)
{
	sbuf_add(b, "<h2>Commands and their output</h2>");
	sbuf_add(b, "<p>Run with <code>KUBECONFIG=");
	esc(b, r->dir);
	sbuf_add(b, "/admin.conf</code> and <code>CUBE_DATA=");
	esc(b, r->dir);
	sbuf_add(b, "</code>.</p>");
	for (size_t i = 0; i < r->diags.n; i++) {
		const struct diag *d = &r->diags.v[i];
		sbuf_addf(b, "<div class=\"cmd\"><p><b>t+%.1fs</b>%s <code>$ ", d->t,
		          d->action ? " (action, failed)" : "");
		esc(b, d->cmd);
		sbuf_addf(b, "</code>%s</p><pre>", d->rc ? " <span class=\"rc\">exit " : "");
		if (d->rc)
			sbuf_addf(b, "%d</span>", d->rc);
		esc(b, d->out);
		sbuf_add(b, "</pre></div>\n");
	}
}

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#212121;max-width:1160px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}"
    ".meta{color:#616161}.verdict{font-weight:600;font-size:16px}"
    ".verdict.pass{color:#2e7d32}.verdict.fail{color:#c62828}"
    "svg{border:1px solid #e0e0e0;background:#fafafa}"
    ".grid{stroke:#e0e0e0}.tick{font-size:11px;fill:#757575;text-anchor:middle}"
    ".label{font-size:12px;fill:#424242}.pods{fill:none;stroke:#37474f;stroke-width:1.5}"
    ".podn{font-size:10px;fill:#37474f}.act{stroke:#1565c0;stroke-dasharray:4 3}"
    ".actdot{fill:#1565c0}.actn{font-size:11px;fill:#fff;text-anchor:middle}"
    ".legend span{margin-right:14px;white-space:nowrap;font-size:12px}"
    ".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}"
    ".legend i.line{height:2px;background:#37474f;vertical-align:3px}"
    ".legend i.dot{border-radius:6px;background:#1565c0}"
    "table{border-collapse:collapse;width:100%}td,th{padding:3px 8px;text-align:left;"
    "border-bottom:1px solid #eee;vertical-align:top}tr.pass td:first-child{color:#2e7d32;"
    "font-weight:600}tr.fail td:first-child{color:#c62828;font-weight:600}"
    ".tl td:first-child{white-space:nowrap;color:#616161}.tl tr.say td{font-style:italic;"
    "background:#f5f5f5}.tl tr.k5 td{color:#1565c0}"
    "pre{background:#263238;color:#eceff1;padding:8px 10px;overflow-x:auto;font-size:12px;"
    "margin:4px 0 14px}code{font-size:13px}.rc{color:#c62828}";

int scen_report_write(const struct scen_record *r, const char *path)
{
	struct sbuf b = {0};
	size_t ok = 0;
	int rc;

	for (size_t i = 0; i < r->expects.n; i++)
		ok += r->expects.v[i].ok;
	sbuf_add(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
	esc(&b, r->title);
	sbuf_addf(&b, "</title><style>%s</style></head><body>\n<h1>", css);
	esc(&b, r->title);
	sbuf_add(&b, "</h1><p class=\"meta\">cube scenario <b>");
	esc(&b, r->name);
	sbuf_addf(&b, "</b> · %d nodes · timings %s · started %s · %.1fs</p>\n", r->nodes,
	          r->timings->name, r->started, r->end);
	sbuf_addf(&b, "<p class=\"verdict %s\">%s: %zu of %zu expectations held</p>\n",
	          ok == r->expects.n && ok ? "pass" : "fail",
	          ok == r->expects.n && ok ? "PASS" : "FAIL", ok, r->expects.n);
	svg(&b, r);
	legend(&b);
	action_list(&b, r);
	expectations(&b, r);
	timeline_table(&b, r);
	commands(&b, r);
	sbuf_add(&b, "</body></html>\n");
	rc = file_write_atomic(path, b.s, b.len, 0644);
	if (rc < 0)
		rc = err_wrap(rc, "write %s", path);
	sbuf_free(&b);
	return rc;
}
