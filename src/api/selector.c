#include "api/selector.h"

#include "base/alloc.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/sbuf.h"
#include "base/strv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------ */

static char *quote(const char *s)
{
	struct sbuf b = {0};
	sbuf_quote(&b, s);
	return sbuf_take(&b);
}

/*
 * Upstream's utilerrors aggregate: one message alone, several (deduplicated)
 * as "[a, b]".
 */
static char *aggregate(const struct strv *errs)
{
	struct strv uniq = STRV_INIT;
	char *joined, *out;

	for (size_t i = 0; i < errs->n; i++)
		strv_push_unique(&uniq, errs->v[i]);
	joined = strv_join(&uniq, ", ");
	if (uniq.n == 1) {
		out = joined;
	} else {
		out = str_printf("[%s]", joined);
		free(joined);
	}
	strv_free(&uniq);
	return out;
}

/* "<path>: Invalid value: \"<v>\": <detail>", as field.Invalid prints. */
static void push_invalid(struct strv *errs, const char *path, const char *value, const char *detail)
{
	char *q = quote(value);
	strv_pushf(errs, "%s: Invalid value: %s: %s", path, q, detail);
	free(q);
}

/* ---- label key and value syntax ----------------------------------------- */

#define LABEL_KEY_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define LABEL_KEY_MSG                                                                              \
	"must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "   \
	"an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "  \
	"validation is '" LABEL_KEY_FMT "')"
#define DNS1123_SUBDOMAIN_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
#define DNS1123_SUBDOMAIN_MSG                                                                      \
	"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "  \
	"or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "      \
	"regex used for validation is '" DNS1123_SUBDOMAIN_FMT "')"
#define LABEL_VALUE_MSG                                                                            \
	"a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "   \
	"or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "      \
	"'my_value',  or '12345', regex used for validation is '(" LABEL_KEY_FMT ")?')"

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$ */
static bool name_syntax_ok(const char *s, size_t n)
{
	if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ */
static bool dns_subdomain_ok(const char *s, size_t n)
{
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.') {
			if (!is_lower_alnum(s[i]) && s[i] != '-')
				return false;
			continue;
		}
		if (i == start || !is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1]))
			return false;
		start = i + 1;
	}
	return true;
}

/* Upstream IsQualifiedName: every problem with a label key, in its order. */
static void label_key_errors(const char *key, struct strv *errs)
{
	const char *slash = strchr(key, '/'), *name = key;

	if (slash && strchr(slash + 1, '/')) {
		strv_push(errs, "a qualified name " LABEL_KEY_MSG
		                " with an optional DNS subdomain prefix and '/' (e.g. "
		                "'example.com/MyName')");
		return;
	}
	if (slash) {
		size_t plen = (size_t)(slash - key);
		if (plen == 0) {
			strv_push(errs, "prefix part must be non-empty");
		} else {
			if (plen > 253)
				strv_push(errs, "prefix part must be no more than 253 characters");
			if (!dns_subdomain_ok(key, plen))
				strv_push(errs, "prefix part " DNS1123_SUBDOMAIN_MSG);
		}
		name = slash + 1;
	}
	size_t nlen = strlen(name);
	if (nlen == 0)
		strv_push(errs, "name part must be non-empty");
	else if (nlen > 63)
		strv_push(errs, "name part must be no more than 63 characters");
	if (!name_syntax_ok(name, nlen))
		strv_push(errs, "name part " LABEL_KEY_MSG);
}

static void label_value_errors(const char *value, struct strv *errs)
{
	size_t n = strlen(value);
	if (n > 63)
		strv_push(errs, "must be no more than 63 characters");
	if (n > 0 && !name_syntax_ok(value, n))
		strv_push(errs, LABEL_VALUE_MSG);
}

static int report(struct strv *errs, int code)
{
	if (errs->n == 0)
		return 0;
	char *j = strv_join(errs, "; ");
	err_set(code, "%s", j);
	free(j);
	return code;
}

int label_key_validate(const char *key)
{
	struct strv errs = STRV_INIT;
	label_key_errors(key, &errs);
	int rc = report(&errs, ERR_INVALID);
	strv_free(&errs);
	return rc;
}

