/*
 * Service account tokens, as upstream's API server issues and checks them:
 * JWTs signed with --service-account-signing-key-file (kubeadm's sa.key;
 * RS256 for RSA, ES256 for P-256), verified with --service-account-key-file
 * (sa.pub), issued by the serviceaccounts/<name>/token subresource
 * (TokenRequest: what `kubectl create token` and the controller manager's
 * --use-service-account-credentials ask for) and reviewed by
 * authentication.k8s.io/v1 TokenReview.
 *
 * Claims are upstream's: iss, sub system:serviceaccount:<ns>:<name>, aud,
 * exp/iat/nbf, jti, and "kubernetes.io" {namespace, serviceaccount{name,
 * uid}, pod / secret / node when bound, warnafter}. A token authenticates
 * while it is signed by a known key, names our issuer and one of our
 * audiences, is inside [nbf, exp] give or take go-jose's one-minute
 * leeway, and its service account (and bound object) still exists with the
 * same UID.
 */
#include "apiserver/objects.h"

#include "api/status.h"
#include "pki/pki.h"

#include "base/b64.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/jx.h"
#include "base/log.h"
#include "base/timeutil.h"

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEEWAY_S 60               /* go-jose's jwt.DefaultLeeway */
#define DEFAULT_EXPIRATION_S 3600 /* TokenRequestSpec's default */
#define MIN_EXPIRATION_S 600      /* "less than 10 minutes" */
#define MAX_EXPIRATION_S (INT64_C(1) << 32)
#define WARN_ONLY_EXPIRATION_S (3600 + 7) /* the kubelet's projected tokens */
#define EXTENDED_EXPIRATION_S (24 * 365 * 3600)
#define SA_PREFIX "system:serviceaccount:"

struct satoken {
	EVP_PKEY *signer;   /* NULL: no TokenRequest */
	EVP_PKEY *verifier; /* NULL: service account tokens are not accepted */
	char kid[64];       /* of the signer */
	char *issuer;
	struct strv audiences;
};

/* ---- keys ---------------------------------------------------------------------------- */

/* Upstream's key ID: base64url(SHA-256(PKIX DER of the public key)). */
static void key_id(EVP_PKEY *key, char *out, size_t n)
{
	unsigned char *der = NULL, sum[32];
	int len = i2d_PUBKEY(key, &der);
	char *enc;

	out[0] = '\0';
	if (len <= 0)
		return;
	EVP_Digest(der, (size_t)len, sum, NULL, EVP_sha256(), NULL);
	OPENSSL_free(der);
	enc = b64url_encode(sum, sizeof(sum));
	snprintf(out, n, "%s", enc);
	free(enc);
}

static bool key_ok(EVP_PKEY *key, const char *path)
{
	char group[32] = "";
	if (EVP_PKEY_is_a(key, "RSA"))
		return true;
	if (EVP_PKEY_is_a(key, "EC") &&
	    EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
	                                   NULL) &&
	    is(group, "prime256v1"))
		return true;
	err_set(ERR_INVALID, "%s: service account keys must be RSA or ECDSA P-256", path);
	return false;
}

