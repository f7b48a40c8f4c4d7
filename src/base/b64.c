#include "base/b64.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

char *b64_encode(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);
	if (!out)
		abort();
	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

/* n padded characters (n % 4 == 0) to bytes. */
static unsigned char *decode(const char *text, size_t n, size_t *len)
{
	size_t pad = 0;
	unsigned char *out;
	int r;

	if (n == 0 || n % 4)
		return NULL;
	if (!(out = malloc(n / 4 * 3 + 1)))
		abort();
	r = EVP_DecodeBlock(out, (const unsigned char *)text, (int)n);
	if (r < 0) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	while (pad < 2 && text[n - 1 - pad] == '=')
		pad++;
	out[r - (int)pad] = '\0';
	if (len)
		*len = (size_t)r - pad;
	return out;
}

unsigned char *b64_decode(const char *text, size_t *len)
{
	return text ? decode(text, strlen(text), len) : NULL;
}

char *b64url_encode(const void *data, size_t len)
{
	char *out = b64_encode(data, len);
	size_t n = strlen(out);

	while (n && out[n - 1] == '=')
		out[--n] = '\0';
	for (char *p = out; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	return out;
}

unsigned char *b64url_decode(const char *text, size_t n, size_t *len)
{
	char *std;
	unsigned char *out;

	/* One leftover character is never a whole byte. */
	if (n % 4 == 1 || !text)
		return NULL;
	if (!(std = malloc(n + 4)))
		abort();
	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		/* Padding or the standard alphabet's 62/63 are not base64url. */
		if (c == '=' || c == '+' || c == '/') {
			free(std);
			return NULL;
		}
		std[i] = c == '-' ? '+' : c == '_' ? '/' : c;
	}
	while (n % 4)
		std[n++] = '=';
	out = decode(std, n, len);
	free(std);
	return out;
}