int label_value_validate(const char *value)
{
	struct strv errs = STRV_INIT;
	label_value_errors(value, &errs);
	int rc = report(&errs, ERR_INVALID);
	strv_free(&errs);
	return rc;
}

/* ---- label selectors: representation, matching, printing ---------------- */

enum label_op { OP_EQ, OP_DEQ, OP_NEQ, OP_IN, OP_NOTIN, OP_GT, OP_LT, OP_EXISTS, OP_NOTEXISTS };

struct label_req {
	char *key;
	enum label_op op;
	struct strv vals;
	size_t ord; /* input position: keeps the sort by key stable */
};

struct label_selector {
	bool nothing; /* upstream's labels.Nothing(): a nil metav1.LabelSelector */
	struct label_req *reqs;
	size_t n, cap;
};

static struct label_selector *sel_new(void)
{
	struct label_selector *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	return s;
}

/* Appends a zeroed requirement and returns it. */
static struct label_req *sel_add(struct label_selector *s, const char *key, enum label_op op)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4;
		s->reqs = xrealloc(s->reqs, s->cap * sizeof(*s->reqs));
	}
	struct label_req *r = &s->reqs[s->n];
	memset(r, 0, sizeof(*r));
	r->key = str_dup(key);
	r->op = op;
	r->ord = s->n++;
	return r;
}

void label_selector_free(struct label_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		free(sel->reqs[i].key);
		strv_free(&sel->reqs[i].vals);
	}
	free(sel->reqs);
	free(sel);
}

static int cmp_req(const void *a, const void *b)
{
	const struct label_req *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	return x->ord < y->ord ? -1 : x->ord > y->ord;
}

static void sel_sort(struct label_selector *s)
{
	if (s->n > 1)
		qsort(s->reqs, s->n, sizeof(*s->reqs), cmp_req);
}

