/* doctor's report: the exit status it implies, JSON, text. */
#include "cube/doctor.h"

#include <stdlib.h>
#include <string.h>

enum doctor_severity doctor_worst(const struct doctor_report *r)
{
	enum doctor_severity w = DOCTOR_OK;
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].severity > w)
			w = r->v[i].severity;
	return w;
}

const char *doctor_severity_name(enum doctor_severity s)
{
	static const char *const names[] = {"ok", "warning", "critical"};
	return names[s];
}

static size_t count(const struct doctor_report *r, enum doctor_severity s)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n; i++)
		n += r->v[i].severity == s;
	return n;
}

static json_t *strv_json(const struct strv *sv)
{
	json_t *a = json_array();
	for (size_t i = 0; i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

json_t *doctor_report_json(const struct doctor_report *r)
{
	json_t *findings = json_array();

	for (size_t i = 0; i < r->n; i++) {
		const struct doctor_finding *f = &r->v[i];
		json_array_append_new(
		    findings, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o}", "severity",
		                        doctor_severity_name(f->severity), "check", f->check,
		                        "object", f->object, "title", f->title ?: "", "symptom",
		                        f->symptom ?: "", "evidence", strv_json(&f->evidence),
		                        "cause", f->cause ?: "", "fix", strv_json(&f->fix)));
	}
	return json_pack("{s:b, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:s}, s:o}", "healthy", r->n == 0,
	                 "worst", doctor_severity_name(doctor_worst(r)), "summary", "critical",
	                 (int)count(r, DOCTOR_CRITICAL), "warning", (int)count(r, DOCTOR_WARNING),
	                 "nodes", r->nodes, "ready", r->ready, "pendingCSRs", r->pending_csrs,
	                 "soonestExpiry", r->soonest, "findings", findings);
}

static void print_list(FILE *out, const char *label, const struct strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		fprintf(out, "  %-9s %s\n", i ? "" : label, sv->v[i]);
}

void doctor_report_print(FILE *out, const struct doctor_report *r)
{
	size_t crit = count(r, DOCTOR_CRITICAL), warn = count(r, DOCTOR_WARNING);

	for (size_t i = 0; i < r->n; i++) {
		const struct doctor_finding *f = &r->v[i];
		fprintf(out, "%s  %s  %s: %s\n",
		        f->severity == DOCTOR_CRITICAL ? "CRITICAL" : "WARNING ", f->object,
		        f->check, f->title ?: "");
		if (f->symptom)
			fprintf(out, "  %-9s %s\n", "symptom", f->symptom);
		print_list(out, "evidence", &f->evidence);
		if (f->cause)
			fprintf(out, "  %-9s %s\n", "cause", f->cause);
		print_list(out, "fix", &f->fix);
		fprintf(out, "\n");
	}
	if (!r->n)
		fprintf(out,
		        "healthy: %d/%d nodes Ready, %d CSR%s pending, no certificate inside "
		        "the warning window%s%s%s\n",
		        r->ready, r->nodes, r->pending_csrs, r->pending_csrs == 1 ? "" : "s",
		        *r->soonest ? " (soonest: " : "", r->soonest, *r->soonest ? ")" : "");
	else
		fprintf(out, "%zu critical, %zu warning: %d/%d nodes Ready, %d CSR%s pending%s%s\n",
		        crit, warn, r->ready, r->nodes, r->pending_csrs,
		        r->pending_csrs == 1 ? "" : "s", *r->soonest ? "; soonest expiry: " : "",
		        r->soonest);
}

void doctor_report_free(struct doctor_report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct doctor_finding *f = &r->v[i];
		free(f->check);
		free(f->object);
		free(f->title);
		free(f->symptom);
		free(f->cause);
		strv_free(&f->evidence);
		strv_free(&f->fix);
	}
	free(r->v);
	memset(r, 0, sizeof(*r));
}
