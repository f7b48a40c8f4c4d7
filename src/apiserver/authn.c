/*
 * Authentication: x509 client certificates (user = CN, groups = O) checked
 * against --client-ca-file at the clock's time, service account tokens
 * (satoken.c) and bootstrap tokens (Secret bootstrap-token-<id> in
 * kube-system). A failed credential is a 401 and upstream's log line —
 * never a fall back to anonymous.
 */
#include "apiserver/internal.h"

#include "api/status.h"
#include "net/tls.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include "base/hmap.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_user(struct user_info *u, const char *name, const struct strv *groups)
{
	if (!(u->name = strdup(name)))
		abort();
	for (size_t i = 0; groups && i < groups->n; i++)
		strv_push_unique(&u->groups, groups->v[i]);
	strv_push_unique(&u->groups, "system:authenticated");
}

static void unauthorized(struct req *r)
{
	req_fail_status(r, status_failure(ERR_UNAUTHORIZED, "Unauthorized", NULL, NULL, NULL));
}

/* The value of data[key] of a Secret, base64-decoded into buf. */
static const char *secret_data(const json_t *secret, const char *key, char *buf, size_t n)
{
	const char *text = json_string_value(json_object_get(json_object_get(secret, "data"), key));
	size_t len;
	unsigned char *raw = b64_decode(text, &len);

	if (!raw || len >= n) {
		free(raw);
		return NULL;
	}
	memcpy(buf, raw, len + 1);
	free(raw);
	return buf;
}

/* [a-z0-9]{n} */
static bool token_chars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* upstream's bootstrap group pattern: system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9] */
#define BOOTSTRAP_GROUP_PATTERN "\\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\\z"
static bool bootstrap_group_ok(const char *g)
{
	static const char prefix[] = "system:bootstrappers:";
	size_t n = strlen(g), p = sizeof(prefix) - 1;
	if (n <= p || n > p + 256 || strncmp(g, prefix, p))
		return false;
	for (size_t i = p; i < n; i++) {
		char c = g[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == n - 1 || (c != ':' && c != '-')))
			return false;
	}
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * "abcdef.0123456789abcdef" against Secret kube-system/bootstrap-token-abcdef,
 * as upstream's bootstrap authenticator: the token's shape, the Secret (not
 * being deleted, of type bootstrap.kubernetes.io/token), its token-secret
 * (compared in constant time) and token-id, its expiration, its
 * usage-bootstrap-authentication, and every auth-extra-groups entry inside
 * system:bootstrappers: (so no token can name system:masters). Each refusal
 * logs upstream's V(3) line; the user is system:bootstrap:<id> with
 * system:bootstrappers and the extra groups, sorted.
 */
