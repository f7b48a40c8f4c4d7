/*
 * doctor — the seeds' failure table as a diagnosis: from a snapshot of the
 * cluster (what the API serves) and, where given, the nodes' own files
 * (kubelet root dirs: the certificate store, config.yaml, kubelet.log),
 * name each failure mode found — its symptom, the evidence (objects,
 * events, certificate dates, log lines), the root cause deduced from them,
 * and the commands that fix it.
 *
 * Gathering (cmd_doctor.c) and judging are apart: doctor_diagnose is a pure
 * function of its input and `now`, so every rule is tested on fixtures with
 * a virtual clock (tests/unit/test_doctor.c).
 *
 * The modes, after the seeds' table and its scenario 1:
 *   NodeNotReady          a node not Ready, with the cause its evidence
 *                         points to: kubelet stopped, client certificate
 *                         expired (rotation off, CSR pending or denied, no
 *                         CSR since), signed by another CA, the API server
 *                         unreachable from the node, the node's clock off,
 *                         credentials refused
 *   NodeClockSkew         a Ready node whose Lease times are far from now
 *   CSRPending            a CSR pending longer than the threshold: no RBAC
 *                         binding lets the approver approve it, or the
 *                         approver is off or not running
 *   CSRDenied             a node's CSR denied within the last hour
 *   AutoApproveBindingMissing  kubeadm's auto-approve bindings gone
 *   CertificateExpiring   a certificate inside the warning window (a
 *                         kubelet's only when rotation will not renew it), or
 *                         a kubelet's ClientCertificateExpiring condition
 *                         True (cube's opt-in --certificate-condition)
 *   CertificateExpired    a control-plane certificate past NotAfter
 *   PodsPendingOnTaints   pods the scheduler cannot place for taints
 *   ReplicasExceeded      Terminating pods beside their replacements
 *   StatefulSetPodStuck   a StatefulSet pod Terminating on a lost node
 *   ZoneDisruption        a zone in FullDisruption or PartialDisruption,
 *                         as the node lifecycle controller computes it
 *   APIUnreachable        the doctor itself cannot read the cluster
 *
 * Ownership: the report owns its findings; the input is borrowed.
 * Any thread.
 */
#ifndef CUBE_CUBE_DOCTOR_H
#define CUBE_CUBE_DOCTOR_H

#include "base/strv.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct expiry_report;

enum doctor_severity { DOCTOR_OK, DOCTOR_WARNING, DOCTOR_CRITICAL };

struct doctor_finding {
	enum doctor_severity severity;
	char *check;   /* "NodeNotReady", ... (the list above) */
	char *object;  /* "node/node-2", "csr/csr-abcde", "zone/(none)" */
	char *title;   /* "NotReady: client certificate expired" */
	char *symptom; /* what a user sees */
	struct strv evidence;
	char *cause; /* the root cause, one sentence */
	struct strv fix;
};

/* What a node's own files say (a kubelet root dir). */
struct doctor_node_local {
	char *node; /* from the certificate's CN, else the directory's name */
	char *dir;
	char *pki_dir;    /* its certificate store */
	char *cert_path;  /* <pki_dir>/kubelet-client-current.pem; NULL: none */
	char *cert_error; /* it could not be read */
	int64_t not_before_ns, not_after_ns;
	char *foreign_issuer; /* the issuer's CN when the cluster CA did not sign it */
	int rotate;           /* config.yaml rotateCertificates: 1, 0, -1 unknown */
	char *log_line;       /* the newest kubelet.log line with an err="..." */
	char *log_err;        /* that err's text */
	int running;          /* the kubelet process: 1, 0, -1 unknown */
	int64_t clock_ns;     /* the node's clock, read at the doctor's now (0: unknown) */
};

struct doctor_input {
	/* The API could not be read (the nodes' list failed): why. The
	 * report is then that one critical finding plus what the files say. */
	const char *api_error;
	int64_t now_ns;
	int64_t warn_ns;        /* certificates: the warning window (30d) */
	int64_t csr_pending_ns; /* CSRs: pending longer than this (5m) */
	/* The API's lists' "items" (NULL: not read). */
	const json_t *nodes, *leases, *csrs, *pods, *replicasets, *statefulsets, *bindings;
	/* {CSR name: {"selfnodeclient": bool, "nodeclient": bool}}: what a
	 * SubjectAccessReview says of each pending kubelet client CSR's
	 * requestor (NULL: not asked). */
	const json_t *reviews;
	/* The controller manager's --controllers when known ("*"), else NULL. */
	const char *controllers;
	const struct doctor_node_local *locals;
	size_t n_locals;
	/* The control plane's certificates (pki/expiry.h), or NULL. */
	const struct expiry_report *certs;
	/* cube up's data dir: fixes are phrased as cube commands there,
	 * else as a kubeadm node's (systemctl, /var/lib/kubelet). */
	const char *data_dir;
};

struct doctor_report {
	struct doctor_finding *v;
	size_t n, cap;
	int nodes, ready; /* counted from the input */
	int pending_csrs;
	char soonest[256]; /* "node-1's client certificate in 9m" ("" none) */
};

void doctor_diagnose(const struct doctor_input *in, struct doctor_report *out);
enum doctor_severity doctor_worst(const struct doctor_report *r);
const char *doctor_severity_name(enum doctor_severity s); /* "ok", "warning", "critical" */
/* {"healthy", "summary": {...}, "findings": [...]}. New reference. */
json_t *doctor_report_json(const struct doctor_report *r);
void doctor_report_print(FILE *f, const struct doctor_report *r);
void doctor_report_free(struct doctor_report *r);

/*
 * Read a kubelet root dir (or its pki/ dir): the client certificate (its
 * dates, and whether ca_pem — the cluster CA, may be NULL — signed it),
 * config.yaml's rotateCertificates and the last error of kubelet.log.
 */
void doctor_node_local_read(const char *dir, const char *ca_pem, int64_t now,
                            struct doctor_node_local *out);
void doctor_node_local_free(struct doctor_node_local *l);

#endif
