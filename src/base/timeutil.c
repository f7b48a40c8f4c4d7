#include "base/timeutil.h"

#include "base/clock.h"
#include "base/err.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t unit_ns(const char *u, size_t n)
{
	static const struct {
		const char *name;
		int64_t ns;
	} units[] = {
		{"ns", 1},          {"us", NS_PER_US},    {"\xc2\xb5s", NS_PER_US},
		{"ms", NS_PER_MS},  {"s", NS_PER_SEC},    {"m", NS_PER_MIN},
		{"h", NS_PER_HOUR}, {"d", NS_PER_DAY},
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0)
			return units[i].ns;
	return 0;
}

int duration_parse(const char *s, int64_t *out_ns)
{
	const char *p = s;
	bool neg = false;
	double total = 0;

	if (!s || !*s)
		return err_set(ERR_INVALID, "invalid duration \"\"");
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (strcmp(p, "0") == 0) {
		*out_ns = 0;
		return 0;
	}
	if (!*p)
		goto bad;
	while (*p) {
		const char *num = p, *u;
		double v = 0, scale = 1;
		bool digits = false;
		int64_t mult;

		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (*p++ - '0');
			digits = true;
		}
		if (*p == '.') {
			p++;
			while (isdigit((unsigned char)*p)) {
				scale /= 10;
				v += (*p++ - '0') * scale;
				digits = true;
			}
		}
		if (!digits || p == num)
			goto bad;
		u = p;
		while (*p && !isdigit((unsigned char)*p) && *p != '.')
			p++;
		if (u == p)
			return err_set(ERR_INVALID, "missing unit in duration \"%s\"", s);
		mult = unit_ns(u, (size_t)(p - u));
		if (!mult)
			return err_set(ERR_INVALID, "unknown unit \"%.*s\" in duration \"%s\"",
				       (int)(p - u), u, s);
		total += v * (double)mult;
		if (total > (double)INT64_MAX)
			return err_set(ERR_INVALID, "invalid duration \"%s\": too large", s);
	}
	*out_ns = neg ? -(int64_t)total : (int64_t)total;
	return 0;
bad:
	return err_set(ERR_INVALID, "invalid duration \"%s\"", s);
}

/* Writes v/10^prec with trailing zeros (and a bare point) dropped. */
static int fmt_frac(char *buf, size_t n, uint64_t v, int prec)
{
	uint64_t pow = 1;
	char frac[24];
	int len;

	for (int i = 0; i < prec; i++)
		pow *= 10;
	if (v % pow == 0)
		return snprintf(buf, n, "%" PRIu64, v / pow);
	len = snprintf(frac, sizeof(frac), "%0*" PRIu64, prec, v % pow);
	while (len > 0 && frac[len - 1] == '0')
		frac[--len] = '\0';
	return snprintf(buf, n, "%" PRIu64 ".%s", v / pow, frac);
}

char *duration_format(int64_t ns, char buf[DURATION_BUF])
{
	uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	const char *sign = ns < 0 ? "-" : "";
	char num[32];

	if (u == 0)
		return strcpy(buf, "0s");
	if (u < (uint64_t)NS_PER_US) {
		snprintf(buf, DURATION_BUF, "%s%" PRIu64 "ns", sign, u);
	} else if (u < (uint64_t)NS_PER_MS) {
		fmt_frac(num, sizeof(num), u, 3);
		snprintf(buf, DURATION_BUF, "%s%s\xc2\xb5s", sign, num);
	} else if (u < (uint64_t)NS_PER_SEC) {
		fmt_frac(num, sizeof(num), u, 6);
		snprintf(buf, DURATION_BUF, "%s%sms", sign, num);
	} else {
		uint64_t h = u / NS_PER_HOUR, m = u / NS_PER_MIN % 60;
		fmt_frac(num, sizeof(num), u % NS_PER_MIN, 9);
		if (h)
			snprintf(buf, DURATION_BUF, "%s%" PRIu64 "h%" PRIu64 "m%ss", sign, h, m, num);
		else if (m)
			snprintf(buf, DURATION_BUF, "%s%" PRIu64 "m%ss", sign, m, num);
		else
			snprintf(buf, DURATION_BUF, "%s%ss", sign, num);
	}
	return buf;
}