int satoken_init(struct apiserver *s)
{
	const struct apiserver_opts *o = &s->o;
	struct satoken *t;

	if (!o->service_account_signing_key_file && !o->service_account_key_file)
		return 0;
	if (!(t = calloc(1, sizeof(*t))))
		abort();
	s->sa = t;
	if (o->service_account_signing_key_file) {
		if (!(t->signer = pki_key_load(o->service_account_signing_key_file)))
			return err_wrap(ERR_INVALID, "--service-account-signing-key-file %s",
			                o->service_account_signing_key_file);
		if (!key_ok(t->signer, o->service_account_signing_key_file))
			return ERR_INVALID;
		key_id(t->signer, t->kid, sizeof(t->kid));
	}
	if (o->service_account_key_file) {
		char *text = NULL;
		size_t len = 0;
		if (file_read(o->service_account_key_file, &text, &len, 1 << 20) == 0)
			t->verifier = pki_pubkey_parse(text, len);
		free(text);
		if (!t->verifier)
			return err_wrap(ERR_INVALID, "--service-account-key-file %s",
			                o->service_account_key_file);
		if (!key_ok(t->verifier, o->service_account_key_file))
			return ERR_INVALID;
	} else {
		/* Upstream verifies with the signing key when no other is given. */
		EVP_PKEY_up_ref(t->signer);
		t->verifier = t->signer;
	}
	if (!(t->issuer = strdup(o->service_account_issuer && *o->service_account_issuer
	                             ? o->service_account_issuer
	                             : APISERVER_DEFAULT_ISSUER)))
		abort();
	if (o->api_audiences && *o->api_audiences) {
		char *copy = strdup(o->api_audiences), *save = NULL;
		for (char *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save))
			strv_push_unique(&t->audiences, a);
		free(copy);
	} else {
		strv_push(&t->audiences, t->issuer); /* --api-audiences defaults to the issuer */
	}
	return 0;
}

void satoken_free(struct apiserver *s)
{
	struct satoken *t = s->sa;
	if (!t)
		return;
	EVP_PKEY_free(t->signer);
	EVP_PKEY_free(t->verifier);
	free(t->issuer);
	strv_free(&t->audiences);
	free(t);
	s->sa = NULL;
}

/* ---- JWS compact serialization ---------------------------------------------------- */

static const char *alg_of(EVP_PKEY *key)
{
	return EVP_PKEY_is_a(key, "RSA") ? "RS256" : "ES256";
}

/* ECDSA signatures travel as r||s, 32 bytes each (RFC 7518 §3.4). */
static unsigned char *ecdsa_der_to_raw(const unsigned char *der, size_t len)
{
	ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &der, (long)len);
	unsigned char *raw;
	if (!sig)
		return NULL;
	if (!(raw = calloc(1, 64)))
		abort();
	BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, 32);
	BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + 32, 32);
	ECDSA_SIG_free(sig);
	return raw;
}

static unsigned char *ecdsa_raw_to_der(const unsigned char *raw, size_t *len)
{
	ECDSA_SIG *sig = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(raw, 32, NULL), *sv = BN_bin2bn(raw + 32, 32, NULL);
	unsigned char *der = NULL;
	int n;

	if (!sig || !r || !sv || !ECDSA_SIG_set0(sig, r, sv)) {
		BN_free(r);
		BN_free(sv);
		ECDSA_SIG_free(sig);
		return NULL;
	}
	n = i2d_ECDSA_SIG(sig, &der);
	ECDSA_SIG_free(sig);
	if (n <= 0)
		return NULL;
	*len = (size_t)n;
	return der;
}

static char *jws_sign(EVP_PKEY *key, const char *kid, const json_t *claims)
{
	json_t *header = json_pack("{s:s,s:s}", "alg", alg_of(key), "kid", kid);
	char *h = jx_dump(header), *p = jx_dump(claims);
	char *h64 = b64url_encode(h, strlen(h)), *p64 = b64url_encode(p, strlen(p));
	size_t in_len = strlen(h64) + 1 + strlen(p64), sig_len = 0;
	char *input = malloc(in_len + 1), *out = NULL, *s64;
	unsigned char *sig = NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	if (!input || !md)
		abort();
	snprintf(input, in_len + 1, "%s.%s", h64, p64);
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, &sig_len, (unsigned char *)input, in_len) != 1 ||
	    !(sig = malloc(sig_len)) ||
	    EVP_DigestSign(md, sig, &sig_len, (unsigned char *)input, in_len) != 1) {
		ERR_clear_error();
		goto out;
	}
	if (EVP_PKEY_is_a(key, "EC")) {
		unsigned char *raw = ecdsa_der_to_raw(sig, sig_len);
		free(sig);
		sig = raw;
		sig_len = 64;
		if (!sig)
			goto out;
	}
	s64 = b64url_encode(sig, sig_len);
	if (!(out = malloc(in_len + 2 + strlen(s64))))
		abort();
	sprintf(out, "%s.%s", input, s64);
	free(s64);