/* strconv.ParseInt(s, 10, 64): optional sign, digits only, no overflow. */
static bool parse_int64(const char *s, int64_t *out)
{
	const char *d = (*s == '+' || *s == '-') ? s + 1 : s;
	char *end;
	if (*d < '0' || *d > '9')
		return false;
	for (const char *p = d; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

static bool has_value(const struct label_req *r, const char *v)
{
	for (size_t i = 0; i < r->vals.n; i++)
		if (strcmp(r->vals.v[i], v) == 0)
			return true;
	return false;
}

static bool req_match(const struct label_req *r, const json_t *labels)
{
	const char *v = labels ? json_string_value(json_object_get(labels, r->key)) : NULL;
	int64_t have, want;

	switch (r->op) {
	case OP_EQ:
	case OP_DEQ:
	case OP_IN:
		return v && has_value(r, v);
	case OP_NEQ:
	case OP_NOTIN:
		return !v || !has_value(r, v);
	case OP_EXISTS:
		return v != NULL;
	case OP_NOTEXISTS:
		return v == NULL;
	case OP_GT:
	case OP_LT:
		if (!v || r->vals.n != 1 || !parse_int64(v, &have) ||
		    !parse_int64(r->vals.v[0], &want))
			return false;
		return r->op == OP_GT ? have > want : have < want;
	}
	return false;
}

bool label_selector_match(const struct label_selector *sel, const json_t *labels)
{
	if (!sel)
		return true;
	if (sel->nothing)
		return false;
	for (size_t i = 0; i < sel->n; i++)
		if (!req_match(&sel->reqs[i], labels))
			return false;
	return true;
}

bool label_selector_empty(const struct label_selector *sel)
{
	return !sel || (!sel->nothing && sel->n == 0);
}

static const char *op_text(enum label_op op)
{
	switch (op) {
	case OP_EQ:
		return "=";
	case OP_DEQ:
		return "==";
	case OP_NEQ:
		return "!=";
	case OP_IN:
		return " in ";
	case OP_NOTIN:
		return " notin ";
	case OP_GT:
		return ">";
	case OP_LT:
		return "<";
	default:
		return "";
	}
}

static void req_string(struct sbuf *b, const struct label_req *r)
{
	bool set = r->op == OP_IN || r->op == OP_NOTIN;

	if (r->op == OP_NOTEXISTS)
		sbuf_addc(b, '!');
	sbuf_add(b, r->key);
	if (r->op == OP_EXISTS || r->op == OP_NOTEXISTS)
		return;
	sbuf_add(b, op_text(r->op));
	if (set)
		sbuf_addc(b, '(');
	/* Sort a copy of the pointers: the selector itself stays untouched. */
	struct strv sorted = {.v = xrealloc(NULL, (r->vals.n + 1) * sizeof(char *)),
	                      .n = r->vals.n};
	if (r->vals.n)
		memcpy(sorted.v, r->vals.v, r->vals.n * sizeof(char *));
	sorted.v[sorted.n] = NULL;
	strv_sort(&sorted);
	for (size_t i = 0; i < sorted.n; i++) {
		if (i)
			sbuf_addc(b, ',');
		sbuf_add(b, sorted.v[i]);
	}
	free(sorted.v);
	if (set)
		sbuf_addc(b, ')');
}

char *label_selector_string(const struct label_selector *sel)
{
	struct sbuf b = {0};
	for (size_t i = 0; sel && !sel->nothing && i < sel->n; i++) {
		if (i)
			sbuf_addc(&b, ',');
		req_string(&b, &sel->reqs[i]);
	}
	return sbuf_take(&b);
}

/* ---- label selectors: the string grammar -------------------------------- */

enum tok {
	T_EOS,
	T_RPAR,
	T_COMMA,
	T_NOT,
	T_DEQ,
	T_EQ,
	T_GT,
	T_ID,
	T_IN,
	T_LT,
	T_NEQ,
	T_NOTIN,
	T_LPAR,
	T_NONE,
};

struct item {
	enum tok t;
	char *lit;
};

/* Whether "in"/"notin" are keywords (after a key) or plain values. */
enum ctx { CTX_KEYOP, CTX_VALUES };

struct lparser {
	struct item *it;
	size_t n, cap, pos;
	char *err;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c)
{
	return c && strchr("=!(),><", c) != NULL;
}

static enum tok special_tok(const char *s, size_t n)
{
	static const struct {
		const char *text;
		enum tok t;
	} map[] = {{")", T_RPAR}, {",", T_COMMA}, {"!", T_NOT},  {"==", T_DEQ}, {"=", T_EQ},
	           {">", T_GT},   {"<", T_LT},    {"!=", T_NEQ}, {"(", T_LPAR}};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strlen(map[i].text) == n && memcmp(map[i].text, s, n) == 0)
			return map[i].t;
	return T_NONE;
}

static void push_item(struct lparser *p, enum tok t, const char *s, size_t n)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 16;
		p->it = xrealloc(p->it, p->cap * sizeof(*p->it));
	}
	p->it[p->n].t = t;
	p->it[p->n].lit = xstrndup(s, n);
	p->n++;
}

/* Tokenise everything up front, as upstream's scan() does. */
static void lex(struct lparser *p, const char *s)
{
	size_t i = 0;
	for (;;) {
		while (is_ws(s[i]))
			i++;
		if (!s[i]) {
			push_item(p, T_EOS, "", 0);
			return;
		}
		size_t start = i;
		if (is_special(s[i])) {
			/* Longest run of symbols that still forms an operator. */
			enum tok last = T_NONE;
			size_t len = 0;
			while (is_special(s[start + len])) {
				enum tok t = special_tok(s + start, len + 1);
				if (t == T_NONE && last != T_NONE)
					break;
				len++;
				last = t;
			}
			push_item(p, last, s + start, len);
			i = start + len;
			continue;
		}
		while (s[i] && !is_special(s[i]) && !is_ws(s[i]))
			i++;
		enum tok t = T_ID;
		if (i - start == 2 && memcmp(s + start, "in", 2) == 0)
			t = T_IN;
		else if (i - start == 5 && memcmp(s + start, "notin", 5) == 0)
			t = T_NOTIN;
		push_item(p, t, s + start, i - start);
	}
}