char *duration_short_human(int64_t ns, char buf[DURATION_BUF])
{
	int64_t s = ns / NS_PER_SEC;

	if (s < -1)
		strcpy(buf, "<invalid>");
	else if (s < 0)
		strcpy(buf, "0s");
	else if (s < 60)
		snprintf(buf, DURATION_BUF, "%" PRId64 "s", s);
	else if (s < 3600)
		snprintf(buf, DURATION_BUF, "%" PRId64 "m", s / 60);
	else if (s < 86400)
		snprintf(buf, DURATION_BUF, "%" PRId64 "h", s / 3600);
	else if (s < 86400 * 365)
		snprintf(buf, DURATION_BUF, "%" PRId64 "d", s / 86400);
	else
		snprintf(buf, DURATION_BUF, "%" PRId64 "y", s / (86400 * 365));
	return buf;
}

char *duration_human(int64_t ns, char buf[DURATION_BUF])
{
	int64_t s = ns / NS_PER_SEC, m, h, d;

	if (s < -1)
		return strcpy(buf, "<invalid>");
	if (s < 0)
		return strcpy(buf, "0s");
	if (s < 60 * 2) {
		snprintf(buf, DURATION_BUF, "%" PRId64 "s", s);
		return buf;
	}
	m = s / 60;
	if (m < 10) {
		if (s % 60 == 0)
			snprintf(buf, DURATION_BUF, "%" PRId64 "m", m);
		else
			snprintf(buf, DURATION_BUF, "%" PRId64 "m%" PRId64 "s", m, s % 60);
		return buf;
	}
	if (m < 60 * 3) {
		snprintf(buf, DURATION_BUF, "%" PRId64 "m", m);
		return buf;
	}
	h = s / 3600;
	if (h < 8) {
		if (m % 60 == 0)
			snprintf(buf, DURATION_BUF, "%" PRId64 "h", h);
		else
			snprintf(buf, DURATION_BUF, "%" PRId64 "h%" PRId64 "m", h, m % 60);
		return buf;
	}
	if (h < 48)
		snprintf(buf, DURATION_BUF, "%" PRId64 "h", h);
	else if (h < 24 * 8) {
		d = h / 24;
		if (h % 24 == 0)
			snprintf(buf, DURATION_BUF, "%" PRId64 "d", d);
		else
			snprintf(buf, DURATION_BUF, "%" PRId64 "d%" PRId64 "h", d, h % 24);
	} else if (h < 24 * 365 * 2)
		snprintf(buf, DURATION_BUF, "%" PRId64 "d", h / 24);
	else if (h < 24 * 365 * 8) {
		int64_t dy = h / 24 % 365;
		if (dy == 0)
			snprintf(buf, DURATION_BUF, "%" PRId64 "y", h / 24 / 365);
		else
			snprintf(buf, DURATION_BUF, "%" PRId64 "y%" PRId64 "d", h / 24 / 365, dy);
	} else
		snprintf(buf, DURATION_BUF, "%" PRId64 "y", h / 24 / 365);
	return buf;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static char *fmt_utc(int64_t ns, char buf[TIME_BUF], bool micro)
{
	int64_t sec = floor_div(ns, NS_PER_SEC);
	time_t t = (time_t)sec;
	struct tm tm;
	size_t n;

	gmtime_r(&t, &tm);
	n = strftime(buf, TIME_BUF, "%Y-%m-%dT%H:%M:%S", &tm);
	if (micro)
		n += (size_t)snprintf(buf + n, TIME_BUF - n, ".%06ld",
				      (long)((ns - sec * NS_PER_SEC) / NS_PER_US));
	snprintf(buf + n, TIME_BUF - n, "Z");
	return buf;
}

char *time_format_rfc3339(int64_t ns, char buf[TIME_BUF])
{
	return fmt_utc(ns, buf, false);
}

char *time_format_rfc3339_micro(int64_t ns, char buf[TIME_BUF])
{
	return fmt_utc(ns, buf, true);
}

char *time_format_rfc3339_local(int64_t ns, char buf[TIME_BUF])
{
	time_t t = (time_t)floor_div(ns, NS_PER_SEC);
	struct tm tm;
	size_t n;
	long off;

	localtime_r(&t, &tm);
	n = strftime(buf, TIME_BUF, "%Y-%m-%dT%H:%M:%S", &tm);
	off = tm.tm_gmtoff;
	if (off == 0)
		snprintf(buf + n, TIME_BUF - n, "Z");
	else
		snprintf(buf + n, TIME_BUF - n, "%c%02ld:%02ld", off < 0 ? '-' : '+',
			 labs(off) / 3600, labs(off) / 60 % 60);
	return buf;
}

int time_parse_rfc3339(const char *s, int64_t *out_ns)
{
	struct tm tm = {0};
	const char *p;
	int64_t frac = 0, sec;
	int offset = 0;

	if (!s || !(p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		goto bad;
	if (*p == '.') {
		int64_t scale = NS_PER_SEC;
		p++;
		if (!isdigit((unsigned char)*p))
			goto bad;
		while (isdigit((unsigned char)*p)) {
			scale /= 10;
			frac += (*p++ - '0') * scale;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || strlen(p) != 6)
			goto bad;
		offset = (hh * 60 + mm) * 60 * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		goto bad;
	}
	if (*p)
		goto bad;
	sec = (int64_t)timegm(&tm) - offset;
	*out_ns = sec * NS_PER_SEC + frac;
	return 0;
bad:
	return err_set(ERR_INVALID, "parsing time \"%s\" as RFC 3339: invalid format", s ? s : "");
}

/* ---- Go's time.Parse of RFC 3339 ------------------------------------------------ */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

void time_civil(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	unsigned doe = (unsigned)(days - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

struct goparse {
	const char *value, *v; /* the whole text, and what is left of it */
	const char *layout;
};

static bool digit_at(const char *v, size_t i)
{
	return strlen(v) > i && isdigit((unsigned char)v[i]);
}

/* ParseError.Error(): which element did not match. */
static int go_bad(const struct goparse *p, const char *elem)
{
	return err_set(ERR_INVALID, "parsing time \"%s\" as \"%s\": cannot parse \"%s\" as \"%s\"",
		       p->value, p->layout, p->v, elem);
}

static int go_range(const struct goparse *p, const char *what)
{
	return err_set(ERR_INVALID, "parsing time \"%s\": %s out of range", p->value, what);
}

/* getnum: one or (fixed) exactly two digits. */
static int go_num(struct goparse *p, bool fixed, const char *elem, int *out)
{
	if (!digit_at(p->v, 0))
		return go_bad(p, elem);
	if (!digit_at(p->v, 1)) {
		if (fixed)
			return go_bad(p, elem);
		*out = p->v[0] - '0';
		p->v += 1;
		return 0;
	}
	*out = (p->v[0] - '0') * 10 + (p->v[1] - '0');
	p->v += 2;
	return 0;
}

static int go_lit(struct goparse *p, char c)
{
	char elem[2] = {c, '\0'};
	if (*p->v != c)
		return go_bad(p, elem);
	p->v++;
	return 0;
}

static int days_in(unsigned m, int64_t y)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
	return m == 2 && leap ? 29 : days[m - 1];
}

int time_parse_go(const char *s, bool micro, char out[TIME_BUF])
{
	struct goparse p = {s, s,
			    micro ? "2006-01-02T15:04:05.000000Z07:00" : "2006-01-02T15:04:05Z07:00"};
	int mon, day, hh, mm, ss, rc, off = 0;
	int64_t year = 0, nsec = 0, secs, y;
	unsigned m, d;

	if (strlen(p.v) < 4 || !digit_at(p.v, 0))
		return go_bad(&p, "2006");
	for (int i = 0; i < 4; i++) {
		if (!isdigit((unsigned char)p.v[i]))
			return go_bad(&p, "2006");
		year = year * 10 + (p.v[i] - '0');
	}
	p.v += 4;
	if ((rc = go_lit(&p, '-')) || (rc = go_num(&p, true, "01", &mon)))
		return rc;
	if (mon < 1 || mon > 12)
		return go_range(&p, "month");
	if ((rc = go_lit(&p, '-')) || (rc = go_num(&p, true, "02", &day)))
		return rc;
	/* Any two digits: the day is checked against the month once all is parsed. */
	if ((rc = go_lit(&p, 'T')) || (rc = go_num(&p, false, "15", &hh)))
		return rc;
	if (hh > 23)
		return go_range(&p, "hour");
	if ((rc = go_lit(&p, ':')) || (rc = go_num(&p, true, "04", &mm)))
		return rc;
	if (mm > 59)
		return go_range(&p, "minute");
	if ((rc = go_lit(&p, ':')) || (rc = go_num(&p, true, "05", &ss)))
		return rc;
	if (ss > 59)
		return go_range(&p, "second");
	if (micro) {
		/* ".000000": exactly six digits after a period or comma */
		if (strlen(p.v) < 7 || (p.v[0] != '.' && p.v[0] != ','))
			return go_bad(&p, ".000000");
		for (int i = 1; i < 7; i++) {
			if (!isdigit((unsigned char)p.v[i]))
				return go_bad(&p, ".000000");
			nsec = nsec * 10 + (p.v[i] - '0');
		}
		nsec *= 1000;
		p.v += 7;
	} else if ((p.v[0] == '.' || p.v[0] == ',') && digit_at(p.v, 1)) {
		/* a fraction the layout does not name is accepted; past 9 digits ignored */
		size_t n = 1;
		int64_t scale = NS_PER_SEC;
		while (isdigit((unsigned char)p.v[n])) {
			if (n <= 9) {
				scale /= 10;
				nsec += (p.v[n] - '0') * scale;
			}
			n++;
		}
		p.v += n;
	}
	if (p.v[0] == 'Z') {
		p.v++;
	} else {
		int oh, om;
		struct goparse hold = p;
		if (strlen(p.v) < 6 || p.v[3] != ':')
			return go_bad(&p, "Z07:00");
		struct goparse hp = {s, p.v + 1, p.layout}, mp = {s, p.v + 4, p.layout};
		if (go_num(&hp, true, "Z07:00", &oh) || go_num(&mp, true, "Z07:00", &om) ||
		    (p.v[0] != '+' && p.v[0] != '-'))
			return go_bad(&hold, "Z07:00");
		if (oh > 24)
			return go_range(&p, "time zone offset hour");
		if (om > 60)
			return go_range(&p, "time zone offset minute");
		off = (oh * 3600 + om * 60) * (p.v[0] == '-' ? -1 : 1);
		p.v += 6;
	}
	if (*p.v)
		return err_set(ERR_INVALID, "parsing time \"%s\": extra text: \"%s\"", s, p.v);
	if (day < 1 || day > days_in((unsigned)mon, year))
		return err_set(ERR_INVALID, "parsing time \"%s\": day out of range", s);

	secs = days_from_civil(year, (unsigned)mon, (unsigned)day) * 86400 + hh * 3600 + mm * 60 +
	       ss - off;
	time_civil(floor_div(secs, 86400), &y, &m, &d);
	secs -= floor_div(secs, 86400) * 86400;
	/* Go writes a year before 1 as "-0001". */
	if (micro)
		snprintf(out, TIME_BUF, "%s%04lld-%02u-%02uT%02d:%02d:%02d.%06dZ", y < 0 ? "-" : "",
			 (long long)(y < 0 ? -y : y), m, d, (int)(secs / 3600), (int)(secs / 60 % 60),
			 (int)(secs % 60), (int)(nsec / 1000));
	else
		snprintf(out, TIME_BUF, "%s%04lld-%02u-%02uT%02d:%02d:%02dZ", y < 0 ? "-" : "",
			 (long long)(y < 0 ? -y : y), m, d, (int)(secs / 3600), (int)(secs / 60 % 60),
			 (int)(secs % 60));
	return 0;
}
