/*
 * pki_bench — what certificate work costs: the operations a CSR's life is
 * made of (kubelet keygen + CSR, controller-manager verify + sign, API
 * server chain verification per handshake). Prints ops/s for each.
 *
 *   build/bench/pki_bench [seconds-per-op, default 1]
 */
#include "pki/pki.h"

#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct fixture {
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca, *leaf;
	X509_REQ *req;
};

typedef void (*op_fn)(struct fixture *f);

static void op_keygen_ec(struct fixture *f)
{
	EVP_PKEY_free(pki_key_new(PKI_KEY_ECDSA));
}

static void op_keygen_rsa(struct fixture *f)
{
	EVP_PKEY_free(pki_key_new(PKI_KEY_RSA));
}

static void op_csr_new(struct fixture *f)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	X509_REQ_free(pki_csr_new(f->leaf_key, "system:node:bench", orgs, NULL, NULL, 0));
}

/* What a kubelet sends: the key set as its bits, no encoder. */
static void op_csr_new_pem(struct fixture *f)
{
	static const char *const orgs[] = {"system:nodes", NULL};
	free(pki_csr_new_pem(f->leaf_key, "system:node:bench", orgs, NULL, NULL, 0));
}

static void op_csr_verify(struct fixture *f)
{
	if (pki_csr_verify(f->req) < 0)
		abort();
}

static void op_csr_sign(struct fixture *f)
{
	struct pki_sign_policy pol = {8760 * NS_PER_HOUR, PKI_BACKDATE_NS, PKI_SHORT_NS,
				      pki_usages_kubelet(false, false)};
	X509_free(pki_csr_sign(f->req, f->ca, f->ca_key, &pol));
}

/* What the signer sends: the request's key copied as its bits. */
static void op_csr_sign_pem(struct fixture *f)
{
	struct pki_sign_policy pol = {8760 * NS_PER_HOUR, PKI_BACKDATE_NS, PKI_SHORT_NS,
				      pki_usages_kubelet(false, false)};
	int64_t nb, na;
	free(pki_csr_sign_pem(f->req, f->ca, f->ca_key, &pol, &nb, &na));
}

static void op_chain_verify(struct fixture *f)
{
	if (pki_verify_with(f->leaf, f->ca, clock_now(), PKI_PURPOSE_CLIENT) < 0)
		abort();
}

static void run(const char *name, op_fn fn, struct fixture *f, double secs)
{
	double start = now_s(), end;
	long n = 0;
	do {
		for (int i = 0; i < 16; i++)
			fn(f);
		n += 16;
		end = now_s();
	} while (end - start < secs);
	printf("%-34s %10.0f ops/s   %8.1f us/op\n", name, (double)n / (end - start),
	       (end - start) * 1e6 / (double)n);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	static const char *const orgs[] = {"system:nodes", NULL};
	struct pki_sign_policy pol = {8760 * NS_PER_HOUR, PKI_BACKDATE_NS, PKI_SHORT_NS,
				      pki_usages_kubelet(false, false)};
	struct fixture f;

	f.ca_key = pki_key_new(PKI_KEY_ECDSA);
	f.ca = pki_ca_new(f.ca_key, "kubernetes", 10 * 365 * NS_PER_DAY);
	f.leaf_key = pki_key_new(PKI_KEY_ECDSA);
	f.req = pki_csr_new(f.leaf_key, "system:node:bench", orgs, NULL, NULL, 0);
	f.leaf = pki_csr_sign(f.req, f.ca, f.ca_key, &pol);

	printf("pki_bench: one thread, %.1f s per operation, OpenSSL 3, ECDSA P-256 unless noted\n",
	       secs);
	run("keygen ECDSA P-256", op_keygen_ec, &f, secs);
	run("keygen RSA 2048", op_keygen_rsa, &f, secs * 2);
	run("CSR create, object", op_csr_new, &f, secs);
	run("CSR create as PEM (kubelet)", op_csr_new_pem, &f, secs);
	run("CSR signature verify", op_csr_verify, &f, secs);
	run("CSR sign, object", op_csr_sign, &f, secs);
	run("CSR sign as PEM (csrsigning)", op_csr_sign_pem, &f, secs);
	run("client chain verify (per handshake)", op_chain_verify, &f, secs);
	printf("reproduce: make && build/bench/pki_bench %.1f\n", secs);

	X509_free(f.leaf);
	X509_REQ_free(f.req);
	X509_free(f.ca);
	EVP_PKEY_free(f.ca_key);
	EVP_PKEY_free(f.leaf_key);
	return 0;
}