static enum tok peek(struct lparser *p, enum ctx c, const char **lit)
{
	struct item *it = &p->it[p->pos];
	if (lit)
		*lit = it->lit;
	if (c == CTX_VALUES && (it->t == T_IN || it->t == T_NOTIN))
		return T_ID;
	return it->t;
}

static enum tok next(struct lparser *p, enum ctx c, const char **lit)
{
	enum tok t = peek(p, c, lit);
	if (p->it[p->pos].t != T_EOS)
		p->pos++;
	return t;
}

static int perr(struct lparser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct lparser *p, const char *fmt, ...)
{
	va_list ap;
	free(p->err);
	va_start(ap, fmt);
	if (vasprintf(&p->err, fmt, ap) < 0)
		abort();
	va_end(ap);
	return -1;
}

/* ( v1, v2, ... ) with empty members allowed: "()" and "(a,)" hold "". */
static int parse_values(struct lparser *p, struct strv *vals)
{
	const char *lit;
	enum tok t = next(p, CTX_VALUES, &lit);

	if (t != T_LPAR)
		return perr(p, "found '%s' expected: '('", lit);
	t = peek(p, CTX_VALUES, &lit);
	if (t == T_RPAR) {
		next(p, CTX_VALUES, NULL);
		strv_push(vals, "");
		return 0;
	}
	if (t != T_ID && t != T_COMMA)
		return perr(p, "found '%s', expected: ',', ')' or identifier", lit);
	for (;;) {
		t = next(p, CTX_VALUES, &lit);
		if (t == T_ID) {
			strv_push_unique(vals, lit);
			t = peek(p, CTX_VALUES, &lit);
			if (t == T_RPAR)
				break;
			if (t != T_COMMA)
				return perr(p, "found '%s', expected: ',' or ')'", lit);
		} else if (t == T_COMMA) {
			if (vals->n == 0)
				strv_push_unique(vals, "");
			t = peek(p, CTX_VALUES, NULL);
			if (t == T_RPAR) {
				strv_push_unique(vals, "");
				break;
			}
			if (t == T_COMMA)
				strv_push_unique(vals, "");
		} else {
			return perr(p, "found '%s', expected: ',', or identifier", lit);
		}
	}
	next(p, CTX_VALUES, NULL); /* the ')' */
	return 0;
}

static int parse_exact(struct lparser *p, struct strv *vals)
{
	const char *lit;
	enum tok t = peek(p, CTX_VALUES, NULL);

	if (t == T_EOS || t == T_COMMA) {
		strv_push(vals, "");
		return 0;
	}
	if (next(p, CTX_VALUES, &lit) != T_ID)
		return perr(p, "found '%s', expected: identifier", lit);
	strv_push(vals, lit);
	return 0;
}

/* What NewRequirement checks of the values; errors appended to errs. */
static void check_values(const char *key, enum label_op op, const struct strv *vals,
                         struct strv *errs)
{
	int64_t ignored;
	char path[64];

	if (op == OP_GT || op == OP_LT) {
		for (size_t i = 0; i < vals->n; i++) {
			if (parse_int64(vals->v[i], &ignored))
				continue;
			snprintf(path, sizeof(path), "values[%zu]", i);
			push_invalid(errs, path, vals->v[i],
			             "for 'Gt', 'Lt' operators, the value must be an integer");
		}
	}
	for (size_t i = 0; i < vals->n; i++) {
		struct strv msgs = STRV_INIT;
		label_value_errors(vals->v[i], &msgs);
		if (msgs.n) {
			char *j = strv_join(&msgs, "; ");
			char *vp = str_printf("values[%zu][%s]", i, key);
			push_invalid(errs, vp, vals->v[i], j);
			free(vp);
			free(j);
		}
		strv_free(&msgs);
	}
}

