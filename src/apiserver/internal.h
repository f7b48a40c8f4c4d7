/*
 * What the files of src/apiserver share: the server, one request in flight,
 * and the helpers that answer it. Not a contract outside src/apiserver.
 */
#ifndef CUBE_APISERVER_INTERNAL_H
#define CUBE_APISERVER_INTERNAL_H

#include "apiserver/apiserver.h"

#include "api/resources.h"
#include "net/httpd.h"
#include "storage/cache.h"

#include "base/metrics.h"
#include "base/strv.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

struct watch_stream;
struct token_cache;
struct gc;
struct validation;
struct kind_rules;

struct apiserver {
	struct apiserver_opts o;
	struct loop *loop;
	bool closing; /* apiserver_free has begun: nothing new waits */
	SSL_CTX *tls;
	struct httpd *httpd;
	struct store *store;
	struct cache *cache;
	struct watch_stream *watches; /* open watch streams, for shutdown */
	struct metric_family *m_requests, *m_latency, *m_cert_exp, *m_objects;
	struct satoken *sa; /* service account token keys, or NULL */
	struct token_cache *tokens;    /* tokens authenticated lately (authn.c) */
	struct gc *gc;      /* the garbage collector (gc.c) */
	struct rv_wait *rv_waits;      /* reads held for a revision (read.c) */
	struct proxy *proxy;           /* the way to the kubelets (proxy.c) */
	struct relay *relay;           /* serving threads (relay.c), or NULL: httpd serves */
};

struct user_info {
	char *name;
	char *uid;
	struct strv groups;
	json_t *extra; /* key -> [values], or NULL */
};

void user_info_free(struct user_info *u);
/* authentication.k8s.io/v1 UserInfo {username, uid, groups, extra}. */
json_t *user_info_json(const struct user_info *u);

struct req;
struct tls_identity;
struct evbuffer;

/*
 * What carries a request: an HTTPS connection (server.c) or a caller's
 * memory (inproc.c, apiserver_exchange_*). Handlers never see which: they
 * read r->in_headers and r->in_body, write r->out_headers, and answer
 * through req_reply / req_stream_*. No operation is called once r->gone.
 */
struct req_transport {
	void (*attach)(struct req *r); /* r is made: the transport may tell it things */
	/* The client certificate as authentication judges it, or NULL. */
	const struct tls_identity *(*identity)(struct req *r);
	const char *(*peer)(struct req *r, char *buf, size_t n); /* "ip:port" */
	const char *(*target)(struct req *r); /* the request line's URI */
	void (*reply)(struct req *r, int code, struct evbuffer *body); /* a whole reply */
	void (*stream_start)(struct req *r); /* 200 and the headers; no idle timeout */
	void (*stream_chunk)(struct req *r, struct evbuffer *data);
	size_t (*stream_unsent)(struct req *r); /* bytes not yet taken by the client */
	/* The stream ends: what is buffered may still go within drain_s. */
	void (*stream_end)(struct req *r, int drain_s);
	void (*release)(struct req *r); /* the request is over; forget it */
	/* The request is over after its client went (NULL: nothing to do). */
	void (*forget)(struct req *r);
};

/* One request: the parsed route, who asks, and how to answer. */
struct req {
	struct apiserver *s;
	const struct req_transport *tp;
	void *conn; /* the transport's own: an evhttp_request, an exchange */
	bool gone;  /* the client went away: nothing is sent any more */
	struct evkeyvalq *in_headers, *out_headers; /* valid while !gone */
	struct evbuffer *in_body;                   /* valid while !gone */
	/* A stream's owner hears here when its client goes (then r->gone). */
	void (*on_gone)(void *arg);
	void *on_gone_arg;
	enum evhttp_cmd_type method;
	char *path;
	struct evkeyvalq query;
	/* route */
	const struct resource *res;
	const struct subresource *sub;
	const struct kind_rules *kind; /* what res does differently (kinds.c) */
	char *ns, *name;
	char *verb; /* get, list, watch, create, update, patch, delete, deletecollection */
	/* caller */
	struct user_info user;
	/* negotiation */
	bool want_table;
	const char *include; /* includeObject for Tables */
	int64_t start_ns;
	int code;
	bool streaming;
	bool dry_run; /* ?dryRun or a DeleteOptions body's dryRun: answer, store nothing */
	bool apply;   /* a server-side apply (a patch to authorization, APPLY to metrics) */
	bool by_token;   /* a bearer token authenticated the caller */
	bool token_refused; /* ... or was refused (401) */
	int write_tries; /* a shared store's writes lost to another server's (retry_lost_write) */
	bool refreshed;  /* served again on a cache brought up to the store's revision */
};

