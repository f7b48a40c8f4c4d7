#include "api/protobuf.h"

#include "base/err.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schema ------------------------------------------------------------ */

enum pb_kind {
	T_STRING,  /* string */
	T_BYTES,   /* bytes -> base64 string */
	T_INT32,   /* varint, truncated to 32 bits as Go does */
	T_INT64,   /* varint */
	T_BOOL,    /* varint */
	T_MSG,     /* nested message -> object */
	T_MAP,     /* map<string, val> -> object */
	T_TIME,    /* meta.v1.Time -> "2006-01-02T15:04:05Z" */
	T_MTIME,   /* meta.v1.MicroTime -> "2006-01-02T15:04:05.000000Z" */
	T_QTY,     /* resource.Quantity {1 string} -> string */
	T_IOS,     /* intstr.IntOrString {1 type, 2 intVal, 3 strVal} */
	T_STRLIST, /* ExtraValue {1 repeated string} -> array */
};

enum {
	PB_REP = 1, /* repeated: a JSON array */
	PB_PTR = 2, /* a Go pointer: on the wire only when set, so zero is kept */
};

struct pb_msg;

struct pb_field {
	uint32_t num;
	const char *name;
	unsigned char kind;
	unsigned char flags;
	unsigned char val; /* T_MAP: the value's kind */
	const struct pb_msg *msg;
};

struct pb_msg {
	const char *name;
	const struct pb_field *fields;
	size_t n;
};

