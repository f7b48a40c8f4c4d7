/*
 * quantity — resource.Quantity strings ("100m", "1.5Gi", "2e3", "128974848")
 * as apimachinery parses them: a signed decimal number, then a binary-SI
 * suffix (Ki Mi Gi Ti Pi Ei), a decimal-SI one (n u m k M G T P E) or a
 * decimal exponent (e3, E-2).
 *
 * Values come back as upstream's accessors give them: quantity_value is
 * Value() (rounded up to a whole unit: bytes, pods), quantity_milli is
 * MilliValue() (rounded up to a thousandth: CPU). Threads: any.
 */
#ifndef CUBE_API_QUANTITY_H
#define CUBE_API_QUANTITY_H

#include <jansson.h>
#include <stdint.h>
#include <stdbool.h>

/* 0, or ERR_INVALID ("quantities must match the regular expression ...") */
int quantity_parse(const char *s, long double *out);
/* A quantity held as a JSON string or number; 0 when absent or invalid. */
int64_t quantity_value(const json_t *q);
int64_t quantity_milli(const json_t *q);

/*
 * The string upstream stores for a quantity: ParseQuantity then String()
 * ("1000m" -> "1", "0.5" -> "500m", "1536Mi" -> "1536Mi", "1024Mi" -> "1Gi",
 * "1e4" -> "10e3"), rounded up to a nano, binary ones capped at 2^63-1;
 * strings already canonical come back as given ("2e3", "1E6", "+1").
 * Returns 0 and *out (malloc'd), or ERR_INVALID with upstream's message
 * ("quantities must match the regular expression ...", "unable to parse
 * quantity's suffix").
 */
int quantity_canonical(const char *s, char **out);

#endif