/* Two strings, both present and equal (what most comparisons here ask). */
static inline bool is(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* server.c */
/* A new request (the transport fills in headers, body and conn), routed
 * and served: the one entry point of every transport. */
void req_serve(struct apiserver *s, const struct req_transport *tp, void *conn,
	       enum evhttp_cmd_type method, const char *target, struct evkeyvalq *in_headers,
	       struct evkeyvalq *out_headers, struct evbuffer *in_body);
/* The transport's word that the client went away. */
void req_client_gone(struct req *r);
/* An HTTP/1.1 body of many small chains (a LIST's items) copied into 64
 * KiB chains, which TLS sends as full records. */
void http_coalesce(struct evbuffer *body);
/* The client of evhttp request ev went (its connection's close callback):
 * free ev if libevent left it to us. */
void http_forget_request(struct evhttp_request *ev);
/* An input header (NULL when absent or the client is gone). */
const char *req_header(struct req *r, const char *name);
/* An output header (nothing once the client is gone). */
void req_set_header(struct req *r, const char *name, const char *value);
/* A streaming 200 (watch): start, chunks, end (req_reply then counts it). */
void req_stream_start(struct req *r, const char *content_type);
void req_stream_send(struct req *r, const char *data, size_t n);
void req_stream_send_buffer(struct req *r, struct evbuffer *data); /* drains data */
size_t req_stream_unsent(struct req *r);
void req_stream_end(struct req *r, int drain_s);
void req_reply(struct req *r, int code, json_t *body);           /* steals body, ends r */
struct blob;
/* A reply whose body is JSON text already made (json borrowed), ends r. */
void req_reply_json(struct req *r, int code, struct blob *json);
/* The same with the text in body (the caller's; drained). */
void req_reply_json_buffer(struct req *r, int code, struct evbuffer *body);
/* A reply of bytes as they are (ct NULL: none given), ends r. */
void req_reply_bytes(struct req *r, int code, const char *ct, const char *body, size_t len);
void req_fail(struct req *r, int err, const char *message);      /* Status from err */
void req_fail_status(struct req *r, json_t *status);             /* steals status */
void req_not_found(struct req *r);                               /* "<res> \"name\" not found" */
/* A Warning header `299 - "<text>"` on the reply (duplicates sent once). */
void req_warn(struct req *r, const char *text);
const char *req_query(struct req *r, const char *key);
/* ?dryRun=All, or a DeleteOptions body that said so (r->dry_run). */
bool req_dry_run(struct req *r);
bool query_bool(struct req *r, const char *key);
void req_free(struct req *r);
char *object_key(const struct resource *res, const char *ns, const char *name);
char *prefix_key(const struct resource *res, const char *ns);

/* discovery.c: /version, /api, /apis, /api/v1, /apis/g/v, /openapi/v3 */
bool discovery_serve(struct req *r);

/* relay.c: the connections on n worker threads (see there), the requests
 * on the server's loop. */
struct relay *relay_start(struct apiserver *s, SSL_CTX *tls, const struct httpd_opts *o,
			  size_t n);
int relay_port(const struct relay *rl);
void relay_stop(struct relay *rl); /* no connection is served any more */
void relay_free(struct relay *rl);

/* authn.c */
/* The cache of successful token authentications (10 s, as upstream's
 * TokenSuccessCacheTTL); authn_free(NULL-tokens) is a no-op. */
void authn_init(struct apiserver *s);
void authn_free(struct apiserver *s);
int authn_request(struct req *r);
/* A verified client certificate (what a serving thread can judge alone). */
bool authn_cert_credentials_ok(void *arg, SSL *ssl, const char *authorization);
/* httpd's credentials_ok: a verified client certificate or a valid bearer
 * token (anonymous access is not credentials: its bodies stay small). */
bool authn_credentials_ok(void *arg, SSL *ssl, const char *authorization);
/* A bootstrap token's user into u: 0, or ERR_UNAUTHORIZED. */
int authn_bearer_token(struct apiserver *s, const char *token, struct user_info *u);
/*
 * Upstream's token authenticator: the union of the service account and the
 * bootstrap token authenticators behind the 10 s cache of successes, for
 * the audiences asked (NULL: the API server's own; a bootstrap token is
 * good for those alone). 0 with u filled and the audiences matched in hit
 * (the caller frees both), or ERR_UNAUTHORIZED with the service account
 * authenticator's reason in why (empty: not a token of ours). Requests and
 * TokenReviews both come here, as upstream's do.
 */
int authn_token(struct apiserver *s, const char *token, const struct strv *audiences,
		struct user_info *u, struct strv *hit, char *why, size_t n);

/* satoken.c: service account tokens (JWTs) — keys from the options,
 * TokenRequest (serviceaccounts/<name>/token) and TokenReview. */
int satoken_init(struct apiserver *s);
void satoken_free(struct apiserver *s);
/* A token this server issued, for one of audiences (NULL: the API
 * server's): 0 with u filled and the audiences it matched in hit; else
 * ERR_UNAUTHORIZED with why empty (not a service account token of ours) or
 * upstream's reason ("service account token has expired"). */
int satoken_authenticate(struct apiserver *s, const char *token, const struct strv *audiences,
			 struct user_info *u, struct strv *hit, char *why, size_t n);
/* The API server's audiences, NULL when it takes no service account tokens. */
const struct strv *satoken_audiences(const struct apiserver *s);
/* A TokenRequest (serviceaccounts/<name>/token) and a TokenReview. */
void satoken_serve_request(struct req *r);
void satoken_serve_review(struct req *r);

/* authz.c: 0, or a reply has been sent (403) and the request is over */
int authz_request(struct req *r, const json_t *obj);
int authz_check(struct req *r, const json_t *obj, char **reason);
/* Whether authorizing r looks into the object (a node reading a pod: is
 * it bound to the node?): if not, obj may be NULL whatever exists. */
bool authz_reads_object(const struct req *r);

/* What an authorizer decides on (upstream's authorizer.Attributes). */
struct authz_attrs {
	const struct user_info *user;
	const char *verb;
	bool resource_request;
	const char *group, *resource, *sub, *ns, *name; /* resource requests */
	const char *path;                               /* non-resource requests */
};

/* rbac.c: a binding grants it (why: upstream's "RBAC: allowed by ..."). */
bool rbac_allows(struct apiserver *s, const struct authz_attrs *a, char *why, size_t n);
bool rbac_rule_allows(const json_t *rule, const struct authz_attrs *a);
/* RulesFor: the rules the user holds in ns and cluster-wide (the built-in
 * superusers' everything included); a new array of borrowed rules. */
json_t *rbac_rules_for(struct apiserver *s, const struct user_info *u, const char *ns);

/* Upstream's escalation check on a Role/ClusterRole (escalate) or binding
 * (bind) being written: 0, or the 403 answered. */
int rbac_check_escalation(struct req *r, const json_t *obj);

/* Covers: the simple rules (one verb, group, resource, name or URL each)
 * of rules that owners do not hold; a new array. */
json_t *rbac_missing_rules(const json_t *owners, const json_t *rules);

/* The cache prefix of an RBAC collection (malloc'd; ns NULL: every one). */
char *rbac_prefix(const char *plural, const char *ns);

/* access.c: the authorization.k8s.io reviews, one per kind. */
void access_serve_subject(struct req *r);
void access_serve_local(struct req *r);
void access_serve_self(struct req *r);
void access_serve_rules(struct req *r);
/* The whole chain's decision on attributes that are not a request's
 * (reviews, impersonation); *reason malloc'd or NULL. */
bool authz_attrs_allowed(struct apiserver *s, const struct authz_attrs *a, char **reason);

/* impersonate.c: the Impersonate-* headers, authorized; r->user becomes
 * the impersonated user. 0, or an error already answered. */
int impersonate(struct req *r);

/* admission.c: mutate/validate obj for r; 0 or a negative err with r failed */
int admit(struct req *r, json_t *obj, const json_t *old);
/* noderestriction.c: a kubelet's limits (obj NULL for deletes, old NULL for
 * creates); 0, or the 403 answered. */
int node_restriction(struct req *r, json_t *obj, const json_t *old);

/* typed.c: a body decoded as upstream decodes it into its Go type (see
 * there). 0, or the 400/422 has been answered. typed_body for create and
 * update bodies, typed_patched for a patch's result (base: what it patched,
 * whose own unknown fields are not the patch's). */
int typed_body(struct req *r, json_t *obj);
/* The options (dryRun, fieldValidation) alone, checked before any body is
 * read, as upstream validates Create/Update/PatchOptions first. */
int check_field_validation(struct req *r);
/* upstream's ValidateDryRun over a DeleteOptions body's values and the
 * query's: true when each is "All", else the error added to v. */
struct validation;
bool dry_run_check(struct req *r, const json_t *body_values, struct validation *v);
int typed_patched(struct req *r, json_t *patched, const json_t *base, const char *content_type,
		  const char *patch, size_t patch_len);

/* kinds.c: what one kind does differently in the API server. */
struct kind_rules {
	const char *group, *plural; /* group NULL: the core group */
	/* A create answered whole and never stored (the reviews). */
	void (*serve_create)(struct req *r);
	/* Creates of subresources (pods/binding, serviceaccounts/token). */
	struct {
		const char *name;
		void (*create)(struct req *r);
	} sub_creates[2];
	/* Mutating admission of the main resource's creates and updates. */
	void (*admit)(struct req *r, json_t *obj);
	/* Update rules beyond the common ones; errors into v. */
	void (*check_update)(struct req *r, json_t *next, const json_t *old,
			     struct validation *v);
	/* A second finalizer list that holds a deletion and changes only
	 * through /finalize, and what marks an object being deleted. */
	const char *finalizers;
	void (*deleting)(json_t *obj);
	const char *const *undeletable; /* names that may never be deleted */
	/* Paths a status update keeps from the stored object besides spec
	 * (upstream's status strategy PrepareForUpdate). */
	const char *const *status_keeps;
	/* ... and paths it takes from the stored object when the body has none. */
	const char *const *status_backfills;
};
/* Never NULL: kinds with nothing special share empty rules. */
const struct kind_rules *kind_rules_of(const struct resource *res);
void (*kind_sub_create(const struct kind_rules *k, const char *sub))(struct req *r);
bool kind_undeletable(const struct kind_rules *k, const char *name);

/* admission.c: the per-kind mutations (DefaultTolerationSeconds, a new
 * node's not-ready taint, a CSR's requestor fields). */
void admit_pod(struct req *r, json_t *obj);
void admit_node(struct req *r, json_t *obj);
void admit_csr(struct req *r, json_t *obj);

/* handlers.c */
void handle_resource(struct req *r);
/* The same request served once more (its body is still there). */
void handle_resource_again(struct req *r);
/* A write refused on a cache that may be behind a shared store: r served
 * again, once, when the cache has the store's revision (read.c). */
bool refresh_and_retry(struct req *r);
void handle_binding(struct req *r);
void serve_selfsubjectreview(struct req *r);
/* A CSR's decisions belong to /approval, its certificate to /status. */
void csr_update_rules(struct req *r, json_t *next, const json_t *old, struct validation *v);
void seed_defaults(struct apiserver *s);
/* seed.c: create obj (stolen) at key with a uid and creationTimestamp. */
void seed_create(struct apiserver *s, const char *key, json_t *obj);
/* policy.c: upstream's bootstrap RBAC, created and reconciled; kubeadm's
 * bindings too on a cluster's first start. */
void policy_reconcile(struct apiserver *s, bool first_start);
/* upstream's NodeRules(): the system:node role's rules, for the Node
 * authorizer's resources it does not subdivide. Process-lifetime. */
const json_t *policy_node_rules(void);

/* gc.c: the garbage collector, on the cache's events (see there). */
int gc_start(struct apiserver *s);
void gc_stop(struct apiserver *s);

/* proxy.c: nodes/{name}/proxy/... and pods/{name}/log, to the kubelets. */
int proxy_init(struct apiserver *s);
void proxy_free(struct apiserver *s); /* requests in flight get 503 */
void proxy_serve_node(struct req *r);
void proxy_serve_pod_log(struct req *r);

/* watch.c */
void watch_serve(struct req *r);
void watch_close_all(struct apiserver *s);

#endif