static int parse_requirement(struct lparser *p, struct label_selector *sel)
{
	const char *lit;
	enum label_op op;
	struct strv vals = STRV_INIT, errs = STRV_INIT;
	bool negate = false;
	enum tok t = next(p, CTX_VALUES, &lit);

	if (t == T_NOT) {
		negate = true;
		t = next(p, CTX_VALUES, &lit);
	}
	if (t != T_ID)
		return perr(p, "found '%s', expected: identifier", lit);
	label_key_errors(lit, &errs);
	if (errs.n) {
		char *j = strv_join(&errs, "; "), *q = quote(lit);
		perr(p, "<nil>: Invalid value: %s: %s", q, j);
		free(q);
		free(j);
		strv_free(&errs);
		return -1;
	}
	char *key = str_dup(lit);
	t = peek(p, CTX_VALUES, NULL);
	if (negate || t == T_EOS || t == T_COMMA) {
		sel_add(sel, key, negate ? OP_NOTEXISTS : OP_EXISTS);
		free(key);
		return 0;
	}
	switch (next(p, CTX_KEYOP, &lit)) {
	case T_IN:
		op = OP_IN;
		break;
	case T_NOTIN:
		op = OP_NOTIN;
		break;
	case T_EQ:
		op = OP_EQ;
		break;
	case T_DEQ:
		op = OP_DEQ;
		break;
	case T_NEQ:
		op = OP_NEQ;
		break;
	case T_GT:
		op = OP_GT;
		break;
	case T_LT:
		op = OP_LT;
		break;
	default:
		free(key);
		return perr(p, "found '%s', expected: in, notin, =, ==, !=, gt, lt", lit);
	}
	int rc = (op == OP_IN || op == OP_NOTIN) ? parse_values(p, &vals) : parse_exact(p, &vals);
	if (rc == 0) {
		strv_sort(&vals); /* upstream holds values in a sorted set */
		check_values(key, op, &vals, &errs);
		if (errs.n) {
			char *a = aggregate(&errs);
			rc = perr(p, "%s", a);
			free(a);
		}
	}
	if (rc == 0)
		sel_add(sel, key, op)->vals = vals;
	else
		strv_free(&vals);
	strv_free(&errs);
	free(key);
	return rc;
}

static int parse_selector(struct lparser *p, struct label_selector *sel)
{
	const char *lit;
	for (;;) {
		enum tok t = peek(p, CTX_VALUES, &lit);
		if (t == T_EOS)
			return 0;
		if (t != T_ID && t != T_NOT)
			return perr(p, "found '%s', expected: !, identifier, or 'end of string'",
			            lit);
		if (parse_requirement(p, sel) < 0) {
			char *inner = p->err;
			p->err = NULL;
			perr(p, "unable to parse requirement: %s", inner);
			free(inner);
			return -1;
		}
		t = next(p, CTX_VALUES, &lit);
		if (t == T_EOS)
			return 0;
		if (t != T_COMMA)
			return perr(p, "found '%s', expected: ',' or 'end of string'", lit);
		t = peek(p, CTX_VALUES, &lit);
		if (t != T_ID && t != T_NOT)
			return perr(p, "found '%s', expected: identifier after ','", lit);
	}
}

struct label_selector *label_selector_parse(const char *text)
{
	struct lparser p = {0};
	struct label_selector *sel = sel_new();

	lex(&p, text ? text : "");
	if (parse_selector(&p, sel) < 0) {
		err_set(ERR_INVALID, "%s", p.err);
		label_selector_free(sel);
		sel = NULL;
	} else {
		sel_sort(sel);
	}
	for (size_t i = 0; i < p.n; i++)
		free(p.it[i].lit);
	free(p.it);
	free(p.err);
	return sel;
}

/* ---- label selectors: metav1.LabelSelector ------------------------------ */

/* A JSON value as it appears in a field error (strings quoted). */
static char *json_text(const json_t *v)
{
	if (json_is_string(v))
		return quote(json_string_value(v));
	char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!d)
		abort();
	return d;
}

static void push_type_error(struct strv *errs, const char *path, const json_t *v, const char *want)
{
	char *t = json_text(v);
	strv_pushf(errs, "%s: Invalid value: %s: must be %s", path, t, want);
	free(t);
}

