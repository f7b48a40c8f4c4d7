#include "api/quantity.h"

#include "base/err.h"

#include <ctype.h>
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