int authn_bearer_token(struct apiserver *s, const char *token, struct user_info *u)
{
	char id[7], key[96], name[40], b1[256], b2[1024];
	const char *val, *exp;
	json_t *secret;
	int64_t expires;
	struct strv groups = STRV_INIT;

	if (!s->o.enable_bootstrap_token_auth || strlen(token) != 23 || token[6] != '.' ||
	    !token_chars(token, 6) || !token_chars(token + 7, 16))
		return ERR_UNAUTHORIZED;
	memcpy(id, token, 6);
	id[6] = '\0';
	snprintf(name, sizeof(name), "bootstrap-token-%s", id);
	snprintf(key, sizeof(key), "/registry/secrets/kube-system/%s", name);
	if (!(secret = cache_get(s->cache, key))) {
		LOG_V(3, "No secret of name %s to match bootstrap bearer token", name);
		return ERR_UNAUTHORIZED;
	}
#define REFUSE(...)                                                                                \
	do {                                                                                       \
		char why_[600];                                                                    \
		snprintf(why_, sizeof(why_), __VA_ARGS__);                                         \
		LOG_V(3, "Bootstrap secret kube-system/%s matching bearer token %s", name, why_); \
		strv_free(&groups);                                                                \
		return ERR_UNAUTHORIZED;                                                           \
	} while (0)
	if (jx_get(secret, "metadata.deletionTimestamp"))
		REFUSE("is deleted and awaiting removal");
	if (strcmp(jx_str(secret, "type") ?: "", "bootstrap.kubernetes.io/token") ||
	    !json_is_object(json_object_get(secret, "data")))
		REFUSE("has invalid type, expected bootstrap.kubernetes.io/token.");
	val = secret_data(secret, "token-secret", b1, sizeof(b1));
	if (!val || strlen(val) != 16 || CRYPTO_memcmp(val, token + 7, 16) != 0)
		REFUSE("has invalid value for key token-secret, expected %.16s.", token + 7);
	val = secret_data(secret, "token-id", b1, sizeof(b1));
	if (!val || strcmp(val, id))
		REFUSE("has invalid value for key token-id, expected %s.", id);
	if ((exp = secret_data(secret, "expiration", b1, sizeof(b1)))) {
		if (time_parse_rfc3339(exp, &expires) < 0) {
			LOG_V(3, "Unparseable expiration time (%s) in kube-system/%s Secret: parsing "
			         "time \"%s\" as \"2006-01-02T15:04:05Z07:00\". Treating as expired.",
			      exp, name, exp);
			return ERR_UNAUTHORIZED;
		}
		if (clock_now() >= expires) {
			LOG_V(3, "Expired bootstrap token in kube-system/%s Secret: %s", name, exp);
			return ERR_UNAUTHORIZED;
		}
	}
	val = secret_data(secret, "usage-bootstrap-authentication", b1, sizeof(b1));
	if (!val || strcmp(val, "true"))
		REFUSE("not marked usage-bootstrap-authentication=true.");
	strv_push(&groups, "system:bootstrappers");
	if ((val = secret_data(secret, "auth-extra-groups", b2, sizeof(b2)))) {
		char *copy = strdup(val), *save = NULL;
		if (!copy)
			abort();
		for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
			if (!bootstrap_group_ok(g)) {
				char bad[300];
				snprintf(bad, sizeof(bad), "%s", g);
				free(copy);
				REFUSE("has invalid value for key auth-extra-groups: bootstrap group "
				       "\"%s\" is invalid (must match %s).",
				       bad, BOOTSTRAP_GROUP_PATTERN);
			}
			strv_push_unique(&groups, g);
		}
		free(copy);
	}
#undef REFUSE
	qsort(groups.v, groups.n, sizeof(*groups.v), cmp_str);
	snprintf(key, sizeof(key), "system:bootstrap:%s", id);
	set_user(u, key, &groups);
	strv_free(&groups);
	return 0;
}

/* ---- the token cache --------------------------------------------------------------- */

/*
 * Upstream puts a cache in front of its token authenticators: a success is
 * remembered for TokenSuccessCacheTTL (10 s, no flag), a failure not at
 * all. A controller sends the same service account JWT with every request;
 * each was an ECDSA verification (about 100 us, 9 % of the API server
 * while 2,500 kubelets bootstrapped). As upstream's, a token whose account
 * or bound object is deleted still passes for what is left of its 10 s.
 * The key is SHA-256 over a random key of the process's, the token and the
 * audiences asked (a TokenReview's, or the API server's own), so no token
 * is kept. The loop's thread is the only caller today; the lock keeps it
 * safe for the serving threads.
 */
#define TOKEN_SUCCESS_TTL_NS (10 * NS_PER_SEC)

struct token_cache {
	pthread_mutex_t mu;
	struct hmap users; /* key (hex) → struct cached_user */
	unsigned char salt[32];
	EVP_MD *sha256;
	int64_t swept;     /* mono time of the last sweep of expired entries */
};

struct cached_user {
	int64_t expires; /* mono */
	struct user_info u;
	struct strv hit; /* the audiences the token was good for */
};

void authn_init(struct apiserver *s)
{
	struct token_cache *c = calloc(1, sizeof(*c));

	if (!c || RAND_bytes(c->salt, sizeof(c->salt)) != 1 ||
	    !(c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)))
		abort();
	pthread_mutex_init(&c->mu, NULL);
	s->tokens = c;
}

static void cached_free(void *p)
{
	struct cached_user *e = p;
	user_info_free(&e->u);
	strv_free(&e->hit);
	free(e);
}