#define PB_MSG(id, ...)                                                                            \
	static const struct pb_field id##_f[] = {__VA_ARGS__};                                     \
	static const struct pb_msg id = {#id, id##_f, sizeof(id##_f) / sizeof(id##_f[0])}

/* clang-format off */
#define S(n, nm) {n, nm, T_STRING, 0, 0, NULL}
#define SP(n, nm) {n, nm, T_STRING, PB_PTR, 0, NULL}
#define SR(n, nm) {n, nm, T_STRING, PB_REP, 0, NULL}
#define BY(n, nm) {n, nm, T_BYTES, 0, 0, NULL}
#define I32(n, nm) {n, nm, T_INT32, 0, 0, NULL}
#define I32P(n, nm) {n, nm, T_INT32, PB_PTR, 0, NULL}
#define I64(n, nm) {n, nm, T_INT64, 0, 0, NULL}
#define I64P(n, nm) {n, nm, T_INT64, PB_PTR, 0, NULL}
#define I64R(n, nm) {n, nm, T_INT64, PB_REP, 0, NULL}
#define B(n, nm) {n, nm, T_BOOL, 0, 0, NULL}
#define BP(n, nm) {n, nm, T_BOOL, PB_PTR, 0, NULL}
#define M(n, nm, m) {n, nm, T_MSG, 0, 0, &m}
#define MP(n, nm, m) {n, nm, T_MSG, PB_PTR, 0, &m}
#define MR(n, nm, m) {n, nm, T_MSG, PB_REP, 0, &m}
#define MAP(n, nm, v) {n, nm, T_MAP, 0, v, NULL}
#define TM(n, nm) {n, nm, T_TIME, 0, 0, NULL}
#define MT(n, nm) {n, nm, T_MTIME, 0, 0, NULL}
#define IOS(n, nm) {n, nm, T_IOS, PB_PTR, 0, NULL}
/* clang-format on */

/* The wrapper types, decoded through the same loop and then converted. */
PB_MSG(Timestamp, I64P(1, "seconds"), I32P(2, "nanos"));
PB_MSG(Quantity, SP(1, "string"));
PB_MSG(IntOrString, I64P(1, "type"), I32P(2, "intVal"), SP(3, "strVal"));
PB_MSG(ExtraValue, SR(1, "items"));

/* meta/v1 */
PB_MSG(OwnerReference, S(5, "apiVersion"), S(1, "kind"), S(3, "name"), S(4, "uid"),
       BP(6, "controller"), BP(7, "blockOwnerDeletion"));
PB_MSG(ObjectMeta, S(1, "name"), S(2, "generateName"), S(3, "namespace"), S(4, "selfLink"),
       S(5, "uid"), S(6, "resourceVersion"), I64(7, "generation"), TM(8, "creationTimestamp"),
       TM(9, "deletionTimestamp"), I64P(10, "deletionGracePeriodSeconds"),
       MAP(11, "labels", T_STRING), MAP(12, "annotations", T_STRING),
       MR(13, "ownerReferences", OwnerReference), SR(14, "finalizers"));
PB_MSG(LabelSelectorRequirement, S(1, "key"), S(2, "operator"), SR(3, "values"));
PB_MSG(LabelSelector, MAP(1, "matchLabels", T_STRING),
       MR(2, "matchExpressions", LabelSelectorRequirement));
PB_MSG(Preconditions, SP(1, "uid"), SP(2, "resourceVersion"));
PB_MSG(DeleteOptions, I64P(1, "gracePeriodSeconds"), MP(2, "preconditions", Preconditions),
       BP(3, "orphanDependents"), SP(4, "propagationPolicy"), SR(5, "dryRun"));

/* core/v1 */
PB_MSG(ContainerPort, S(1, "name"), I32(2, "hostPort"), I32(3, "containerPort"), S(4, "protocol"),
       S(5, "hostIP"));
PB_MSG(EnvVar, S(1, "name"), S(2, "value"));
PB_MSG(ResourceRequirements, MAP(1, "limits", T_QTY), MAP(2, "requests", T_QTY));
PB_MSG(Container, S(1, "name"), S(2, "image"), SR(3, "command"), SR(4, "args"), S(5, "workingDir"),
       MR(6, "ports", ContainerPort), MR(7, "env", EnvVar), M(8, "resources", ResourceRequirements),
       S(13, "terminationMessagePath"), S(14, "imagePullPolicy"), B(16, "stdin"),
       B(17, "stdinOnce"), B(18, "tty"), S(20, "terminationMessagePolicy"),
       SP(24, "restartPolicy"));
PB_MSG(Toleration, S(1, "key"), S(2, "operator"), S(3, "value"), S(4, "effect"),
       I64P(5, "tolerationSeconds"));
PB_MSG(Sysctl, S(1, "name"), S(2, "value"));
PB_MSG(PodSecurityContext, I64P(2, "runAsUser"), I64P(6, "runAsGroup"), BP(3, "runAsNonRoot"),
       I64R(4, "supplementalGroups"), I64P(5, "fsGroup"), MR(7, "sysctls", Sysctl),
       SP(9, "fsGroupChangePolicy"));
PB_MSG(LocalObjectReference, S(1, "name"));
PB_MSG(PodSpec, MR(20, "initContainers", Container), MR(2, "containers", Container),
       S(3, "restartPolicy"), I64P(4, "terminationGracePeriodSeconds"),
       I64P(5, "activeDeadlineSeconds"), S(6, "dnsPolicy"), MAP(7, "nodeSelector", T_STRING),
       S(8, "serviceAccountName"), S(9, "serviceAccount"), BP(21, "automountServiceAccountToken"),
       S(10, "nodeName"), B(11, "hostNetwork"), B(12, "hostPID"), B(13, "hostIPC"),
       MP(14, "securityContext", PodSecurityContext),
       MR(15, "imagePullSecrets", LocalObjectReference), S(16, "hostname"), S(17, "subdomain"),
       S(19, "schedulerName"), MR(22, "tolerations", Toleration), S(24, "priorityClassName"),
       I32P(25, "priority"), SP(29, "runtimeClassName"), BP(30, "enableServiceLinks"),
       SP(31, "preemptionPolicy"));
PB_MSG(PodTemplateSpec, M(1, "metadata", ObjectMeta), M(2, "spec", PodSpec));
PB_MSG(PodCondition, S(1, "type"), S(2, "status"), TM(3, "lastProbeTime"),
       TM(4, "lastTransitionTime"), S(5, "reason"), S(6, "message"));
PB_MSG(PodIP, S(1, "ip"));
PB_MSG(PodStatus, S(1, "phase"), MR(2, "conditions", PodCondition), S(3, "message"), S(4, "reason"),
       S(5, "hostIP"), S(6, "podIP"), TM(7, "startTime"), S(9, "qosClass"),
       S(11, "nominatedNodeName"), MR(12, "podIPs", PodIP), MR(16, "hostIPs", PodIP));
PB_MSG(Pod, M(1, "metadata", ObjectMeta), M(2, "spec", PodSpec), M(3, "status", PodStatus));
PB_MSG(Taint, S(1, "key"), S(2, "value"), S(3, "effect"), TM(4, "timeAdded"));
PB_MSG(NodeSpec, S(1, "podCIDR"), SR(7, "podCIDRs"), S(3, "providerID"), B(4, "unschedulable"),
       MR(5, "taints", Taint), S(2, "externalID"));
PB_MSG(Node, M(1, "metadata", ObjectMeta), M(2, "spec", NodeSpec));

/* apps/v1 */
PB_MSG(RollingUpdateDeployment, IOS(1, "maxUnavailable"), IOS(2, "maxSurge"));
PB_MSG(DeploymentStrategy, S(1, "type"), MP(2, "rollingUpdate", RollingUpdateDeployment));
PB_MSG(DeploymentSpec, I32P(1, "replicas"), MP(2, "selector", LabelSelector),
       M(3, "template", PodTemplateSpec), M(4, "strategy", DeploymentStrategy),
       I32(5, "minReadySeconds"), I32P(6, "revisionHistoryLimit"), B(7, "paused"),
       I32P(9, "progressDeadlineSeconds"));
PB_MSG(DeploymentCondition, S(1, "type"), S(2, "status"), TM(6, "lastUpdateTime"),
       TM(7, "lastTransitionTime"), S(4, "reason"), S(5, "message"));
PB_MSG(DeploymentStatus, I64(1, "observedGeneration"), I32(2, "replicas"),
       I32(3, "updatedReplicas"), I32(7, "readyReplicas"), I32(4, "availableReplicas"),
       I32(5, "unavailableReplicas"), MR(6, "conditions", DeploymentCondition),
       I32P(8, "collisionCount"));
PB_MSG(Deployment, M(1, "metadata", ObjectMeta), M(2, "spec", DeploymentSpec),
       M(3, "status", DeploymentStatus));
/* ReplicaSet, StatefulSet and DaemonSet conditions share one shape. */
PB_MSG(AppsCondition, S(1, "type"), S(2, "status"), TM(3, "lastTransitionTime"), S(4, "reason"),
       S(5, "message"));
PB_MSG(ReplicaSetSpec, I32P(1, "replicas"), I32(4, "minReadySeconds"),
       MP(2, "selector", LabelSelector), M(3, "template", PodTemplateSpec));
PB_MSG(ReplicaSetStatus, I32(1, "replicas"), I32(2, "fullyLabeledReplicas"),
       I32(4, "readyReplicas"), I32(5, "availableReplicas"), I64(3, "observedGeneration"),
       MR(6, "conditions", AppsCondition));
PB_MSG(ReplicaSet, M(1, "metadata", ObjectMeta), M(2, "spec", ReplicaSetSpec),
       M(3, "status", ReplicaSetStatus));
PB_MSG(RollingUpdateStatefulSetStrategy, I32P(1, "partition"), IOS(2, "maxUnavailable"));
PB_MSG(StatefulSetUpdateStrategy, S(1, "type"),
       MP(2, "rollingUpdate", RollingUpdateStatefulSetStrategy));
PB_MSG(StatefulSetSpec, I32P(1, "replicas"), MP(2, "selector", LabelSelector),
       M(3, "template", PodTemplateSpec), S(5, "serviceName"), S(6, "podManagementPolicy"),
       M(7, "updateStrategy", StatefulSetUpdateStrategy), I32P(8, "revisionHistoryLimit"),
       I32(9, "minReadySeconds"));
PB_MSG(StatefulSetStatus, I64(1, "observedGeneration"), I32(2, "replicas"), I32(3, "readyReplicas"),
       I32(4, "currentReplicas"), I32(5, "updatedReplicas"), S(6, "currentRevision"),
       S(7, "updateRevision"), I32P(9, "collisionCount"), MR(10, "conditions", AppsCondition),
       I32(11, "availableReplicas"));
PB_MSG(StatefulSet, M(1, "metadata", ObjectMeta), M(2, "spec", StatefulSetSpec),
       M(3, "status", StatefulSetStatus));
PB_MSG(RollingUpdateDaemonSet, IOS(1, "maxUnavailable"), IOS(2, "maxSurge"));
PB_MSG(DaemonSetUpdateStrategy, S(1, "type"), MP(2, "rollingUpdate", RollingUpdateDaemonSet));
PB_MSG(DaemonSetSpec, MP(1, "selector", LabelSelector), M(2, "template", PodTemplateSpec),
       M(3, "updateStrategy", DaemonSetUpdateStrategy), I32(4, "minReadySeconds"),
       I32P(6, "revisionHistoryLimit"));
PB_MSG(DaemonSetStatus, I32(1, "currentNumberScheduled"), I32(2, "numberMisscheduled"),
       I32(3, "desiredNumberScheduled"), I32(4, "numberReady"), I64(5, "observedGeneration"),
       I32(6, "updatedNumberScheduled"), I32(7, "numberAvailable"), I32(8, "numberUnavailable"),
       I32P(9, "collisionCount"), MR(10, "conditions", AppsCondition));
PB_MSG(DaemonSet, M(1, "metadata", ObjectMeta), M(2, "spec", DaemonSetSpec),
       M(3, "status", DaemonSetStatus));

/* batch/v1 (kubectl create job); no podFailurePolicy or successPolicy. */
PB_MSG(JobSpec, I32P(1, "parallelism"), I32P(2, "completions"), I64P(3, "activeDeadlineSeconds"),
       I32P(7, "backoffLimit"), I32P(12, "backoffLimitPerIndex"), I32P(13, "maxFailedIndexes"),
       MP(4, "selector", LabelSelector), BP(5, "manualSelector"),
       M(6, "template", PodTemplateSpec), I32P(8, "ttlSecondsAfterFinished"),
       SP(9, "completionMode"), BP(10, "suspend"), SP(14, "podReplacementPolicy"),
       SP(15, "managedBy"));
PB_MSG(JobCondition, S(1, "type"), S(2, "status"), TM(3, "lastProbeTime"),
       TM(4, "lastTransitionTime"), S(5, "reason"), S(6, "message"));
PB_MSG(UncountedTerminatedPods, SR(1, "succeeded"), SR(2, "failed"));
PB_MSG(JobStatus, MR(1, "conditions", JobCondition), TM(2, "startTime"),
       TM(3, "completionTime"), I32(4, "active"), I32(5, "succeeded"), I32(6, "failed"),
       I32P(11, "terminating"), S(7, "completedIndexes"), SP(10, "failedIndexes"),
       MP(8, "uncountedTerminatedPods", UncountedTerminatedPods), I32P(9, "ready"));
PB_MSG(Job, M(1, "metadata", ObjectMeta), M(2, "spec", JobSpec), M(3, "status", JobStatus));

/* rbac.authorization.k8s.io/v1 (kubectl create role/clusterrole/...binding) */
PB_MSG(PolicyRule, SR(1, "verbs"), SR(2, "apiGroups"), SR(3, "resources"),
       SR(4, "resourceNames"), SR(5, "nonResourceURLs"));
PB_MSG(AggregationRule, MR(1, "clusterRoleSelectors", LabelSelector));
PB_MSG(Role, M(1, "metadata", ObjectMeta), MR(2, "rules", PolicyRule));
PB_MSG(ClusterRole, M(1, "metadata", ObjectMeta), MR(2, "rules", PolicyRule),
       MP(3, "aggregationRule", AggregationRule));
PB_MSG(Subject, S(1, "kind"), S(2, "apiGroup"), S(3, "name"), S(4, "namespace"));
PB_MSG(RoleRef, S(1, "apiGroup"), S(2, "kind"), S(3, "name"));
PB_MSG(RoleBinding, M(1, "metadata", ObjectMeta), MR(2, "subjects", Subject),
       M(3, "roleRef", RoleRef));

/* authorization.k8s.io/v1 (kubectl auth can-i); no field or label selectors */
PB_MSG(ResourceAttributes, S(1, "namespace"), S(2, "verb"), S(3, "group"), S(4, "version"),
       S(5, "resource"), S(6, "subresource"), S(7, "name"));
PB_MSG(NonResourceAttributes, S(1, "path"), S(2, "verb"));
PB_MSG(SubjectAccessReviewSpec, MP(1, "resourceAttributes", ResourceAttributes),
       MP(2, "nonResourceAttributes", NonResourceAttributes), S(3, "user"), SR(4, "groups"),
       MAP(5, "extra", T_STRLIST), S(6, "uid"));
PB_MSG(SubjectAccessReview, M(1, "metadata", ObjectMeta), M(2, "spec", SubjectAccessReviewSpec));
PB_MSG(SelfSubjectRulesReviewSpec, S(1, "namespace"));
PB_MSG(SelfSubjectRulesReview, M(1, "metadata", ObjectMeta),
       M(2, "spec", SelfSubjectRulesReviewSpec));

/* certificates.k8s.io/v1 */
PB_MSG(CertificateSigningRequestCondition, S(1, "type"), S(6, "status"), S(2, "reason"),
       S(3, "message"), TM(4, "lastUpdateTime"), TM(5, "lastTransitionTime"));
PB_MSG(CertificateSigningRequestSpec, BY(1, "request"), S(7, "signerName"),
       I32P(8, "expirationSeconds"), SR(5, "usages"), S(2, "username"), S(3, "uid"),
       SR(4, "groups"), MAP(6, "extra", T_STRLIST));
PB_MSG(CertificateSigningRequestStatus, MR(1, "conditions", CertificateSigningRequestCondition),
       BY(2, "certificate"));
PB_MSG(CertificateSigningRequest, M(1, "metadata", ObjectMeta),
       M(2, "spec", CertificateSigningRequestSpec),
       M(3, "status", CertificateSigningRequestStatus));

/* authentication.k8s.io/v1 */
PB_MSG(UserInfo, S(1, "username"), S(2, "uid"), SR(3, "groups"), MAP(4, "extra", T_STRLIST));
PB_MSG(SelfSubjectReviewStatus, M(1, "userInfo", UserInfo));
PB_MSG(SelfSubjectReview, M(1, "metadata", ObjectMeta), M(2, "status", SelfSubjectReviewStatus));

/* authentication.k8s.io/v1: `kubectl create token` */
PB_MSG(BoundObjectReference, S(1, "kind"), S(2, "apiVersion"), S(3, "name"), S(4, "uid"));
PB_MSG(TokenRequestSpec, SR(1, "audiences"), MP(3, "boundObjectRef", BoundObjectReference),
       I64P(4, "expirationSeconds"));
PB_MSG(TokenRequest, M(1, "metadata", ObjectMeta), M(2, "spec", TokenRequestSpec));
PB_MSG(TokenReviewSpec, S(1, "token"), SR(2, "audiences"));
PB_MSG(TokenReview, M(1, "metadata", ObjectMeta), M(2, "spec", TokenReviewSpec));

/* policy/v1 */
PB_MSG(Eviction, M(1, "metadata", ObjectMeta), MP(2, "deleteOptions", DeleteOptions));

/* coordination.k8s.io/v1 */
PB_MSG(LeaseSpec, SP(1, "holderIdentity"), I32P(2, "leaseDurationSeconds"), MT(3, "acquireTime"),
       MT(4, "renewTime"), I32P(5, "leaseTransitions"), SP(6, "strategy"),
       SP(7, "preferredHolder"));
PB_MSG(Lease, M(1, "metadata", ObjectMeta), M(2, "spec", LeaseSpec));

/* core/v1 objects kubectl creates through typed clients (create ns/cm/secret/sa/svc). */
PB_MSG(NamespaceSpec, SR(1, "finalizers"));
PB_MSG(NamespaceStatus, S(1, "phase"));
PB_MSG(Namespace, M(1, "metadata", ObjectMeta), M(2, "spec", NamespaceSpec),
       M(3, "status", NamespaceStatus));
PB_MSG(ConfigMap, M(1, "metadata", ObjectMeta), MAP(2, "data", T_STRING),
       MAP(3, "binaryData", T_BYTES), BP(4, "immutable"));
PB_MSG(Secret, M(1, "metadata", ObjectMeta), MAP(2, "data", T_BYTES), S(3, "type"),
       MAP(4, "stringData", T_STRING), BP(5, "immutable"));
PB_MSG(ServicePort, S(1, "name"), S(2, "protocol"), I32(3, "port"), IOS(4, "targetPort"),
       I32(5, "nodePort"), SP(6, "appProtocol"));
PB_MSG(ServiceSpec, MR(1, "ports", ServicePort), MAP(2, "selector", T_STRING),
       S(3, "clusterIP"), S(4, "type"), SR(5, "externalIPs"), S(7, "sessionAffinity"),
       S(11, "externalName"));
PB_MSG(Service, M(1, "metadata", ObjectMeta), M(2, "spec", ServiceSpec));
PB_MSG(ServiceAccount, M(1, "metadata", ObjectMeta), BP(4, "automountServiceAccountToken"));
PB_MSG(ObjectReference, S(1, "kind"), S(2, "namespace"), S(3, "name"), S(4, "uid"),
       S(5, "apiVersion"), S(6, "resourceVersion"), S(7, "fieldPath"));
PB_MSG(EventSource, S(1, "component"), S(2, "host"));
PB_MSG(Event, M(1, "metadata", ObjectMeta), M(2, "involvedObject", ObjectReference),
       S(3, "reason"), S(4, "message"), M(5, "source", EventSource), TM(6, "firstTimestamp"),
       TM(7, "lastTimestamp"), I32(8, "count"), S(9, "type"), MT(10, "eventTime"),
       S(12, "action"), S(14, "reportingComponent"), S(15, "reportingInstance"));
PB_MSG(Binding, M(1, "metadata", ObjectMeta), M(2, "target", ObjectReference));

static const struct pb_root {
	const char *api_version; /* NULL: any */
	const char *kind;
	const struct pb_msg *msg;
} pb_roots[] = {
    {"certificates.k8s.io/v1", "CertificateSigningRequest", &CertificateSigningRequest},
    {"apps/v1", "Deployment", &Deployment},
    {"apps/v1", "ReplicaSet", &ReplicaSet},
    {"apps/v1", "StatefulSet", &StatefulSet},
    {"apps/v1", "DaemonSet", &DaemonSet},
    {"batch/v1", "Job", &Job},
    {"authorization.k8s.io/v1", "SubjectAccessReview", &SubjectAccessReview},
    {"authorization.k8s.io/v1", "LocalSubjectAccessReview", &SubjectAccessReview},
    {"authorization.k8s.io/v1", "SelfSubjectAccessReview", &SubjectAccessReview},
    {"authorization.k8s.io/v1", "SelfSubjectRulesReview", &SelfSubjectRulesReview},
    {"rbac.authorization.k8s.io/v1", "Role", &Role},
    {"rbac.authorization.k8s.io/v1", "ClusterRole", &ClusterRole},
    {"rbac.authorization.k8s.io/v1", "RoleBinding", &RoleBinding},
    {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &RoleBinding},
    {"v1", "Pod", &Pod},
    {"v1", "Node", &Node},
    {"authentication.k8s.io/v1", "SelfSubjectReview", &SelfSubjectReview},
    {"authentication.k8s.io/v1", "TokenRequest", &TokenRequest},
    {"authentication.k8s.io/v1", "TokenReview", &TokenReview},
    {"policy/v1", "Eviction", &Eviction},
    {"coordination.k8s.io/v1", "Lease", &Lease},
    {"v1", "Namespace", &Namespace},
    {"v1", "ConfigMap", &ConfigMap},
    {"v1", "Secret", &Secret},
    {"v1", "Service", &Service},
    {"v1", "ServiceAccount", &ServiceAccount},
    {"v1", "Event", &Event},
    {"v1", "Binding", &Binding},
    {NULL, "DeleteOptions", &DeleteOptions},
};

static const struct pb_msg *pb_root_find(const char *api_version, const char *kind)
{
	for (size_t i = 0; i < sizeof(pb_roots) / sizeof(pb_roots[0]); i++) {
		const struct pb_root *r = &pb_roots[i];
		if (strcmp(r->kind, kind) == 0 &&
		    (!r->api_version || strcmp(r->api_version, api_version) == 0))
			return r->msg;
	}
	return NULL;
}

/* ---- decoding context --------------------------------------------------- */

#define PB_PATH_MAX 256

struct pb_ctx {
	int depth;
	size_t plen;
	char path[PB_PATH_MAX]; /* "Deployment.spec.template...", for messages */
};

struct pb_rd {
	const unsigned char *p, *end;
};

static int pb_bad(struct pb_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int pb_bad(struct pb_ctx *c, const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return err_set(ERR_INVALID, "invalid protobuf body: %s: %s", c->plen ? c->path : "envelope",
	               detail);
}

static size_t pb_push(struct pb_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static size_t pb_push(struct pb_ctx *c, const char *fmt, ...)
{
	size_t mark = c->plen;
	va_list ap;
	int k;

	if (c->plen + 1 >= sizeof(c->path))
		return mark;
	va_start(ap, fmt);
	k = vsnprintf(c->path + c->plen, sizeof(c->path) - c->plen, fmt, ap);
	va_end(ap);
	if (k > 0)
		c->plen += (size_t)k < sizeof(c->path) - c->plen ? (size_t)k
		                                                 : sizeof(c->path) - c->plen - 1;
	return mark;
}

static void pb_pop(struct pb_ctx *c, size_t mark)
{
	c->plen = mark;
	c->path[mark] = '\0';
}

/* jansson returns NULL only when out of memory for these: abort, as daemons do. */
static json_t *pb_chk(json_t *v)
{
	if (!v)
		abort();
	return v;
}

static void pb_set(json_t *obj, const char *key, json_t *v)
{
	if (json_object_set_new(obj, key, v) != 0)
		abort();
}

static void pb_append(json_t *arr, json_t *v)
{
	if (json_array_append_new(arr, v) != 0)
		abort();
}

/* ---- wire primitives ---------------------------------------------------- */

static int pb_varint(struct pb_ctx *c, struct pb_rd *r, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			return pb_bad(c, "truncated varint");
		unsigned char b = *r->p++;
		/* The 10th byte may only carry the top bit of a 64-bit value. */
		if (shift == 63 && b > 1)
			return pb_bad(c, "varint overflows 64 bits");
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return pb_bad(c, "varint longer than 10 bytes");
}

static int pb_len(struct pb_ctx *c, struct pb_rd *r, const unsigned char **data, size_t *n)
{
	uint64_t len = 0;
	int rc = pb_varint(c, r, &len);

	if (rc)
		return rc;
	if (len > (uint64_t)(r->end - r->p))
		return pb_bad(c, "length %llu runs past the end of the message (%zu bytes left)",
		              (unsigned long long)len, (size_t)(r->end - r->p));
	*data = r->p;
	*n = (size_t)len;
	r->p += len;
	return 0;
}

static int pb_tag(struct pb_ctx *c, struct pb_rd *r, uint32_t *num, unsigned *wt)
{
	uint64_t t = 0;
	int rc = pb_varint(c, r, &t);

	if (rc)
		return rc;
	if (t > UINT32_MAX || (t >> 3) == 0)
		return pb_bad(c, "invalid field number %llu", (unsigned long long)(t >> 3));
	*num = (uint32_t)(t >> 3);
	*wt = (unsigned)(t & 7);
	return 0;
}

static int pb_skip(struct pb_ctx *c, struct pb_rd *r, uint32_t num, unsigned wt)
{
	const unsigned char *d;
	uint64_t v = 0;
	size_t n;

	switch (wt) {
	case 0:
		return pb_varint(c, r, &v);
	case 1:
	case 5: {
		size_t w = wt == 1 ? 8 : 4;
		if ((size_t)(r->end - r->p) < w)
			return pb_bad(c, "field %u: truncated fixed%zu", num, w * 8);
		r->p += w;
		return 0;
	}
	case 2:
		return pb_len(c, r, &d, &n);
	case 3:
	case 4:
		return pb_bad(c, "field %u: groups are not supported", num);
	default:
		return pb_bad(c, "field %u: invalid wire type %u", num, wt);
	}
}

/* ---- values ------------------------------------------------------------- */

/* Strict UTF-8, as jansson requires of strings: no overlongs, surrogates or > U+10FFFF. */
static bool pb_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char b = s[i];
		size_t k;
		uint32_t cp;

		if (b < 0x80) {
			i++;
			continue;
		} else if (b >= 0xc2 && b <= 0xdf) {
			k = 1, cp = b & 0x1f;
		} else if (b >= 0xe0 && b <= 0xef) {
			k = 2, cp = b & 0x0f;
		} else if (b >= 0xf0 && b <= 0xf4) {
			k = 3, cp = b & 0x07;
		} else {
			return false;
		}
		if (n - i <= k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

static int pb_string(struct pb_ctx *c, const unsigned char *d, size_t n, json_t **out)
{
	if (!pb_utf8(d, n))
		return pb_bad(c, "string is not valid UTF-8");
	*out = json_stringn((const char *)d, n);
	if (!*out)
		return pb_bad(c, "string rejected by the JSON library");
	return 0;
}

static json_t *pb_base64(const unsigned char *d, size_t n)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t olen = (n + 2) / 3 * 4;
	char *o = malloc(olen + 1), *w = o;
	json_t *v;

	if (!o)
		abort();
	for (size_t i = 0; i < n; i += 3) {
		uint32_t x = (uint32_t)d[i] << 16;
		size_t left = n - i;
		if (left > 1)
			x |= (uint32_t)d[i + 1] << 8;
		if (left > 2)
			x |= d[i + 2];
		*w++ = tab[(x >> 18) & 63];
		*w++ = tab[(x >> 12) & 63];
		*w++ = left > 1 ? tab[(x >> 6) & 63] : '=';
		*w++ = left > 2 ? tab[x & 63] : '=';
	}
	*w = '\0';
	v = pb_chk(json_stringn(o, olen));
	free(o);
	return v;
}

/* Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm). */
static void pb_civil(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the range Go will marshal. */
#define PB_TIME_MIN (-62135596800LL)
#define PB_TIME_MAX 253402300799LL

static int pb_time(struct pb_ctx *c, json_t *ts, bool micro, json_t **out, bool *zero)
{
	int64_t s = json_integer_value(json_object_get(ts, "seconds"));
	int64_t ns = json_integer_value(json_object_get(ts, "nanos"));
	int64_t days, y;
	unsigned mo, d, sod;
	char buf[48];

	*zero = s == 0 && ns == 0;
	if (*zero) {
		/* Go writes a zero Time as an empty message; JSON calls it null. */
		*out = json_null();
		return 0;
	}
	if (s < PB_TIME_MIN || s > PB_TIME_MAX)
		return pb_bad(c, "time %lld seconds is outside years 1-9999", (long long)s);
	if (ns < 0 || ns > 999999999)
		return pb_bad(c, "time nanos %lld out of range", (long long)ns);
	days = (s >= 0 ? s : s - 86399) / 86400;
	sod = (unsigned)(s - days * 86400);
	pb_civil(days, &y, &mo, &d);
	if (micro)
		snprintf(buf, sizeof(buf), "%04lld-%02u-%02uT%02u:%02u:%02u.%06uZ", (long long)y,
		         mo, d, sod / 3600, sod / 60 % 60, sod % 60, (unsigned)(ns / 1000));
	else
		/* meta.v1.Time keeps whole seconds only, as Go's Unmarshal does. */
		snprintf(buf, sizeof(buf), "%04lld-%02u-%02uT%02u:%02u:%02uZ", (long long)y, mo, d,
		         sod / 3600, sod / 60 % 60, sod % 60);
	*out = pb_chk(json_string(buf));
	return 0;
}

static int pb_msg_decode(struct pb_ctx *c, const struct pb_msg *m, const unsigned char *d, size_t n,
                         json_t *obj);

/* Decode a wrapper message into a scratch object, for conversion by the caller. */
static int pb_wrapped(struct pb_ctx *c, const struct pb_msg *m, const unsigned char *d, size_t n,
                      json_t **tmp)
{
	int rc;

	*tmp = pb_chk(json_object());
	rc = pb_msg_decode(c, m, d, n, *tmp);
	if (rc) {
		json_decref(*tmp);
		*tmp = NULL;
	}
	return rc;
}

static unsigned pb_wire_type(unsigned kind)
{
	return kind == T_INT32 || kind == T_INT64 || kind == T_BOOL ? 0 : 2;
}

/*
 * One value of `kind` whose tag has been read. *zero tells whether it is the
 * type's zero value, which a singular non-pointer field omits.
 */
static int pb_value(struct pb_ctx *c, unsigned kind, const struct pb_msg *sub, unsigned wt,
                    struct pb_rd *r, json_t **out, bool *zero)
{
	const unsigned char *d = NULL;
	json_t *tmp = NULL;
	uint64_t v = 0;
	size_t n = 0;
	int rc;

	*out = NULL;
	*zero = false;
	if (wt != pb_wire_type(kind))
		return pb_bad(c, "wire type %u, expected %u", wt, pb_wire_type(kind));
	rc = wt == 0 ? pb_varint(c, r, &v) : pb_len(c, r, &d, &n);
	if (rc)
		return rc;

	switch (kind) {
	case T_STRING:
		*zero = n == 0;
		return pb_string(c, d, n, out);
	case T_BYTES:
		*zero = n == 0;
		*out = pb_base64(d, n);
		return 0;
	case T_INT32:
		/* Negative int32s are sign-extended to 10 bytes; keep the low 32 bits. */
		*zero = (uint32_t)v == 0;
		*out = pb_chk(json_integer((int32_t)(uint32_t)v));
		return 0;
	case T_INT64:
		*zero = v == 0;
		*out = pb_chk(json_integer((json_int_t)(int64_t)v));
		return 0;
	case T_BOOL:
		*zero = v == 0;
		*out = json_boolean(v != 0);
		return 0;
	case T_MSG:
		rc = pb_wrapped(c, sub, d, n, out);
		*zero = !rc && json_object_size(*out) == 0;
		return rc;
	case T_TIME:
	case T_MTIME:
		if ((rc = pb_wrapped(c, &Timestamp, d, n, &tmp)))
			return rc;
		rc = pb_time(c, tmp, kind == T_MTIME, out, zero);
		json_decref(tmp);
		return rc;
	case T_QTY: {
		if ((rc = pb_wrapped(c, &Quantity, d, n, &tmp)))
			return rc;
		json_t *s = json_object_get(tmp, "string");
		*zero = !s || json_string_length(s) == 0;
		/* An empty Quantity is zero, which Go marshals as "0". */
		*out = *zero ? pb_chk(json_string("0")) : json_incref(s);
		json_decref(tmp);
		return 0;
	}
	case T_IOS: {
		if ((rc = pb_wrapped(c, &IntOrString, d, n, &tmp)))
			return rc;
		json_int_t type = json_integer_value(json_object_get(tmp, "type"));
		json_t *s = json_object_get(tmp, "strVal");
		if (type == 0) {
			*out = pb_chk(
			    json_integer(json_integer_value(json_object_get(tmp, "intVal"))));
		} else if (type == 1) {
			*out = s ? json_incref(s) : pb_chk(json_string(""));
		} else {
			json_decref(tmp);
			return pb_bad(c, "IntOrString type %lld is neither 0 (int) nor 1 (string)",
			              (long long)type);
		}
		json_decref(tmp);
		return 0;
	}
	case T_STRLIST: {
		if ((rc = pb_wrapped(c, &ExtraValue, d, n, &tmp)))
			return rc;
		json_t *items = json_object_get(tmp, "items");
		*out = items ? json_incref(items) : pb_chk(json_array());
		*zero = json_array_size(*out) == 0;
		json_decref(tmp);
		return 0;
	}
	default:
		return pb_bad(c, "internal: no decoder for kind %u", kind);
	}
}

/* The value a map entry without field 2 stands for. */
static json_t *pb_map_default(unsigned kind)
{
	switch (kind) {
	case T_QTY:
		return pb_chk(json_string("0"));
	case T_STRLIST:
		return pb_chk(json_array());
	case T_INT32:
	case T_INT64:
		return pb_chk(json_integer(0));
	case T_BOOL:
		return json_false();
	case T_MSG:
		return pb_chk(json_object());
	case T_TIME:
	case T_MTIME:
		return json_null();
	default:
		return pb_chk(json_string(""));
	}
}

/* One map entry {1 key, 2 value}; a later entry with the same key wins. */
static int pb_map_entry(struct pb_ctx *c, const struct pb_field *f, const unsigned char *d,
                        size_t n, json_t *obj)
{
	struct pb_rd r = {d, d + n};
	const unsigned char *key = (const unsigned char *)"";
	size_t klen = 0;
	json_t *val = NULL, *map;
	int rc = 0;

	if (++c->depth > PB_MAX_DEPTH) {
		c->depth--;
		return pb_bad(c, "nesting deeper than %d", PB_MAX_DEPTH);
	}
	while (r.p < r.end && !rc) {
		uint32_t num = 0;
		unsigned wt = 0;
		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		if (num == 1) {
			if (wt != 2)
				rc = pb_bad(c, "map key: wire type %u, expected 2", wt);
			else
				rc = pb_len(c, &r, &key, &klen);
		} else if (num == 2) {
			json_t *v;
			bool zero;
			size_t mark = pb_push(c, "{value}");
			rc = pb_value(c, f->val, f->msg, wt, &r, &v, &zero);
			pb_pop(c, mark);
			if (!rc) {
				json_decref(val);
				val = v;
			}
		} else {
			rc = pb_skip(c, &r, num, wt);
		}
	}
	c->depth--;
	if (!rc && (!pb_utf8(key, klen) || memchr(key, '\0', klen)))
		rc = pb_bad(c, "map key is not valid UTF-8 text");
	if (rc) {
		json_decref(val);
		return rc;
	}
	if (!val)
		val = pb_map_default(f->val);
	map = json_object_get(obj, f->name);
	if (!map) {
		map = pb_chk(json_object());
		pb_set(obj, f->name, map);
	}
	if (json_object_setn_new(map, (const char *)key, klen, val) != 0)
		return pb_bad(c, "map key rejected by the JSON library");
	return 0;
}

static void pb_push_elem(json_t *obj, const char *name, json_t *v)
{
	json_t *arr = json_object_get(obj, name);

	if (!arr) {
		arr = pb_chk(json_array());
		pb_set(obj, name, arr);
	}
	pb_append(arr, v);
}

static int pb_repeated(struct pb_ctx *c, const struct pb_field *f, unsigned wt, struct pb_rd *r,
                       json_t *obj)
{
	json_t *arr = json_object_get(obj, f->name), *v;
	size_t idx = json_array_size(arr), mark;
	bool zero;
	int rc;

	if (wt == 2 && pb_wire_type(f->kind) == 0) {
		/* Packed scalars: one length-delimited run of varints. */
		const unsigned char *d;
		size_t n;
		if ((rc = pb_len(c, r, &d, &n)))
			return rc;
		struct pb_rd sub = {d, d + n};
		while (sub.p < sub.end) {
			mark = pb_push(c, "[%zu]", idx++);
			rc = pb_value(c, f->kind, NULL, 0, &sub, &v, &zero);
			pb_pop(c, mark);
			if (rc)
				return rc;
			pb_push_elem(obj, f->name, v);
		}
		return 0;
	}
	mark = pb_push(c, "[%zu]", idx);
	rc = pb_value(c, f->kind, f->msg, wt, r, &v, &zero);
	pb_pop(c, mark);
	if (rc)
		return rc;
	pb_push_elem(obj, f->name, v);
	return 0;
}

/* A singular message merges into an earlier occurrence, as protobuf specifies. */
static int pb_submsg(struct pb_ctx *c, const struct pb_field *f, unsigned wt, struct pb_rd *r,
                     json_t *obj)
{
	const unsigned char *d;
	size_t n;
	json_t *child;
	bool fresh;
	int rc;

	if (wt != 2)
		return pb_bad(c, "wire type %u, expected 2", wt);
	if ((rc = pb_len(c, r, &d, &n)))
		return rc;
	child = json_object_get(obj, f->name);
	fresh = !json_is_object(child);
	if (fresh)
		child = pb_chk(json_object());
	rc = pb_msg_decode(c, f->msg, d, n, child);
	if (fresh) {
		if (!rc && (json_object_size(child) > 0 || (f->flags & PB_PTR)))
			pb_set(obj, f->name, child);
		else
			json_decref(child);
	}
	return rc;
}

static int pb_field_decode(struct pb_ctx *c, const struct pb_field *f, unsigned wt, struct pb_rd *r,
                           json_t *obj)
{
	const unsigned char *d;
	json_t *v;
	bool zero;
	size_t n;
	int rc;

	if (f->kind == T_MAP) {
		if (wt != 2)
			return pb_bad(c, "wire type %u, expected 2", wt);
		if ((rc = pb_len(c, r, &d, &n)))
			return rc;
		return pb_map_entry(c, f, d, n, obj);
	}
	if (f->flags & PB_REP)
		return pb_repeated(c, f, wt, r, obj);
	if (f->kind == T_MSG)
		return pb_submsg(c, f, wt, r, obj);
	if ((rc = pb_value(c, f->kind, f->msg, wt, r, &v, &zero)))
		return rc;
	/* Last one wins; a zero Time is never "set", even behind a pointer. */
	if (zero && (!(f->flags & PB_PTR) || f->kind == T_TIME || f->kind == T_MTIME)) {
		json_decref(v);
		json_object_del(obj, f->name);
	} else {
		pb_set(obj, f->name, v);
	}
	return 0;
}

static const struct pb_field *pb_field_find(const struct pb_msg *m, uint32_t num)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->fields[i].num == num)
			return &m->fields[i];
	return NULL;
}

static int pb_msg_decode(struct pb_ctx *c, const struct pb_msg *m, const unsigned char *d, size_t n,
                         json_t *obj)
{
	struct pb_rd r = {d, d + n};
	int rc = 0;

	if (++c->depth > PB_MAX_DEPTH) {
		c->depth--;
		return pb_bad(c, "nesting deeper than %d", PB_MAX_DEPTH);
	}
	while (r.p < r.end) {
		const struct pb_field *f;
		uint32_t num = 0;
		unsigned wt = 0;

		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		f = pb_field_find(m, num);
		if (!f) {
			if ((rc = pb_skip(c, &r, num, wt)))
				break;
			continue;
		}
		size_t mark = pb_push(c, ".%s", f->name);
		rc = pb_field_decode(c, f, wt, &r, obj);
		pb_pop(c, mark);
		if (rc)
			break;
	}
	c->depth--;
	return rc;
}

/* ---- envelope ----------------------------------------------------------- */

struct pb_env {
	const unsigned char *api_version, *kind, *raw, *encoding, *ctype;
	size_t api_version_len, kind_len, raw_len, encoding_len, ctype_len;
};

static int pb_typemeta(struct pb_ctx *c, const unsigned char *d, size_t n, struct pb_env *e)
{
	struct pb_rd r = {d, d + n};
	int rc = 0;

	while (r.p < r.end && !rc) {
		uint32_t num = 0;
		unsigned wt = 0;
		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		if (num == 1 || num == 2) {
			if (wt != 2)
				return pb_bad(c, "typeMeta field %u: wire type %u, expected 2", num,
				              wt);
			rc = num == 1 ? pb_len(c, &r, &e->api_version, &e->api_version_len)
			              : pb_len(c, &r, &e->kind, &e->kind_len);
		} else {
			rc = pb_skip(c, &r, num, wt);
		}
	}
	return rc;
}

static int pb_envelope(struct pb_ctx *c, const unsigned char *d, size_t n, struct pb_env *e)
{
	struct pb_rd r = {d, d + n};
	const unsigned char *tm;
	size_t tmlen;
	int rc = 0;

	while (r.p < r.end && !rc) {
		uint32_t num = 0;
		unsigned wt = 0;
		if ((rc = pb_tag(c, &r, &num, &wt)))
			break;
		if (num < 1 || num > 4) {
			rc = pb_skip(c, &r, num, wt);
			continue;
		}
		if (wt != 2)
			return pb_bad(c, "field %u: wire type %u, expected 2", num, wt);
		switch (num) {
		case 1:
			if (!(rc = pb_len(c, &r, &tm, &tmlen)))
				rc = pb_typemeta(c, tm, tmlen, e);
			break;
		case 2:
			rc = pb_len(c, &r, &e->raw, &e->raw_len);
			break;
		case 3:
			rc = pb_len(c, &r, &e->encoding, &e->encoding_len);
			break;
		default:
			rc = pb_len(c, &r, &e->ctype, &e->ctype_len);
			break;
		}
	}
	return rc;
}

static bool pb_text(const unsigned char *s, size_t n)
{
	return n == 0 || (pb_utf8(s, n) && !memchr(s, '\0', n));
}

bool pb_has_magic(const unsigned char *buf, size_t len)
{
	return buf && len >= PB_MAGIC_LEN && memcmp(buf, PB_MAGIC, PB_MAGIC_LEN) == 0;
}

bool pb_kind_supported(const char *api_version, const char *kind)
{
	return api_version && kind && pb_root_find(api_version, kind) != NULL;
}

int pb_parse(const unsigned char *buf, size_t len, json_t **out)
{
	static const char proto_ct[] = "application/vnd.kubernetes.protobuf";
	struct pb_ctx c = {0};
	struct pb_env e = {0};
	const struct pb_msg *m;
	char api_version[256], kind[256];
	json_t *obj;
	int rc;

	*out = NULL;
	if (!pb_has_magic(buf, len))
		return err_set(ERR_INVALID, "invalid protobuf body: it does not start with the "
		                            "Kubernetes magic \"k8s\\0\"");
	if ((rc = pb_envelope(&c, buf + PB_MAGIC_LEN, len - PB_MAGIC_LEN, &e)))
		return rc;
	if (!e.kind_len)
		return err_set(ERR_INVALID, "invalid protobuf body: the envelope names no kind");
	if (!pb_text(e.kind, e.kind_len) || !pb_text(e.api_version, e.api_version_len) ||
	    e.kind_len >= sizeof(kind) || e.api_version_len >= sizeof(api_version))
		return err_set(
		    ERR_INVALID,
		    "invalid protobuf body: the envelope's apiVersion or kind is not text");
	memcpy(kind, e.kind, e.kind_len);
	kind[e.kind_len] = '\0';
	memcpy(api_version, e.api_version ? (const char *)e.api_version : "", e.api_version_len);
	api_version[e.api_version_len] = '\0';
	if (e.encoding_len)
		return err_set(ERR_UNSUPPORTED,
		               "protobuf content encoding \"%.*s\" is not supported for %s",
		               (int)(e.encoding_len > 64 ? 64 : e.encoding_len),
		               (const char *)e.encoding, kind);
	if (e.ctype_len &&
	    (e.ctype_len != sizeof(proto_ct) - 1 || memcmp(e.ctype, proto_ct, e.ctype_len) != 0))
		return err_set(ERR_UNSUPPORTED, "protobuf envelope content type is not %s",
		               proto_ct);
	m = pb_root_find(api_version, kind);
	if (!m)
		return err_set(ERR_UNSUPPORTED,
		               "no protobuf decoder for kind \"%s\" in \"%s\"; send it as "
		               "application/json",
		               kind, api_version);

	obj = pb_chk(json_object());
	pb_set(obj, "apiVersion", pb_chk(json_string(api_version)));
	pb_set(obj, "kind", pb_chk(json_string(kind)));
	pb_push(&c, "%s", kind);
	if (e.raw_len && (rc = pb_msg_decode(&c, m, e.raw, e.raw_len, obj))) {
		json_decref(obj);
		return rc;
	}
	*out = obj;
	return 0;
}

json_t *pb_decode(const unsigned char *buf, size_t len)
{
	json_t *obj;

	return pb_parse(buf, len, &obj) == 0 ? obj : NULL;
}