static void key_field_errors(struct strv *errs, const char *path, const char *key)
{
	struct strv msgs = STRV_INIT;
	label_key_errors(key, &msgs);
	for (size_t i = 0; i < msgs.n; i++)
		push_invalid(errs, path, key, msgs.v[i]);
	strv_free(&msgs);
}

static void value_field_errors(struct strv *errs, const char *path, const char *value)
{
	struct strv msgs = STRV_INIT;
	label_value_errors(value, &msgs);
	for (size_t i = 0; i < msgs.n; i++)
		push_invalid(errs, path, value, msgs.v[i]);
	strv_free(&msgs);
}

static void from_match_labels(struct label_selector *sel, const json_t *ml, const char *pfx,
                              struct strv *errs)
{
	char *path = str_printf("%smatchLabels", pfx);
	const char *k;
	json_t *v;

	if (!json_is_object(ml)) {
		push_type_error(errs, path, ml, "an object");
		free(path);
		return;
	}
	json_object_foreach((json_t *)ml, k, v)
	{
		key_field_errors(errs, path, k);
		if (!json_is_string(v)) {
			push_type_error(errs, path, v, "a string");
			continue;
		}
		value_field_errors(errs, path, json_string_value(v));
		strv_push(&sel_add(sel, k, OP_EQ)->vals, json_string_value(v));
	}
	free(path);
}

/* One matchExpressions[i]: checked as ValidateLabelSelectorRequirement does. */
static void from_expression(struct label_selector *sel, const json_t *e, const char *path,
                            struct strv *errs)
{
	json_t *jk = json_object_get(e, "key"), *jop = json_object_get(e, "operator");
	json_t *jv = json_object_get(e, "values");
	struct strv vals = STRV_INIT;
	const char *key = "", *opname = "";
	char *sub;
	enum label_op op = OP_IN;
	bool ok = true;

	if (!json_is_object(e)) {
		push_type_error(errs, path, e, "an object");
		return;
	}
	if (jk && !json_is_null(jk) && !json_is_string(jk)) {
		sub = str_printf("%s.key", path);
		push_type_error(errs, sub, jk, "a string");
		free(sub);
		ok = false;
	} else if (jk) {
		key = json_string_value(jk) ? json_string_value(jk) : "";
	}
	if (jop && !json_is_null(jop) && !json_is_string(jop)) {
		sub = str_printf("%s.operator", path);
		push_type_error(errs, sub, jop, "a string");
		free(sub);
		return;
	}
	opname = jop && json_string_value(jop) ? json_string_value(jop) : "";
	if (jv && !json_is_null(jv) && !json_is_array(jv)) {
		sub = str_printf("%s.values", path);
		push_type_error(errs, sub, jv, "an array");
		free(sub);
		ok = false;
	} else if (jv) {
		size_t i;
		json_t *x;
		json_array_foreach(jv, i, x)
		{
			sub = str_printf("%s.values[%zu]", path, i);
			if (json_is_string(x)) {
				strv_push(&vals, json_string_value(x));
				value_field_errors(errs, sub, json_string_value(x));
			} else {
				push_type_error(errs, sub, x, "a string");
				ok = false;
			}
			free(sub);
		}
	}

	if (strcmp(opname, "In") == 0 || strcmp(opname, "NotIn") == 0) {
		op = opname[0] == 'I' ? OP_IN : OP_NOTIN;
		if (vals.n == 0 && ok) {
			strv_pushf(errs,
			           "%s.values: Required value: must be specified when "
			           "`operator` is 'In' or 'NotIn'",
			           path);
		}
	} else if (strcmp(opname, "Exists") == 0 || strcmp(opname, "DoesNotExist") == 0) {
		op = opname[0] == 'E' ? OP_EXISTS : OP_NOTEXISTS;
		if (vals.n > 0)
			strv_pushf(errs,
			           "%s.values: Forbidden: may not be specified when "
			           "`operator` is 'Exists' or 'DoesNotExist'",
			           path);
	} else {
		sub = str_printf("%s.operator", path);
		push_invalid(errs, sub, opname, "not a valid selector operator");
		free(sub);
	}
	sub = str_printf("%s.key", path);
	if (!jk || json_is_string(jk) || json_is_null(jk))
		key_field_errors(errs, sub, key);
	free(sub);