out:
	EVP_MD_CTX_free(md);
	free(sig);
	free(input);
	free(h);
	free(p);
	free(h64);
	free(p64);
	json_decref(header);
	return out;
}

/* The claims of a token signed by key, or NULL: not a JWT at all (*ours
 * false), or ours with a bad signature (why says so). */
static json_t *jws_verify(EVP_PKEY *key, const char *token, char *why, size_t n)
{
	const char *dot1 = strchr(token, '.'), *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	unsigned char *hdr = NULL, *payload = NULL, *sig = NULL, *der = NULL;
	size_t hlen, plen, slen, dlen = 0;
	json_t *header = NULL, *claims = NULL;
	EVP_MD_CTX *md = NULL;
	bool ok = false;

	*why = '\0';
	if (!dot1 || !dot2 || strchr(dot2 + 1, '.'))
		return NULL;
	if (!(hdr = b64url_decode(token, (size_t)(dot1 - token), &hlen)) ||
	    !(header = jx_parse((char *)hdr, hlen)) ||
	    !(payload = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &plen)) ||
	    !(claims = jx_parse((char *)payload, plen)) || !json_is_object(claims) ||
	    !(sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &slen)))
		goto out; /* not a JWT: another authenticator's token */
	if (!is(jx_str(header, "alg"), alg_of(key))) {
		snprintf(why, n, "invalid signature");
		goto out;
	}
	if (EVP_PKEY_is_a(key, "EC")) {
		if (slen != 64 || !(der = ecdsa_raw_to_der(sig, &dlen))) {
			snprintf(why, n, "invalid signature");
			goto out;
		}
	}
	md = EVP_MD_CTX_new();
	ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
	     EVP_DigestVerify(md, der ? der : sig, der ? dlen : slen, (const unsigned char *)token,
	                      (size_t)(dot2 - token)) == 1;
	ERR_clear_error();
	if (!ok)
		snprintf(why, n, "invalid signature");
out:
	EVP_MD_CTX_free(md);
	OPENSSL_free(der);
	free(hdr);
	free(payload);
	free(sig);
	json_decref(header);
	if (!ok) {
		json_decref(claims);
		return NULL;
	}
	return claims;
}

/* ---- authentication ------------------------------------------------------------------- */

static const json_t *object_at(struct apiserver *s, const char *plural, const char *ns,
                               const char *name)
{
	char *key = object_key(resource_find("", "v1", plural), ns, name);
	const json_t *obj = name && *name ? cache_get(s->cache, key) : NULL;
	free(key);
	return obj;
}

static bool deleted_before(const json_t *obj, int64_t t)
{
	int64_t at;
	const char *ts = jx_str(obj, "metadata.deletionTimestamp");
	return ts && time_parse_rfc3339(ts, &at) == 0 && at < t;
}

/* A bound object ("pod", "secret"; the node is informational) still there. */
static int check_bound(struct apiserver *s, const json_t *k8s, const char *what, const char *plural,
                       const char *ns, char *why, size_t n)
{
	const json_t *ref = json_object_get(k8s, what), *obj;
	if (!ref)
		return 0;
	obj = object_at(s, plural, ns, jx_str(ref, "name"));
	if (!obj || deleted_before(obj, clock_now() - LEEWAY_S * NS_PER_SEC)) {
		snprintf(why, n, "service account token has been invalidated");
		return ERR_UNAUTHORIZED;
	}
	if (!is(jx_str(obj, "metadata.uid"), jx_str(ref, "uid"))) {
		snprintf(why, n, "%s UID (%s) does not match service account %s ref claim (%s)",
		         what, jx_str(obj, "metadata.uid") ?: "", what, jx_str(ref, "uid") ?: "");
		return ERR_UNAUTHORIZED;
	}
	return 0;
}