void authn_free(struct apiserver *s)
{
	struct token_cache *c = s->tokens;

	if (!c)
		return;
	hmap_free_values(&c->users, cached_free);
	EVP_MD_free(c->sha256);
	pthread_mutex_destroy(&c->mu);
	free(c);
	s->tokens = NULL;
}

static void user_copy(struct user_info *to, const struct user_info *from)
{
	if (!(to->name = strdup(from->name)) || (from->uid && !(to->uid = strdup(from->uid))))
		abort();
	for (size_t i = 0; i < from->groups.n; i++)
		strv_push(&to->groups, from->groups.v[i]);
	to->extra = from->extra ? json_deep_copy(from->extra) : NULL;
}

static void digest_str(EVP_MD_CTX *x, const char *s)
{
	uint32_t len = (uint32_t)strlen(s);

	/* Length first: "ab" + "c" is not "a" + "bc". */
	if (EVP_DigestUpdate(x, &len, sizeof(len)) != 1 || EVP_DigestUpdate(x, s, len) != 1)
		abort();
}

/* The token and the audiences asked for (NULL: none). */
static void token_key(struct token_cache *c, const char *token, const struct strv *auds,
		      char out[65])
{
	uint32_t naud = auds ? (uint32_t)auds->n : 0;
	unsigned char md[32];
	EVP_MD_CTX *x = EVP_MD_CTX_new();

	if (!x || EVP_DigestInit_ex(x, c->sha256, NULL) != 1 ||
	    EVP_DigestUpdate(x, c->salt, sizeof(c->salt)) != 1)
		abort();
	digest_str(x, token);
	if (EVP_DigestUpdate(x, &naud, sizeof(naud)) != 1)
		abort();
	for (uint32_t i = 0; i < naud; i++)
		digest_str(x, auds->v[i]);
	if (EVP_DigestFinal_ex(x, md, NULL) != 1)
		abort();
	EVP_MD_CTX_free(x);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void strv_copy(struct strv *to, const struct strv *from)
{
	for (size_t i = 0; i < from->n; i++)
		strv_push(to, from->v[i]);
}

/* The user a token was found to be lately, and its audiences, copied. */
static bool cache_find(struct token_cache *c, const char *key, struct user_info *u,
		       struct strv *hit)
{
	struct cached_user *e;
	bool found = false;

	pthread_mutex_lock(&c->mu);
	e = hmap_get(&c->users, key);
	if (e && e->expires > clock_mono()) {
		user_copy(u, &e->u);
		strv_copy(hit, &e->hit);
		found = true;
	}
	pthread_mutex_unlock(&c->mu);
	return found;
}

static void cache_keep(struct token_cache *c, const char *key, const struct user_info *u,
		       const struct strv *hit)
{
	struct cached_user *e = calloc(1, sizeof(*e)), *old;
	int64_t now = clock_mono();

	if (!e)
		abort();
	e->expires = now + TOKEN_SUCCESS_TTL_NS;
	user_copy(&e->u, u);
	strv_copy(&e->hit, hit);
	pthread_mutex_lock(&c->mu);
	if ((old = hmap_put(&c->users, key, e)))
		cached_free(old);
	if (now - c->swept >= TOKEN_SUCCESS_TTL_NS) {
		const char *k;
		void *v;
		c->swept = now;
		for (size_t it = 0; hmap_next(&c->users, &it, &k, &v);)
			if (((struct cached_user *)v)->expires <= now)
				cached_free(hmap_del(&c->users, k));
	}
	pthread_mutex_unlock(&c->mu);
}

int authn_token(struct apiserver *s, const char *token, const struct strv *audiences,
		struct user_info *u, struct strv *hit, char *why, size_t n)
{
	const struct strv *asked = audiences ? audiences : satoken_audiences(s), *api;
	char key[65];

	*why = '\0';
	token_key(s->tokens, token, asked, key);
	if (cache_find(s->tokens, key, u, hit))
		return 0;
	if (satoken_authenticate(s, token, asked, u, hit, why, n) < 0) {
		if (*why)
			return ERR_UNAUTHORIZED;
		/* A bootstrap token is audience-agnostic: good for the API
		 * server's own audiences among those asked for (upstream's
		 * WrapAudienceAgnosticToken), for no other. */
		strv_free(hit);
		api = satoken_audiences(s);
		for (size_t i = 0; api && i < api->n; i++)
			if (asked && strv_has(asked, api->v[i]))
				strv_push(hit, api->v[i]);
		if (!asked || !asked->n)
			strv_push(hit, APISERVER_DEFAULT_ISSUER);
		if (!hit->n || authn_bearer_token(s, token, u) < 0) {
			user_info_free(u);
			strv_free(hit);
			return ERR_UNAUTHORIZED;
		}
	}
	cache_keep(s->tokens, key, u, hit);
	return 0;
}

/* A request's bearer token, for the API server's own audiences. */
static int token_user(struct apiserver *s, const char *token, struct user_info *u, char *why,
		      size_t n)
{
	struct strv hit = STRV_INIT;
	int rc = authn_token(s, token, NULL, u, &hit, why, n);

	strv_free(&hit);
	return rc;
}

int authn_request(struct req *r)
{
	const char *auth = req_header(r, "Authorization");
	const struct tls_identity *id = r->tp->identity(r);

	if (id && id->present) {
		metrics_observe(metrics_with(r->s->m_cert_exp),
		                (double)(id->not_after_ns - clock_now()) / 1e9);
		if (id->verify_err == 0 && id->user && *id->user) {
			set_user(&r->user, id->user, &id->groups);
			return 0;
		}
		/* A certificate was offered and is bad: 401, never anonymous. */
		LOG_ERROR("\"Unable to authenticate the request\" err=\"verifying certificate %s "
		          "failed: %s\"",
		          id->desc ? id->desc : "", id->verify_msg ? id->verify_msg : "");
		unauthorized(r);
		return ERR_UNAUTHORIZED;
	}
	if (auth && !strncmp(auth, "Bearer ", 7)) {
		char why[512], q[600];
		if (token_user(r->s, auth + 7, &r->user, why, sizeof(why)) == 0) {
			r->by_token = true;
			return 0;
		}
		user_info_free(&r->user);
		r->token_refused = true;
		/* Upstream's union of token authenticators: the bootstrap one's
		 * "invalid bearer token", then the service account one's reason. */
		if (*why) {
			char msg[600];
			snprintf(msg, sizeof(msg), "[invalid bearer token, %s]", why);
			log_quote(q, sizeof(q), msg);
		} else {
			snprintf(q, sizeof(q), "invalid bearer token");
		}
		LOG_ERROR("\"Unable to authenticate the request\" err=\"%s\"", q);
		unauthorized(r);
		return ERR_UNAUTHORIZED;
	}
	if (r->s->o.anonymous_auth) {
		struct strv g = STRV_INIT;
		strv_push(&g, "system:unauthenticated");
		if (!(r->user.name = strdup("system:anonymous")))
			abort();
		r->user.groups = g;
		return 0;
	}
	unauthorized(r);
	return ERR_UNAUTHORIZED;
}

static const struct tls_identity *cert_of(SSL *ssl)
{
	return ssl ? tls_peer_identity(ssl, clock_now()) : NULL;
}

bool authn_cert_credentials_ok(void *arg, SSL *ssl, const char *authorization)
{
	const struct tls_identity *id = cert_of(ssl);

	(void)arg;
	(void)authorization;
	return id && id->present && id->verify_err == 0 && id->user && *id->user;
}

bool authn_credentials_ok(void *arg, SSL *ssl, const char *authorization)
{
	struct apiserver *s = arg;
	const struct tls_identity *id = cert_of(ssl);
	struct user_info u = {0};
	char why[512];
	bool ok;

	if (id && id->present)
		return authn_cert_credentials_ok(arg, ssl, authorization);
	if (!authorization || strncmp(authorization, "Bearer ", 7))
		return false;
	ok = token_user(s, authorization + 7, &u, why, sizeof(why)) == 0;
	user_info_free(&u);
	return ok;
}