	if (errs->n == 0)
		sel_add(sel, key, op)->vals = vals;
	else
		strv_free(&vals);
}

struct label_selector *label_selector_from_json_at(const json_t *sel, const char *path)
{
	struct strv errs = STRV_INIT;
	struct label_selector *s = sel_new();
	char *pfx = str_printf("%s%s", path && *path ? path : "", path && *path ? "." : "");

	if (!sel || json_is_null(sel)) {
		s->nothing = true;
	} else if (!json_is_object(sel)) {
		push_type_error(&errs, path && *path ? path : "selector", sel, "an object");
	} else {
		json_t *ml = json_object_get(sel, "matchLabels");
		json_t *me = json_object_get(sel, "matchExpressions");
		if (ml && !json_is_null(ml))
			from_match_labels(s, ml, pfx, &errs);
		if (me && !json_is_null(me) && !json_is_array(me)) {
			char *p = str_printf("%smatchExpressions", pfx);
			push_type_error(&errs, p, me, "an array");
			free(p);
		} else if (me) {
			size_t i;
			json_t *e;
			json_array_foreach(me, i, e)
			{
				char *p = str_printf("%smatchExpressions[%zu]", pfx, i);
				from_expression(s, e, p, &errs);
				free(p);
			}
		}
	}
	free(pfx);
	if (errs.n) {
		char *a = aggregate(&errs);
		err_set(ERR_INVALID, "%s", a);
		free(a);
		strv_free(&errs);
		label_selector_free(s);
		return NULL;
	}
	sel_sort(s);
	return s;
}

struct label_selector *label_selector_from_json(const json_t *sel)
{
	return label_selector_from_json_at(sel, NULL);
}

/* ---- field selectors ---------------------------------------------------- */

struct field_term {
	char *field, *value;
	bool negate;
};

struct field_selector {
	struct field_term *t;
	size_t n;
};

void field_selector_free(struct field_selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		free(sel->t[i].field);
		free(sel->t[i].value);
	}
	free(sel->t);
	free(sel);
}

/* Split on commas not preceded by a backslash; escapes stay in the terms. */
static void split_terms(const char *s, struct strv *out)
{
	size_t start = 0;
	bool slash = false;

	if (!*s)
		return;
	for (size_t i = 0; s[i]; i++) {
		if (slash)
			slash = false;
		else if (s[i] == '\\')
			slash = true;
		else if (s[i] == ',') {
			char *t = xstrndup(s + start, i - start);
			strv_push(out, t);
			free(t);
			start = i + 1;
		}
	}
	strv_push(out, s + start);
}