static bool audience_ok(const json_t *aud, const struct strv *want, struct strv *hit)
{
	json_t *a;
	size_t i;
	if (json_is_string(aud)) {
		if (strv_has(want, json_string_value(aud)))
			strv_push_unique(hit, json_string_value(aud));
	} else {
		json_array_foreach(aud, i,
		                   a) if (json_is_string(a) && strv_has(want, json_string_value(a)))
		    strv_push_unique(hit, json_string_value(a));
	}
	return hit->n > 0;
}

/* Go's %q of a []string: ["a" "b"]. */
static void go_quoted(char *buf, size_t n, const json_t *list, const struct strv *sv)
{
	size_t len = 0;
	json_t *v;
	size_t i;
	len += (size_t)snprintf(buf + len, n - len, "[");
	if (json_is_string(list)) {
		len += (size_t)snprintf(buf + len, n > len ? n - len : 0, "\"%s\"",
		                        json_string_value(list));
	} else if (list) {
		json_array_foreach(list, i, v) if (len < n) len += (size_t)snprintf(
		    buf + len, n - len, "%s\"%s\"", i ? " " : "", json_string_value(v) ?: "");
	}
	for (i = 0; sv && i < sv->n && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", i ? " " : "", sv->v[i]);
	if (len < n)
		snprintf(buf + len, n - len, "]");
}

static void extra_set(json_t *extra, const char *key, const char *value)
{
	if (value && *value)
		json_object_set_new(extra, key, json_pack("[s]", value));
}

const struct strv *satoken_audiences(const struct apiserver *s)
{
	return s->sa ? &s->sa->audiences : NULL;
}

int satoken_authenticate(struct apiserver *s, const char *token, const struct strv *audiences,
                         struct user_info *u, struct strv *hit, char *why, size_t n)
{
	struct satoken *t = s->sa;
	json_t *claims;
	const json_t *k8s, *sa;
	const char *ns, *name, *sub;
	char frag[512]; /* the prefix, a 63-byte namespace, a 253-byte name */
	int64_t now = clock_now_sec(), exp, nbf, iat;
	int rc = ERR_UNAUTHORIZED;

	*why = '\0';
	if (!t || !t->verifier || !(claims = jws_verify(t->verifier, token, why, n)))
		return ERR_UNAUTHORIZED; /* why empty: not a token of ours */
	/* Another issuer's token is not ours to judge. */
	if (!is(jx_str(claims, "iss"), t->issuer))
		goto out;
	if (!audience_ok(json_object_get(claims, "aud"), audiences ? audiences : &t->audiences,
	                 hit)) {
		char have[200], want[200];
		go_quoted(have, sizeof(have), json_object_get(claims, "aud"), NULL);
		go_quoted(want, sizeof(want), NULL, audiences ? audiences : &t->audiences);
		snprintf(why, n, "token audiences %s is invalid for the target audiences %s", have,
		         want);
		goto out;
	}
	/* go-jose's order: nbf, exp, iat, each with the leeway. */
	exp = json_integer_value(json_object_get(claims, "exp"));
	nbf = json_integer_value(json_object_get(claims, "nbf"));
	iat = json_integer_value(json_object_get(claims, "iat"));
	if (json_object_get(claims, "nbf") && now + LEEWAY_S < nbf) {
		snprintf(why, n, "service account token is not valid yet");
		goto out;
	}
	if (json_object_get(claims, "exp") && now > exp + LEEWAY_S) {
		snprintf(why, n, "service account token has expired");
		goto out;
	}
	if (json_object_get(claims, "iat") && now + LEEWAY_S < iat) {
		snprintf(why, n, "service account token is issued in the future");
		goto out;
	}
	k8s = json_object_get(claims, "kubernetes.io");
	ns = jx_str(k8s, "namespace");
	name = jx_str(k8s, "serviceaccount.name");
	sub = jx_str(claims, "sub");
	snprintf(frag, sizeof(frag), SA_PREFIX "%s:%s", ns ?: "", name ?: "");
	if (!ns || !name || !is(sub, frag)) {
		snprintf(why, n, "service account token claims could not be validated");
		goto out;
	}
	if (!(sa = object_at(s, "serviceaccounts", ns, name))) {
		snprintf(why, n, "serviceaccounts \"%s\" not found", name);
		goto out;
	}
	if (deleted_before(sa, clock_now() - LEEWAY_S * NS_PER_SEC)) {
		snprintf(why, n, "service account %s/%s has been deleted", ns, name);
		goto out;
	}
	if (!is(jx_str(sa, "metadata.uid"), jx_str(k8s, "serviceaccount.uid"))) {
		snprintf(why, n, "service account UID (%s) does not match claim (%s)",
		         jx_str(sa, "metadata.uid") ?: "", jx_str(k8s, "serviceaccount.uid") ?: "");
		goto out;
	}
	if (check_bound(s, k8s, "secret", "secrets", ns, why, n) < 0 ||
	    check_bound(s, k8s, "pod", "pods", ns, why, n) < 0 ||
	    /* A pod's node is informational; a token bound to a node itself
	     * lives as long as that node. */
	    (!json_object_get(k8s, "pod") &&
	     check_bound(s, k8s, "node", "nodes", NULL, why, n) < 0))
		goto out;

	if (!(u->name = strdup(sub)))
		abort();
	u->uid = strdup(jx_str(sa, "metadata.uid"));
	strv_push(&u->groups, "system:serviceaccounts");
	strv_pushf(&u->groups, "system:serviceaccounts:%s", ns);
	strv_push(&u->groups, "system:authenticated");
	u->extra = json_object();
	if (jx_str(claims, "jti")) {
		snprintf(frag, sizeof(frag), "JTI=%s", jx_str(claims, "jti"));
		extra_set(u->extra, "authentication.kubernetes.io/credential-id", frag);
	}
	extra_set(u->extra, "authentication.kubernetes.io/node-name", jx_str(k8s, "node.name"));
	extra_set(u->extra, "authentication.kubernetes.io/node-uid", jx_str(k8s, "node.uid"));
	extra_set(u->extra, "authentication.kubernetes.io/pod-name", jx_str(k8s, "pod.name"));
	extra_set(u->extra, "authentication.kubernetes.io/pod-uid", jx_str(k8s, "pod.uid"));
	rc = 0;
out:
	json_decref(claims);
	return rc;
}

/* ---- TokenRequest ---------------------------------------------------------------------- */

static void reply_token_invalid(struct req *r, struct validation *v, const char *name)
{
	char *msg = val_message(v, "TokenRequest.authentication.k8s.io", name);
	json_t *st =
	    status_failure(ERR_UNPROCESSABLE, msg, "authentication.k8s.io", "TokenRequest", name);
	json_object_set(json_object_get(st, "details"), "causes", v->causes);
	free(msg);
	req_fail_status(r, st);
}

static json_t *ref_of(const json_t *obj)
{
	return json_pack("{s:s,s:s}", "name", jx_str(obj, "metadata.name") ?: "", "uid",
	                 jx_str(obj, "metadata.uid") ?: "");
}

/* spec.boundObjectRef into the private claims (k8s); 0 or answered. */
static int bind_object(struct req *r, const json_t *ref, json_t *k8s, bool *pod_bound)
{
	const char *kind = jx_str(ref, "kind") ?: "", *api = jx_str(ref, "apiVersion") ?: "";
	const char *name = jx_str(ref, "name") ?: "", *want_uid = jx_str(ref, "uid");
	const json_t *obj;
	char msg[512];

	*pod_bound = false;
	/* Upstream looks only at the group: "v1" (or no version) is the core. */
	if (strchr(api, '/') || (!is(kind, "Pod") && !is(kind, "Secret") && !is(kind, "Node"))) {
		/* Go's GroupVersionKind.String(): "group/version, Kind=kind". */
		const char *slash = strchr(api, '/');
		snprintf(msg, sizeof(msg), "cannot bind token to object of type %.*s/%s, Kind=%s",
		         slash ? (int)(slash - api) : 0, api, slash ? slash + 1 : api, kind);
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	}
	obj = is(kind, "Pod")      ? object_at(r->s, "pods", r->ns, name)
	      : is(kind, "Secret") ? object_at(r->s, "secrets", r->ns, name)
	                           : object_at(r->s, "nodes", NULL, name);
	if (!obj) {
		snprintf(msg, sizeof(msg), "%s \"%s\" not found",
		         is(kind, "Pod")      ? "pods"
		         : is(kind, "Secret") ? "secrets"
		                              : "nodes",
		         name);
		req_fail_status(r, status_failure(ERR_NOTFOUND, msg, "",
		                                  is(kind, "Pod")      ? "pods"
		                                  : is(kind, "Secret") ? "secrets"
		                                                       : "nodes",
		                                  name));
		return ERR_NOTFOUND;
	}
	if (is(kind, "Pod") && !is(jx_str(obj, "spec.serviceAccountName"), r->name)) {
		snprintf(
		    msg, sizeof(msg),
		    "cannot bind token for serviceaccount \"%s\" to pod running with different "
		    "serviceaccount name.",
		    r->name);
		req_fail(r, ERR_INVALID, msg);
		return ERR_INVALID;
	}
	if (want_uid && *want_uid && !is(want_uid, jx_str(obj, "metadata.uid"))) {
		snprintf(msg, sizeof(msg),
		         "Operation cannot be fulfilled on %s \"%s\": the UID in the bound object "
		         "reference (%s) does not match the UID in record. The object might have "
		         "been deleted and then recreated",
		         kind, name, want_uid);
		req_fail_status(r, status_failure(ERR_CONFLICT, msg, "", kind, name));
		return ERR_CONFLICT;
	}
	if (is(kind, "Pod")) {
		const char *node = jx_str(obj, "spec.nodeName");
		json_object_set_new(k8s, "pod", ref_of(obj));
		*pod_bound = true;
		if (node && *node) {
			const json_t *no = object_at(r->s, "nodes", NULL, node);
			json_object_set_new(k8s, "node",
			                    no ? ref_of(no) : json_pack("{s:s}", "name", node));
		}
	} else {
		json_object_set_new(k8s, is(kind, "Secret") ? "secret" : "node", ref_of(obj));
	}
	return 0;
}

static void handle_token_request(struct req *r, json_t *body)
{
	struct satoken *t = r->s->sa;
	const json_t *sa = object_at(r->s, "serviceaccounts", r->ns, r->name);
	json_t *spec = json_object_get(body, "spec"), *k8s, *claims, *auds, *out;
	const char *bname = jx_str(body, "metadata.name"),
	           *bns = jx_str(body, "metadata.namespace");
	struct validation v;
	int64_t exp_s, now = clock_now(), life_s;
	bool pod_bound = false;
	char ts[TIME_BUF], *jti, *token, msg[512];

	val_init(&v);
	if (bname && *bname && !is(bname, r->name))
		val_invalid_str(&v, "metadata.name", bname,
		                "must match the service account name if specified");
	else if (bns && *bns && !is(bns, r->ns))
		val_invalid_str(&v, "metadata.namespace", bns,
		                "must match the service account namespace if specified");
	if (!val_ok(&v)) {
		reply_token_invalid(r, &v, r->name);
		goto done;
	}
	if (!sa) {
		req_not_found(r);
		goto done;
	}
	if (!json_is_object(spec))
		json_object_set_new(body, "spec", spec = json_object());
	auds = json_object_get(spec, "audiences");
	{
		/* What Go's decoder refuses before the REST code sees it. */
		json_t *a;
		size_t i;
		const char *bad = auds && !json_is_array(auds) ? "[]string" : NULL;
		json_array_foreach(auds, i, a) if (!json_is_string(a)) bad = "string";
		if (bad || (json_object_get(spec, "expirationSeconds") &&
		            !json_is_integer(json_object_get(spec, "expirationSeconds")) &&
		            !json_is_null(json_object_get(spec, "expirationSeconds")))) {
			snprintf(
			    msg, sizeof(msg),
			    "json: cannot unmarshal into Go struct field TokenRequestSpec.spec.%s "
			    "of type %s",
			    bad ? "audiences" : "expirationSeconds", bad ? bad : "int64");
			req_fail(r, ERR_INVALID, msg);
			goto done;
		}
	}
	if (!json_is_array(auds) || !json_array_size(auds)) {
		json_object_set_new(spec, "audiences", auds = json_array());
		for (size_t i = 0; i < t->audiences.n; i++)
			json_array_append_new(auds, json_string(t->audiences.v[i]));
	}
	if (!json_is_integer(json_object_get(spec, "expirationSeconds"))) /* absent or null */
		json_object_set_new(spec, "expirationSeconds", json_integer(DEFAULT_EXPIRATION_S));
	exp_s = json_integer_value(json_object_get(spec, "expirationSeconds"));
	if (exp_s < MIN_EXPIRATION_S)
		val_invalid(&v, "spec.expirationSeconds",
		            json_object_get(spec, "expirationSeconds"),
		            "may not specify a duration less than 10 minutes");
	else if (exp_s > MAX_EXPIRATION_S)
		val_invalid(&v, "spec.expirationSeconds",
		            json_object_get(spec, "expirationSeconds"),
		            "may not specify a duration larger than 2^32 seconds");
	if (!val_ok(&v)) {
		reply_token_invalid(r, &v, "");
		goto done;
	}
	k8s = json_pack("{s:s,s:{s:s,s:s}}", "namespace", r->ns, "serviceaccount", "name", r->name,
	                "uid", jx_str(sa, "metadata.uid") ?: "");
	if (json_is_object(json_object_get(spec, "boundObjectRef")) &&
	    bind_object(r, json_object_get(spec, "boundObjectRef"), k8s, &pod_bound) < 0) {
		json_decref(k8s);
		goto done;
	}
	if (r->s->o.service_account_max_token_expiration_s > 0 &&
	    exp_s > r->s->o.service_account_max_token_expiration_s) {
		char warn[256];
		snprintf(warn, sizeof(warn),
		         "requested expiration of %" PRId64 " seconds shortened to %" PRId64
		         " seconds",
		         exp_s, r->s->o.service_account_max_token_expiration_s);
		req_warn(r, warn);
		exp_s = r->s->o.service_account_max_token_expiration_s;
		json_object_set_new(spec, "expirationSeconds", json_integer(exp_s));
	}
	/* The kubelet's projected tokens ask for 3607 s: they stay valid for a
	 * year and only warn after the hour, unless audiences are not ours. */
	life_s = exp_s;
	if (pod_bound && exp_s == WARN_ONLY_EXPIRATION_S) {
		bool ours = true;
		json_t *a;
		size_t i;
		json_array_foreach(auds, i, a) if (!strv_has(&t->audiences, json_string_value(a)))
		    ours = false;
		if (ours) {
			json_object_set_new(
			    k8s, "warnafter",
			    json_integer(now / NS_PER_SEC + WARN_ONLY_EXPIRATION_S));
			life_s = EXTENDED_EXPIRATION_S;
		}
	}
	jti = new_uid();
	snprintf(msg, sizeof(msg), SA_PREFIX "%s:%s", r->ns, r->name);
	claims = json_pack("{s:O,s:I,s:I,s:s,s:s,s:o,s:I,s:s}", "aud", auds, "exp",
	                   (json_int_t)(now / NS_PER_SEC + life_s), "iat",
	                   (json_int_t)(now / NS_PER_SEC), "iss", t->issuer, "jti", jti,
	                   "kubernetes.io", k8s, "nbf", (json_int_t)(now / NS_PER_SEC), "sub", msg);
	token = jws_sign(t->signer, t->kid, claims);
	json_decref(claims);
	free(jti);
	if (!token) {
		req_fail(r, ERR_INTERNAL, "failed to generate token: signing failed");
		goto done;
	}
	json_object_set_new(body, "kind", json_string("TokenRequest"));
	json_object_set_new(body, "apiVersion", json_string("authentication.k8s.io/v1"));
	jx_set_str(body, "metadata.name", r->name);
	jx_set_str(body, "metadata.namespace", r->ns);
	jx_set_str(body, "metadata.creationTimestamp", time_format_rfc3339(now, ts));
	out = json_pack("{s:s,s:s}", "token", token, "expirationTimestamp",
	                time_format_rfc3339(now + exp_s * NS_PER_SEC, ts));
	json_object_set_new(body, "status", out);
	free(token);
	LOG_V(
	    4,
	    "\"Issued service account token\" serviceAccount=\"%s/%s\" expirationSeconds=%" PRId64,
	    r->ns, r->name, exp_s);
	req_reply(r, 201, json_incref(body));
done:
	val_free(&v);
}

/* ---- TokenReview ---------------------------------------------------------------------- */

static void handle_token_review(struct req *r, json_t *body)
{
	const char *token = jx_str(body, "spec.token");
	json_t *auds = jx_get(body, "spec.audiences"), *status, *a;
	struct strv want = STRV_INIT, hit = STRV_INIT;
	struct user_info u = {0};
	char why[512] = "";
	size_t i;

	if (!token || !*token) {
		req_fail(r, ERR_INVALID, "token is required for TokenReview in authentication");
		return;
	}
	json_array_foreach(auds, i, a) if (json_is_string(a))
	    strv_push_unique(&want, json_string_value(a));
	if (!want.n && r->s->sa)
		for (i = 0; i < r->s->sa->audiences.n; i++)
			strv_push(&want, r->s->sa->audiences.v[i]);
	status = json_object();
	authn_token(r->s, token, &want, &u, &hit, why, sizeof(why));
	if (u.name) {
		json_t *list = json_array();
		for (i = 0; i < hit.n; i++)
			json_array_append_new(list, json_string(hit.v[i]));
		json_object_set_new(status, "authenticated", json_true());
		json_object_set_new(status, "user", user_info_json(&u));
		json_object_set_new(status, "audiences", list);
	} else {
		json_object_set_new(status, "user", json_object());
		if (*why) /* an unknown token is just not authenticated */
			json_object_set_new(status, "error", json_string(why));
	}
	json_object_set_new(body, "status", status);
	json_object_set_new(body, "kind", json_string("TokenReview"));
	json_object_set_new(body, "apiVersion", json_string("authentication.k8s.io/v1"));
	jx_set(body, "metadata.creationTimestamp", json_null());
	user_info_free(&u);
	strv_free(&want);
	strv_free(&hit);
	req_reply(r, 201, json_incref(body));
}

void satoken_serve_request(struct req *r)
{
	json_t *body;

	if (authz_request(r, NULL) < 0)
		return;
	if (!r->s->sa || !r->s->sa->signer) {
		/* Upstream serves the subresource only with a signing key. */
		req_fail(r, ERR_NOTFOUND, "the server could not find the requested resource");
		return;
	}
	if (!(body = body_object(r)))
		return;
	/* NodeRestriction and NamespaceLifecycle see the TokenRequest. */
	if (admit(r, body, NULL) == 0)
		handle_token_request(r, body);
	json_decref(body);
}

void satoken_serve_review(struct req *r)
{
	json_t *body;

	if (authz_request(r, NULL) < 0 || !(body = body_object(r)))
		return;
	handle_token_review(r, body);
	json_decref(body);
}
