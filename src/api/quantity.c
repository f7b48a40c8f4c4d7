#include "api/quantity.h"

#include "base/err.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#define BAD                                                                                        \
	"quantities must match the regular expression "                                            \
	"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

/* A parsed quantity, exactly: sign * digits * 2^pow2 * 10^pow10. */
struct parsed {
	int sign;
	unsigned __int128 digits;
	int pow2, pow10;
};

static int suffix(const char *s, struct parsed *q)
{
	static const struct {
		const char *name;
		int pow2, pow10;
	} table[] = {
		{"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0},
		{"Ei", 60, 0}, {"n", 0, -9},  {"u", 0, -6},  {"m", 0, -3},  {"", 0, 0},
		{"k", 0, 3},   {"M", 0, 6},   {"G", 0, 9},   {"T", 0, 12},  {"P", 0, 15},
		{"E", 0, 18},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(s, table[i].name)) {
			q->pow2 = table[i].pow2;
			q->pow10 += table[i].pow10;
			return 0;
		}
	if ((s[0] == 'e' || s[0] == 'E') && s[1]) {
		const char *p = s + 1;
		int exp = 0, sign = 1;
		if (*p == '+' || *p == '-')
			sign = *p++ == '-' ? -1 : 1;
		if (!*p)
			return -1;
		for (; *p; p++) {
			if (!isdigit((unsigned char)*p) || exp > 10000)
				return -1;
			exp = exp * 10 + (*p - '0');
		}
		q->pow10 += sign * exp;
		return 0;
	}
	return -1;
}

static int parse(const char *s, struct parsed *q)
{
	const char *p = s;
	int digits = 0;
	bool dot = false;

	memset(q, 0, sizeof(*q));
	q->sign = 1;
	if (!s || !*s)
		return err_set(ERR_INVALID, BAD);
	if (*p == '+' || *p == '-')
		q->sign = *p++ == '-' ? -1 : 1;
	for (; *p && (isdigit((unsigned char)*p) || (*p == '.' && !dot)); p++) {
		if (*p == '.') {
			dot = true;
			continue;
		}
		digits++;
		if (q->digits < (unsigned __int128)1 << 100) {
			q->digits = q->digits * 10 + (unsigned)(*p - '0');
			q->pow10 -= dot;
		} else if (!dot) {
			q->pow10++; /* beyond any precision that matters */
		}
	}
	if (!digits || suffix(p, q) < 0)
		return err_set(ERR_INVALID, BAD);
	return 0;
}

int quantity_parse(const char *s, long double *out)
{
	struct parsed q;
	long double v;

	if (parse(s, &q) < 0)
		return ERR_INVALID;
	v = (long double)q.digits;
	for (int i = 0; i < q.pow2; i++)
		v *= 2;
	for (int i = 0; i < q.pow10; i++)
		v *= 10;
	for (int i = 0; i > q.pow10; i--)
		v /= 10;
	*out = q.sign * v;
	return 0;
}

/* ceil(q * 10^extra10) as an int64, saturated; negative values round up too. */
static int64_t ceiled(const struct parsed *q, int extra10)
{
	const unsigned __int128 cap = (unsigned __int128)INT64_MAX;
	unsigned __int128 v = q->digits, rem = 0;
	int p10 = q->pow10 + extra10;

	for (int i = 0; i < q->pow2 && v <= cap; i++)
		v <<= 1;
	for (; p10 > 0 && v <= cap; p10--)
		v *= 10;
	for (; p10 < 0 && v; p10++) {
		rem |= v % 10;
		v /= 10;
	}
	if (v > cap)
		return q->sign < 0 ? INT64_MIN : INT64_MAX;
	if (q->sign < 0)
		return -(int64_t)v; /* ceil of a negative drops the remainder */
	return (int64_t)v + (rem || (p10 < 0 && q->digits) ? 1 : 0);
}

static int64_t scaled(const json_t *q, int extra10)
{
	struct parsed p;
	if (json_is_integer(q)) {
		json_int_t v = json_integer_value(q);
		return extra10 ? v * 1000 : v;
	}
	if (!json_is_string(q) || parse(json_string_value(q), &p) < 0)
		return 0;
	return ceiled(&p, extra10);
}

int64_t quantity_value(const json_t *q)
{
	return scaled(q, 0);
}

int64_t quantity_milli(const json_t *q)
{
	return scaled(q, 3);
}

/* ---- the canonical form ---------------------------------------------------------- */

#define ERR_SUFFIX "unable to parse quantity's suffix"

enum qformat { Q_DECIMAL_SI, Q_BINARY_SI, Q_DECIMAL_EXPONENT };

/* The pieces of a quantity string, as apimachinery's parseQuantityString cuts it. */
struct qparts {
	bool positive;
	const char *num, *denom, *suffix; /* pointers into the string */
	size_t num_len, denom_len;
	int base, exponent; /* the suffix: 10^exponent or 2^exponent */
	enum qformat format;
};

static bool qdigit(char c)
{
	return c >= '0' && c <= '9';
}

static int qsplit(const char *s, struct qparts *q)
{
	size_t i = 0, n = strlen(s);

	memset(q, 0, sizeof(*q));
	q->positive = true;
	if (!n)
		return err_set(ERR_INVALID, BAD);
	if (s[0] == '+' || s[0] == '-')
		q->positive = s[i++] == '+';
	while (i < n && s[i] == '0') /* leading zeros */
		i++;
	q->num = s + i;
	while (i < n && qdigit(s[i]))
		i++;
	q->num_len = (size_t)(s + i - q->num);
	if (!q->num_len)
		q->num = "0", q->num_len = 1;
	q->denom = "";
	if (i < n && s[i] == '.') {
		q->denom = s + ++i;
		while (i < n && qdigit(s[i]))
			i++;
		q->denom_len = (size_t)(s + i - q->denom);
	}
	q->suffix = s + i;
	while (i < n && strchr("eEinumkKMGTP", s[i]))
		i++;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	while (i < n && qdigit(s[i]))
		i++;
	if (i < n)
		return err_set(ERR_INVALID, BAD);
	return 0;
}

/* apimachinery's suffixer: "Ki" .. "Ei", "n" .. "E", "e<int>". */
static int qinterpret(struct qparts *q)
{
	static const char *const dec[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
	static const char *const bin[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	const char *s = q->suffix;

	for (int i = 0; i < 10; i++)
		if (!strcmp(s, dec[i])) {
			q->base = 10, q->exponent = (i - 3) * 3, q->format = Q_DECIMAL_SI;
			return 0;
		}
	for (int i = 0; i < 6; i++)
		if (!strcmp(s, bin[i])) {
			q->base = 2, q->exponent = (i + 1) * 10, q->format = Q_BINARY_SI;
			return 0;
		}
	if ((s[0] == 'e' || s[0] == 'E') && s[1]) {
		char *end;
		errno = 0;
		long long e = strtoll(s + 1, &end, 10);
		if (*end || errno || (s[1] != '-' && s[1] != '+' && !qdigit(s[1])))
			return err_set(ERR_INVALID, ERR_SUFFIX);
		q->base = 10, q->exponent = (int)(int32_t)e, q->format = Q_DECIMAL_EXPONENT;
		return 0;
	}
	return err_set(ERR_INVALID, ERR_SUFFIX);
}

/*
 * Whether ParseQuantity keeps the string as given: its int64 fast path, for
 * numbers already in canonical form.
 */
static bool qkept(const struct qparts *q)
{
	char shifted[64];
	size_t len = q->num_len + q->denom_len;

	if (q->format == Q_BINARY_SI) {
		int precision = 15 - (int)q->num_len - (int)((float)q->exponent * 3 / 10) - 1;
		if (q->denom_len || precision < 0)
			return false;
		uint64_t v = strtoull(q->num, NULL, 10);
		/* value << exponent must not overflow an int64 */
		if (v && v > (uint64_t)INT64_MAX >> q->exponent)
			return false;
		return (v & 7) != 0;
	}
	if (18 - (int)len < 0 || q->exponent - (int)q->denom_len < -9)
		return false;
	memcpy(shifted, q->num, q->num_len);
	memcpy(shifted + q->num_len, q->denom, q->denom_len);
	shifted[len] = '\0';
	return (q->exponent - (int)q->denom_len) % 3 == 0 &&
	       !(len >= 3 && !strcmp(shifted + len - 3, "000")) && shifted[0] != '0';
}

/* A decimal of any size: digits (most significant first, no leading zeros,
 * "" for zero) times 10^exp. */
struct qdec {
	char *d;
	size_t n, cap;
	long exp;
};

static void qd_reserve(struct qdec *x, size_t n)
{
	if (n < x->cap)
		return;
	if (n > SIZE_MAX / 4) /* a quantity is bounded far below this */
		abort();
	x->cap = (n + 1) * 2;
	if (!(x->d = realloc(x->d, x->cap)))
		abort();
}

static void qd_trim_leading(struct qdec *x)
{
	size_t z = 0;
	while (z < x->n && x->d[z] == '0')
		z++;
	memmove(x->d, x->d + z, x->n - z);
	x->n -= z;
	x->d[x->n] = '\0';
}

static void qd_mul_small(struct qdec *x, unsigned m)
{
	unsigned carry = 0;

	qd_reserve(x, x->n + 12);
	for (size_t i = x->n; i-- > 0;) {
		unsigned v = (unsigned)(x->d[i] - '0') * m + carry;
		x->d[i] = (char)('0' + v % 10);
		carry = v / 10;
	}
	while (carry) {
		memmove(x->d + 1, x->d, x->n);
		x->d[0] = (char)('0' + carry % 10);
		carry /= 10;
		x->n++;
	}
	x->d[x->n] = '\0';
}

/* x /= m when it divides exactly (x an integer: exp == 0); returns whether it did. */
static bool qd_div_exact(struct qdec *x, unsigned m)
{
	char *q = malloc(x->n + 1);
	unsigned rem = 0;

	if (!q)
		abort();
	for (size_t i = 0; i < x->n; i++) {
		unsigned v = rem * 10 + (unsigned)(x->d[i] - '0');
		q[i] = (char)('0' + v / m);
		rem = v % m;
	}
	if (rem) {
		free(q);
		return false;
	}
	memcpy(x->d, q, x->n);
	free(q);
	qd_trim_leading(x);
	return true;
}

static void qd_increment(struct qdec *x)
{
	size_t i = x->n;
	while (i > 0 && x->d[i - 1] == '9')
		x->d[--i] = '0';
	if (i > 0) {
		x->d[i - 1]++;
		return;
	}
	qd_reserve(x, x->n + 1);
	memmove(x->d + 1, x->d, x->n + 1);
	x->d[0] = '1';
	x->n++;
}

/* Compare |x| with an integer given as digits. */
static int qd_cmp_int(const struct qdec *x, const char *digits)
{
	size_t dn = strlen(digits);
	long int_len = (long)x->n + x->exp; /* digits before the point */

	if (!x->n)
		return dn ? -1 : 0;
	if (int_len != (long)dn)
		return int_len < (long)dn ? -1 : 1;
	for (size_t i = 0; i < dn; i++) {
		char c = i < x->n ? x->d[i] : '0';
		if (c != digits[i])
			return c < digits[i] ? -1 : 1;
	}
	/* equal integer parts: any digit after the point makes x larger */
	return x->exp < 0 && (long)x->n > int_len ? 1 : 0;
}

static void qd_strip_trailing(struct qdec *x)
{
	while (x->n && x->d[x->n - 1] == '0') {
		x->d[--x->n] = '\0';
		x->exp++;
	}
}

static void qd_append_zeros(struct qdec *x, int k)
{
	qd_reserve(x, x->n + (size_t)k);
	memset(x->d + x->n, '0', (size_t)k);
	x->n += (size_t)k;
	x->d[x->n] = '\0';
	x->exp -= k;
}

static char *qd_emit(const struct qdec *x, bool positive, const char *suffix)
{
	size_t len = x->n + strlen(suffix) + 2;
	char *out = malloc(len);

	if (!out)
		abort();
	snprintf(out, len, "%s%s%s", positive ? "" : "-", x->d, suffix);
	return out;
}

/* CanonicalizeBytes of a non-zero value in format f. */
static char *qcanonical(struct qdec *x, bool positive, enum qformat f)
{
	static const char *const dec[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
	static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	char suffix[24] = "";

	if (f == Q_BINARY_SI) {
		/* Below 1024, or not whole: decimal, which loses nothing. */
		qd_strip_trailing(x);
		if (qd_cmp_int(x, "1024") < 0 || x->exp < 0) {
			f = Q_DECIMAL_SI;
		} else {
			int times = 0;
			qd_append_zeros(x, (int)x->exp); /* exp >= 0: write the integer out */
			while (times < 6 && qd_cmp_int(x, "1024") >= 0 && qd_div_exact(x, 1024))
				times++;
			return qd_emit(x, positive, bin[times]);
		}
	}
	qd_strip_trailing(x);
	/* the exponent down to a multiple of three, as AsCanonicalBytes */
	while (x->exp % 3 != 0)
		qd_append_zeros(x, 1);
	if (f == Q_DECIMAL_SI) {
		/* An exponent without a suffix prints none: upstream ignores the miss. */
		if (x->exp >= -9 && x->exp <= 18)
			snprintf(suffix, sizeof(suffix), "%s", dec[(x->exp + 9) / 3]);
	} else if (x->exp) {
		snprintf(suffix, sizeof(suffix), "e%ld", x->exp);
	}
	return qd_emit(x, positive, suffix);
}

int quantity_canonical(const char *in, char **out)
{
	struct qparts q;
	struct qdec x = {0};
	char *s;
	size_t len;
	int rc;

	*out = NULL;
	/* Quantity.UnmarshalJSON trims spaces around the value. */
	while (*in == ' ' || *in == '\t' || *in == '\n' || *in == '\r' || *in == '\v' ||
	       *in == '\f')
		in++;
	len = strlen(in);
	while (len && strchr(" \t\n\r\v\f", in[len - 1]))
		len--;
	if (!(s = strndup(in, len)))
		abort();
	if (!strcmp(s, "0")) {
		*out = s;
		return 0;
	}
	if ((rc = qsplit(s, &q)) < 0 || (rc = qinterpret(&q)) < 0) {
		free(s);
		return rc;
	}
	if (qkept(&q)) {
		*out = s;
		return 0;
	}
	/* The exact value: (num.denom) * base^exponent. */
	qd_reserve(&x, q.num_len + q.denom_len);
	memcpy(x.d, q.num, q.num_len);
	memcpy(x.d + q.num_len, q.denom, q.denom_len);
	x.n = q.num_len + q.denom_len;
	x.d[x.n] = '\0';
	x.exp = -(long)q.denom_len;
	qd_trim_leading(&x);
	if (q.base == 10)
		x.exp += q.exponent;
	else
		for (int i = 0; i < q.exponent; i++)
			qd_mul_small(&x, 2);
	/* Rounded up (away from zero) to a nano, so that some stays some. */
	if (x.n && x.exp < -9) {
		size_t drop = (size_t)(-9 - x.exp);
		bool tail = false;
		for (size_t i = drop >= x.n ? 0 : x.n - drop; i < x.n; i++)
			tail |= x.d[i] != '0';
		x.n = drop >= x.n ? 0 : x.n - drop;
		x.d[x.n] = '\0';
		x.exp = -9;
		if (tail)
			qd_increment(&x);
		qd_trim_leading(&x);
	}
	if (q.format == Q_BINARY_SI && qd_cmp_int(&x, "9223372036854775807") > 0) {
		free(x.d);
		x.d = strdup("9223372036854775807");
		if (!x.d)
			abort();
		x.n = x.cap = strlen(x.d);
		x.cap++;
		x.exp = 0;
	}
	if (!x.n) {
		*out = strdup("0");
	} else {
		/* a binary quantity below one is decimal */
		enum qformat f = q.format == Q_BINARY_SI && qd_cmp_int(&x, "1") < 0 ? Q_DECIMAL_SI
										     : q.format;
		*out = qcanonical(&x, q.positive, f);
	}
	free(x.d);
	free(s);
	if (!*out)
		abort();
	return 0;
}