/* Length of the UTF-8 sequence starting at s (1 for a stray byte). */
static size_t utf8_len(const char *s)
{
	unsigned char c = (unsigned char)*s;
	size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	for (size_t i = 1; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			return i;
	return n;
}

/* Undo \\ \, \= ; a bare ',' or '=' or a stray escape is an error. */
static char *unescape_value(const char *s)
{
	struct sbuf b = {0};
	bool slash = false;

	for (const char *p = s; *p; p++) {
		if (slash) {
			if (*p != '\\' && *p != ',' && *p != '=') {
				err_set(ERR_INVALID,
				        "invalid field selector: invalid escape sequence: \\%.*s",
				        (int)utf8_len(p), p);
				free(b.s);
				return NULL;
			}
			sbuf_addc(&b, *p);
			slash = false;
		} else if (*p == '\\') {
			slash = true;
		} else if (*p == ',' || *p == '=') {
			/* Upstream prints the rune with %v: its code point. */
			err_set(ERR_INVALID,
			        "invalid field selector: unescaped character in value: %d", *p);
			free(b.s);
			return NULL;
		} else {
			sbuf_addc(&b, *p);
		}
	}
	if (slash) {
		err_set(ERR_INVALID, "invalid field selector: invalid escape sequence: \\");
		free(b.s);
		return NULL;
	}
	return sbuf_take(&b);
}

static int add_term(struct field_selector *fs, const char *text, const char *part)
{
	static const char *const ops[] = {"!=", "==", "="};

	for (size_t i = 0; part[i]; i++) {
		for (size_t k = 0; k < 3; k++) {
			size_t oplen = strlen(ops[k]);
			if (strncmp(part + i, ops[k], oplen) != 0)
				continue;
			char *value = unescape_value(part + i + oplen);
			if (!value)
				return ERR_INVALID;
			if (i == 0 && !*value) {
				/* "=": upstream's Transform drops an all-empty term. */
				free(value);
				return 0;
			}
			fs->t = xrealloc(fs->t, (fs->n + 1) * sizeof(*fs->t));
			fs->t[fs->n].field = xstrndup(part, i);
			fs->t[fs->n].value = value;
			fs->t[fs->n].negate = k == 0;
			fs->n++;
			return 0;
		}
	}
	return err_set(ERR_INVALID, "invalid selector: '%s'; can't understand '%s'", text, part);
}

struct field_selector *field_selector_parse(const char *text)
{
	struct field_selector *fs = calloc(1, sizeof(*fs));
	struct strv parts = STRV_INIT;

	if (!fs)
		abort();
	text = text ? text : "";
	split_terms(text, &parts);
	strv_sort(&parts); /* upstream sorts the raw terms: kubectl's order is random */
	for (size_t i = 0; i < parts.n; i++) {
		if (!*parts.v[i])
			continue;
		if (add_term(fs, text, parts.v[i]) < 0) {
			field_selector_free(fs);
			fs = NULL;
			break;
		}
	}
	strv_free(&parts);
	return fs;
}

/* The text of a field: "" when missing or structured, scalars as printed. */
static const char *field_text(const json_t *obj, const char *path, char *buf, size_t n)
{
	json_t *v = jx_get(obj, path);

	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_true(v))
		return "true";
	if (json_is_false(v))
		return "false";
	if (json_is_integer(v)) {
		snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return buf;
	}
	if (json_is_real(v)) {
		snprintf(buf, n, "%g", json_real_value(v));
		return buf;
	}
	return "";
}

bool field_selector_match(const struct field_selector *sel, const json_t *obj)
{
	char buf[64];
	for (size_t i = 0; sel && i < sel->n; i++) {
		const struct field_term *t = &sel->t[i];
		bool eq = strcmp(field_text(obj, t->field, buf, sizeof(buf)), t->value) == 0;
		if (eq == t->negate)
			return false;
	}
	return true;
}

int field_selector_validate(const struct field_selector *sel, const char *const *allowed)
{
	for (size_t i = 0; sel && i < sel->n; i++) {
		bool ok = false;
		for (size_t k = 0; allowed && allowed[k] && !ok; k++)
			ok = strcmp(allowed[k], sel->t[i].field) == 0;
		if (!ok)
			return err_set(ERR_INVALID, "field label not supported: %s",
			               sel->t[i].field);
	}
	return 0;
}

const char *field_selector_exact(const struct field_selector *sel, const char *field)
{
	for (size_t i = 0; sel && i < sel->n; i++)
		if (!sel->t[i].negate && strcmp(sel->t[i].field, field) == 0)
			return sel->t[i].value;
	return NULL;
}

bool field_selector_empty(const struct field_selector *sel)
{
	return !sel || sel->n == 0;
}

char *field_selector_string(const struct field_selector *sel)
{
	struct sbuf b = {0};
	for (size_t i = 0; sel && i < sel->n; i++) {
		if (i)
			sbuf_addc(&b, ',');
		sbuf_add(&b, sel->t[i].field);
		sbuf_add(&b, sel->t[i].negate ? "!=" : "=");
		for (const char *p = sel->t[i].value; *p; p++) {
			if (*p == '\\' || *p == ',' || *p == '=')
				sbuf_addc(&b, '\\');
			sbuf_addc(&b, *p);
		}
	}
	return sbuf_take(&b);
}
