/* Server-side printing: columns, cells and the Table envelope. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/printers.h"
#include "base/err.h"
#include "base/jx.h"
#include "base/timeutil.h"

#include <stdlib.h>
#include <string.h>

/* Every object below is seen at this instant. */
#define NOW_TEXT "2025-01-01T12:00:00Z"
static int64_t now_ns;

/* JSON written with ' for " (so the fixtures stay readable); malloc'd. */
static char *q(const char *s)
{
	char *out = strdup(s);
	assert_non_null(out);
	for (char *p = out; *p; p++)
		if (*p == '\'')
			*p = '"';
	return out;
}

static json_t *J(const char *s)
{
	char *text = q(s);
	json_t *v = jx_parse(text, strlen(text));
	if (!v)
		fail_msg("bad fixture: %s: %s", err_msg(), text);
	free(text);
	return v;
}

static void assert_json(const json_t *v, const char *expected)
{
	char *got = jx_dump(v), *want = q(expected);
	assert_string_equal(got, want);
	free(got);
	free(want);
}

static void check_cells(const char *kind, const char *obj, const char *expected)
{
	json_t *o = J(obj), *cells = printers_cells(kind, o, now_ns);
	json_t *cols = printers_columns(kind);
	assert_json(cells, expected);
	/* one cell per column, wide ones included */
	assert_int_equal(json_array_size(cells), json_array_size(cols));
	json_decref(cols);
	json_decref(cells);
	json_decref(o);
}

/* The column names of a kind, comma-joined, wide ones in [ ]. */
static void check_columns(const char *kind, const char *expected)
{
	json_t *cols = printers_columns(kind), *c;
	char buf[1024] = "";
	size_t i;

	json_array_foreach(cols, i, c) {
		bool wide = json_integer_value(json_object_get(c, "priority")) == 1;
		if (i)
			strcat(buf, ",");
		if (wide)
			strcat(buf, "[");
		strcat(buf, json_string_value(json_object_get(c, "name")));
		if (wide)
			strcat(buf, "]");
		assert_non_null(json_string_value(json_object_get(c, "description")));
		assert_non_null(json_string_value(json_object_get(c, "type")));
	}
	assert_string_equal(buf, expected);
	json_decref(cols);
}

static int setup(void **state)
{
	(void)state;
	return time_parse_rfc3339(NOW_TEXT, &now_ns);
}

/* ---- columns ----------------------------------------------------------- */

static void test_columns(void **state)
{
	json_t *cols = printers_columns("Node");

	assert_json(json_array_get(cols, 0),
		    "{'name':'Name','type':'string','format':'name','description':'Name must be "
		    "unique within a namespace. Is required when creating resources, although some "
		    "resources may allow a client to request the generation of an appropriate name "
		    "automatically. Name is primarily intended for creation idempotence and "
		    "configuration definition. Cannot be updated. More info: "
		    "https://kubernetes.io/docs/concepts/overview/working-with-objects/"
		    "names#names','priority':0}");
	assert_string_equal(json_string_value(json_object_get(json_array_get(cols, 5), "format")),
			    "");
	json_decref(cols);

	check_columns("Node", "Name,Status,Roles,Age,Version,[Internal-IP],[External-IP],"
			      "[OS-Image],[Kernel-Version],[Container-Runtime]");
	check_columns("Pod", "Name,Ready,Status,Restarts,Age,[IP],[Node],[Nominated Node],"
			     "[Readiness Gates]");
	check_columns("CertificateSigningRequest",
		      "Name,Age,SignerName,Requestor,RequestedDuration,Condition");
	check_columns("Lease", "Name,Holder,Age");
	check_columns("Event", "Last Seen,Type,Reason,Object,[Subobject],[Source],Message,"
			       "[First Seen],[Count],[Name]");
	check_columns("Deployment",
		      "Name,Ready,Up-to-date,Available,Age,[Containers],[Images],[Selector]");
	check_columns("ReplicaSet",
		      "Name,Desired,Current,Ready,Age,[Containers],[Images],[Selector]");
	check_columns("DaemonSet", "Name,Desired,Current,Ready,Up-to-date,Available,Node "
				   "Selector,Age,[Containers],[Images],[Selector]");
	check_columns("StatefulSet", "Name,Ready,Age,[Containers],[Images]");
	check_columns("Namespace", "Name,Status,Age");
	check_columns("Service", "Name,Type,Cluster-IP,External-IP,Port(s),Age,[Selector]");
	check_columns("Endpoints", "Name,Endpoints,Age");
	check_columns("EndpointSlice", "Name,AddressType,Ports,Endpoints,Age");
	check_columns("ConfigMap", "Name,Data,Age");
	check_columns("Secret", "Name,Type,Data,Age");
	check_columns("PriorityClass", "Name,Age");
	check_columns("ClusterRole", "Name,Created At");
	check_columns("RoleBinding", "Name,Role,Age,[Users],[Groups],[ServiceAccounts]");
	check_columns(NULL, "Name,Age");

	/* integer columns where upstream declares them */
	cols = printers_columns("ReplicaSet");
	assert_string_equal(json_string_value(json_object_get(json_array_get(cols, 1), "type")),
			    "integer");
	json_decref(cols);
	/* the event Name column is the wide, name-formatted one */
	cols = printers_columns("Event");
	assert_json(json_object_get(json_array_get(cols, 9), "format"), "'name'");
	assert_json(json_object_get(json_array_get(cols, 0), "format"), "''");
	json_decref(cols);
}

/* ---- nodes ------------------------------------------------------------- */

static void test_node_ready_with_roles(void **state)
{
	check_cells(
		"Node",
		"{'apiVersion':'v1','kind':'Node','metadata':{'name':'node-1',"
		"'creationTimestamp':'2024-12-29T12:00:00Z','labels':{"
		"'node-role.kubernetes.io/control-plane':'','node-role.kubernetes.io/etcd':'',"
		"'kubernetes.io/role':'master','node-role.kubernetes.io/':'x',"
		"'kubernetes.io/hostname':'node-1'}},'spec':{'podCIDR':'10.244.0.0/24'},"
		"'status':{'conditions':[{'type':'MemoryPressure','status':'False'},"
		"{'type':'Ready','status':'True','reason':'KubeletReady'}],"
		"'addresses':[{'type':'Hostname','address':'node-1'},"
		"{'type':'InternalIP','address':'10.0.0.1'},{'type':'InternalIP','address':'10.0.0.9'},"
		"{'type':'ExternalIP','address':'203.0.113.7'}],"
		"'nodeInfo':{'kubeletVersion':'v1.32.0','osImage':'Debian GNU/Linux 12 (bookworm)',"
		"'kernelVersion':'6.1.0-18-amd64','containerRuntimeVersion':'containerd://1.7.24'}}}",
		"['node-1','Ready','control-plane,etcd,master','3d','v1.32.0','10.0.0.1',"
		"'203.0.113.7','Debian GNU/Linux 12 (bookworm)','6.1.0-18-amd64',"
		"'containerd://1.7.24']");
}

static void test_node_not_ready(void **state)
{
	check_cells("Node",
		    "{'kind':'Node','metadata':{'name':'node-2','creationTimestamp':"
		    "'2025-01-01T07:00:00Z'},'status':{'conditions':[{'type':'Ready',"
		    "'status':'False','reason':'KubeletNotReady'}],'nodeInfo':{'kubeletVersion':"
		    "'v1.32.0'}}}",
		    "['node-2','NotReady','<none>','5h','v1.32.0','<none>','<none>','<unknown>',"
		    "'<unknown>','<unknown>']");
	/* Unknown (the kubelet stopped posting) prints as NotReady too */
	check_cells("Node",
		    "{'kind':'Node','metadata':{'name':'node-3','creationTimestamp':"
		    "'2025-01-01T04:30:00Z'},'spec':{'unschedulable':true},'status':{'conditions':"
		    "[{'type':'Ready','status':'Unknown','reason':'NodeStatusUnknown'}]}}",
		    "['node-3','NotReady,SchedulingDisabled','<none>','7h30m','','<none>','<none>',"
		    "'<unknown>','<unknown>','<unknown>']");
}

static void test_node_unknown_cordoned(void **state)
{
	check_cells("Node",
		    "{'kind':'Node','metadata':{'name':'node-4','creationTimestamp':"
		    "'2025-01-01T11:58:30Z','labels':{'kubernetes.io/role':'worker'}},"
		    "'spec':{'unschedulable':true,'taints':[{'key':"
		    "'node.kubernetes.io/unschedulable','effect':'NoSchedule'}]},"
		    "'status':{'conditions':[{'type':'DiskPressure','status':'False'}]}}",
		    "['node-4','Unknown,SchedulingDisabled','worker','90s','','<none>','<none>',"
		    "'<unknown>','<unknown>','<unknown>']");
}

/* ---- pods -------------------------------------------------------------- */

#define POD_META(n, created)                                                                       \
	"'kind':'Pod','apiVersion':'v1','metadata':{'name':'" n "',"                              \
	"'namespace':'default','creationTimestamp':'" created "'"

static void test_pod_running(void **state)
{
	check_cells("Pod",
		    "{" POD_META("web-1", "2025-01-01T11:00:00Z") "},'spec':{'nodeName':'node-1',"
		    "'containers':[{'name':'nginx','image':'nginx:1.27'}]},'status':{'phase':"
		    "'Running','podIP':'10.244.0.5','podIPs':[{'ip':'10.244.0.5'},{'ip':'fd00::5'}],"
		    "'conditions':[{'type':'Initialized','status':'True'},{'type':'Ready','status':"
		    "'True'}],'containerStatuses':[{'name':'nginx','ready':true,'restartCount':0,"
		    "'started':true,'state':{'running':{'startedAt':'2025-01-01T11:00:05Z'}}}]}}",
		    "['web-1','1/1','Running','0','60m','10.244.0.5','node-1','<none>','<none>']");
	/* podIP alone (podIPs unset) still fills the IP column; readiness gates count */
	check_cells("Pod",
		    "{" POD_META("web-2", "2025-01-01T11:59:15Z") "},'spec':{'nodeName':'node-1',"
		    "'readinessGates':[{'conditionType':'example.com/lb'},{'conditionType':"
		    "'example.com/dns'}],'containers':[{'name':'a'},{'name':'b'}]},'status':{"
		    "'phase':'Running','podIP':'10.244.0.6','nominatedNodeName':'node-9',"
		    "'conditions':[{'type':'example.com/lb','status':'True'},{'type':"
		    "'example.com/dns','status':'False'}],'containerStatuses':[{'name':'a',"
		    "'ready':true,'state':{'running':{}}},{'name':'b','ready':false,'state':"
		    "{'running':{}}}]}}",
		    "['web-2','1/2','Running','0','45s','10.244.0.6','node-1','node-9','1/2']");
}

static void test_pod_pending_unscheduled(void **state)
{
	check_cells("Pod",
		    "{" POD_META("pending-1", "2025-01-01T11:55:50Z") "},'spec':{'containers':["
		    "{'name':'a','image':'a'},{'name':'b','image':'b'}]},'status':{'phase':"
		    "'Pending','conditions':[{'type':'PodScheduled','status':'False','reason':"
		    "'Unschedulable','message':'0/1 nodes are available'}]}}",
		    "['pending-1','0/2','Pending','0','4m10s','<none>','<none>','<none>','<none>']");
	check_cells("Pod",
		    "{" POD_META("gated", "2025-01-01T11:59:00Z") "},'spec':{'schedulingGates':"
		    "[{'name':'x'}],'containers':[{'name':'a'}]},'status':{'phase':'Pending',"
		    "'conditions':[{'type':'PodScheduled','status':'False','reason':"
		    "'SchedulingGated'}]}}",
		    "['gated','0/1','SchedulingGated','0','60s','<none>','<none>','<none>','<none>']");
	/* no status at all, no creationTimestamp */
	check_cells("Pod", "{'kind':'Pod','metadata':{'name':'bare'},'spec':{'containers':[{}]}}",
		    "['bare','0/1','','0','<unknown>','<none>','<none>','<none>','<none>']");
}

static void test_pod_terminating(void **state)
{
	check_cells("Pod",
		    "{" POD_META("web-3", "2025-01-01T10:00:00Z") ",'deletionTimestamp':"
		    "'2025-01-01T11:59:50Z','deletionGracePeriodSeconds':30},'spec':{'nodeName':"
		    "'node-1','containers':[{'name':'nginx'}]},'status':{'phase':'Running',"
		    "'podIPs':[{'ip':'10.244.0.7'}],'containerStatuses':[{'name':'nginx','ready':"
		    "true,'state':{'running':{}}}]}}",
		    "['web-3','1/1','Terminating','0','120m','10.244.0.7','node-1','<none>',"
		    "'<none>']");
	/* NodeLost → Unknown */
	check_cells("Pod",
		    "{" POD_META("lost", "2025-01-01T10:00:00Z") ",'deletionTimestamp':"
		    "'2025-01-01T11:59:50Z'},'spec':{'nodeName':'node-2','containers':[{'name':"
		    "'a'}]},'status':{'phase':'Running','reason':'NodeLost','containerStatuses':"
		    "[{'name':'a','ready':true,'state':{'running':{}}}]}}",
		    "['lost','1/1','Unknown','0','120m','<none>','node-2','<none>','<none>']");
	/* a finished pod being deleted keeps its final status */
	check_cells("Pod",
		    "{" POD_META("done", "2025-01-01T10:00:00Z") ",'deletionTimestamp':"
		    "'2025-01-01T11:59:50Z'},'spec':{'containers':[{'name':'a'}]},'status':{"
		    "'phase':'Succeeded','containerStatuses':[{'name':'a','state':{'terminated':"
		    "{'exitCode':0,'reason':'Completed'}}}]}}",
		    "['done','0/1','Completed','0','120m','<none>','<none>','<none>','<none>']");
}

static void test_pod_crashloop_restarts(void **state)
{
	check_cells(
		"Pod",
		"{" POD_META("crash-1", "2025-01-01T11:50:00Z") "},'spec':{'nodeName':'node-1',"
		"'containers':[{'name':'app','image':'app:1'}]},'status':{'phase':'Running',"
		"'podIPs':[{'ip':'10.244.0.8'}],'containerStatuses':[{'name':'app','ready':false,"
		"'restartCount':3,'state':{'waiting':{'reason':'CrashLoopBackOff','message':"
		"'back-off 40s restarting failed container'}},'lastState':{'terminated':{"
		"'exitCode':1,'reason':'Error','startedAt':'2025-01-01T11:57:55Z','finishedAt':"
		"'2025-01-01T11:58:00Z'}}}]}}",
		"['crash-1','0/1','CrashLoopBackOff','3 (2m ago)','10m','10.244.0.8','node-1',"
		"'<none>','<none>']");
	/* restarts summed over containers, the latest termination wins; no time → bare N */
	check_cells("Pod",
		    "{" POD_META("multi", "2025-01-01T09:00:00Z") "},'spec':{'containers':[{'name':"
		    "'a'},{'name':'b'}]},'status':{'phase':'Running','containerStatuses':[{'name':"
		    "'a','ready':true,'restartCount':1,'state':{'running':{}},'lastState':{"
		    "'terminated':{'exitCode':2,'finishedAt':'2025-01-01T10:00:00Z'}}},{'name':"
		    "'b','ready':true,'restartCount':4,'state':{'running':{}},'lastState':{"
		    "'terminated':{'exitCode':2,'finishedAt':'2025-01-01T11:15:00Z'}}}]}}",
		    "['multi','2/2','Running','5 (45m ago)','3h','<none>','<none>','<none>',"
		    "'<none>']");
	check_cells("Pod",
		    "{" POD_META("nolast", "2025-01-01T09:00:00Z") "},'spec':{'containers':[{'name':"
		    "'a'}]},'status':{'phase':'Running','containerStatuses':[{'name':'a','ready':"
		    "true,'restartCount':2,'state':{'running':{}}}]}}",
		    "['nolast','1/1','Running','2','3h','<none>','<none>','<none>','<none>']");
	/* terminated without a reason: ExitCode:N / Signal:N (the first container wins) */
	check_cells("Pod",
		    "{" POD_META("killed", "2025-01-01T11:00:00Z") "},'spec':{'containers':[{'name':"
		    "'a'},{'name':'b'}]},'status':{'phase':'Running','containerStatuses':[{'name':"
		    "'a','state':{'terminated':{'exitCode':137,'signal':9}}},{'name':'b','state':"
		    "{'terminated':{'exitCode':2}}}]}}",
		    "['killed','0/2','Signal:9','0','60m','<none>','<none>','<none>','<none>']");
}

static void test_pod_init(void **state)
{
	check_cells("Pod",
		    "{" POD_META("init-1", "2025-01-01T11:59:00Z") "},'spec':{'nodeName':'node-1',"
		    "'initContainers':[{'name':'init-db','image':'busybox'}],'containers':[{'name':"
		    "'app'}]},'status':{'phase':'Pending','conditions':[{'type':'Initialized',"
		    "'status':'False','reason':'ContainersNotInitialized'}],"
		    "'initContainerStatuses':[{'name':'init-db','ready':false,'restartCount':0,"
		    "'state':{'running':{'startedAt':'2025-01-01T11:59:10Z'}}}],"
		    "'containerStatuses':[{'name':'app','ready':false,'restartCount':0,'state':"
		    "{'waiting':{'reason':'PodInitializing'}}}]}}",
		    "['init-1','0/1','Init:0/1','0','60s','<none>','node-1','<none>','<none>']");
	/* second of two init containers, the first done */
	check_cells("Pod",
		    "{" POD_META("init-2", "2025-01-01T11:59:00Z") "},'spec':{'initContainers':["
		    "{'name':'one'},{'name':'two'}],'containers':[{'name':'app'}]},'status':{"
		    "'phase':'Pending','initContainerStatuses':[{'name':'one','state':{"
		    "'terminated':{'exitCode':0,'reason':'Completed'}}},{'name':'two','state':{"
		    "'waiting':{'reason':'PodInitializing'}}}]}}",
		    "['init-2','0/1','Init:1/2','0','60s','<none>','<none>','<none>','<none>']");
	/* init restarts count while initializing */
	check_cells("Pod",
		    "{" POD_META("init-3", "2025-01-01T11:50:00Z") "},'spec':{'initContainers':["
		    "{'name':'one'}],'containers':[{'name':'app'}]},'status':{'phase':'Pending',"
		    "'initContainerStatuses':[{'name':'one','restartCount':2,'state':{'waiting':"
		    "{'reason':'CrashLoopBackOff'}},'lastState':{'terminated':{'exitCode':1,"
		    "'reason':'Error','finishedAt':'2025-01-01T11:59:30Z'}}}],"
		    "'containerStatuses':[{'name':'app','state':{'waiting':{'reason':"
		    "'PodInitializing'}}}]}}",
		    "['init-3','0/1','Init:CrashLoopBackOff','2 (30s ago)','10m','<none>','<none>',"
		    "'<none>','<none>']");
	check_cells("Pod",
		    "{" POD_META("init-4", "2025-01-01T11:50:00Z") "},'spec':{'initContainers':["
		    "{'name':'one'}],'containers':[{'name':'app'}]},'status':{'phase':'Failed',"
		    "'initContainerStatuses':[{'name':'one','state':{'terminated':{'exitCode':3}}}]}}",
		    "['init-4','0/1','Init:ExitCode:3','0','10m','<none>','<none>','<none>','<none>']");
	check_cells("Pod",
		    "{" POD_META("init-5", "2025-01-01T11:50:00Z") "},'spec':{'initContainers':["
		    "{'name':'one'}],'containers':[{'name':'app'}]},'status':{'phase':'Pending',"
		    "'initContainerStatuses':[{'name':'one','state':{'terminated':{'exitCode':1,"
		    "'reason':'Error'}}}]}}",
		    "['init-5','0/1','Init:Error','0','10m','<none>','<none>','<none>','<none>']");
	/* a started sidecar counts as a ready container; its restarts survive */
	check_cells("Pod",
		    "{" POD_META("sidecar", "2025-01-01T11:00:00Z") "},'spec':{'initContainers':["
		    "{'name':'proxy','restartPolicy':'Always'}],'containers':[{'name':'app'}]},"
		    "'status':{'phase':'Running','conditions':[{'type':'Initialized','status':"
		    "'True'},{'type':'Ready','status':'True'}],'initContainerStatuses':[{'name':"
		    "'proxy','started':true,'ready':true,'restartCount':1,'state':{'running':{}},"
		    "'lastState':{'terminated':{'exitCode':1,'finishedAt':"
		    "'2025-01-01T11:55:00Z'}}}],'containerStatuses':[{'name':'app','ready':true,"
		    "'state':{'running':{}}}]}}",
		    "['sidecar','2/2','Running','1 (5m ago)','60m','<none>','<none>','<none>',"
		    "'<none>']");
}

static void test_pod_completed(void **state)
{
	static const char pod[] =
		"{" POD_META("job-abc", "2025-01-01T11:00:00Z") "},'spec':{'nodeName':'node-1',"
		"'containers':[{'name':'job'}]},'status':{'phase':'Succeeded','podIPs':[{'ip':"
		"'10.244.0.9'}],'containerStatuses':[{'name':'job','ready':false,'state':{"
		"'terminated':{'exitCode':0,'reason':'Completed','finishedAt':"
		"'2025-01-01T11:01:00Z'}}}]}}";
	json_t *items = json_array(), *t;

	check_cells("Pod", pod,
		    "['job-abc','0/1','Completed','0','60m','10.244.0.9','node-1','<none>',"
		    "'<none>']");
	json_array_append_new(items, J(pod));
	json_array_append_new(items,
			      J("{" POD_META("bad", "2025-01-01T11:00:00Z") "},'spec':{"
				"'containers':[{'name':'a'}]},'status':{'phase':'Failed',"
				"'containerStatuses':[{'name':'a','state':{'terminated':{"
				"'exitCode':1,'reason':'Error'}}}]}}"));
	t = printers_table("Pod", items, "77", NULL, "None", false, now_ns);
	assert_json(t, "{'kind':'Table','apiVersion':'meta.k8s.io/v1','metadata':{"
		       "'resourceVersion':'77'},'columnDefinitions':null,'rows':["
		       "{'cells':['job-abc','0/1','Completed','0','60m','10.244.0.9','node-1',"
		       "'<none>','<none>'],'conditions':[{'type':'Completed','status':'True',"
		       "'reason':'Succeeded','message':'The pod has completed successfully.'}],"
		       "'object':null},"
		       "{'cells':['bad','0/1','Error','0','60m','<none>','<none>','<none>','<none>'],"
		       "'conditions':[{'type':'Completed','status':'True','reason':'Failed',"
		       "'message':'The pod failed.'}],'object':null}]}");
	json_decref(t);
	json_decref(items);

	/* Completed, but a container still runs: Running when Ready, else NotReady */
	check_cells("Pod",
		    "{" POD_META("half", "2025-01-01T11:00:00Z") "},'spec':{'containers':[{'name':"
		    "'a'},{'name':'b'}]},'status':{'phase':'Running','conditions':[{'type':'Ready',"
		    "'status':'True'}],'containerStatuses':[{'name':'a','state':{'terminated':{"
		    "'exitCode':0,'reason':'Completed'}}},{'name':'b','ready':true,'state':{"
		    "'running':{}}}]}}",
		    "['half','1/2','Running','0','60m','<none>','<none>','<none>','<none>']");
	check_cells("Pod",
		    "{" POD_META("half2", "2025-01-01T11:00:00Z") "},'spec':{'containers':[{'name':"
		    "'a'},{'name':'b'}]},'status':{'phase':'Running','conditions':[{'type':'Ready',"
		    "'status':'False'}],'containerStatuses':[{'name':'a','state':{'terminated':{"
		    "'exitCode':0,'reason':'Completed'}}},{'name':'b','ready':true,'state':{"
		    "'running':{}}}]}}",
		    "['half2','1/2','NotReady','0','60m','<none>','<none>','<none>','<none>']");
}

/* ---- CSR, Lease, Event ------------------------------------------------- */

#define CSR_HEAD(n, user)                                                                          \
	"{'apiVersion':'certificates.k8s.io/v1','kind':'CertificateSigningRequest','metadata':{"  \
	"'name':'" n "','creationTimestamp':'2025-01-01T11:57:50Z'},'spec':{'request':'LS0t',"      \
	"'signerName':'kubernetes.io/kube-apiserver-client-kubelet','username':'" user "',"       \
	"'usages':['digital signature','client auth']"

static void test_csr(void **state)
{
	check_cells("CertificateSigningRequest", CSR_HEAD("csr-pending", "system:node:node-1") "}}",
		    "['csr-pending','2m10s','kubernetes.io/kube-apiserver-client-kubelet',"
		    "'system:node:node-1','<none>','Pending']");
	check_cells("CertificateSigningRequest",
		    CSR_HEAD("csr-issued", "system:bootstrap:abcdef") ",'expirationSeconds':3600},"
		    "'status':{'conditions':[{'type':'Approved','status':'True','reason':"
		    "'AutoApproved','message':'Auto approving kubelet client certificate after "
		    "SubjectAccessReview.'}],'certificate':'LS0tLS1CRUdJTg=='}}",
		    "['csr-issued','2m10s','kubernetes.io/kube-apiserver-client-kubelet',"
		    "'system:bootstrap:abcdef','60m','Approved,Issued']");
	check_cells("CertificateSigningRequest",
		    CSR_HEAD("csr-denied", "alice") ",'expirationSeconds':3600},'status':{"
		    "'conditions':[{'type':'Denied','status':'True','reason':'KubectlDeny'}]}}",
		    "['csr-denied','2m10s','kubernetes.io/kube-apiserver-client-kubelet','alice',"
		    "'60m','Denied']");
	check_cells("CertificateSigningRequest",
		    CSR_HEAD("csr-failed", "bob") ",'expirationSeconds':86400},'status':{"
		    "'conditions':[{'type':'Approved','status':'True'},{'type':'Failed',"
		    "'status':'True'}]}}",
		    "['csr-failed','2m10s','kubernetes.io/kube-apiserver-client-kubelet','bob',"
		    "'24h','Approved,Failed']");
	check_cells("CertificateSigningRequest",
		    "{'kind':'CertificateSigningRequest','metadata':{'name':'old'},'spec':{}}",
		    "['old','<unknown>','<none>','','<none>','Pending']");
}

static void test_lease(void **state)
{
	check_cells("Lease",
		    "{'apiVersion':'coordination.k8s.io/v1','kind':'Lease','metadata':{'name':"
		    "'node-1','namespace':'kube-node-lease','creationTimestamp':"
		    "'2025-01-01T11:59:20Z'},'spec':{'holderIdentity':'node-1',"
		    "'leaseDurationSeconds':40,'renewTime':'2025-01-01T11:59:58.000000Z'}}",
		    "['node-1','node-1','40s']");
	check_cells("Lease",
		    "{'kind':'Lease','metadata':{'name':'free','creationTimestamp':"
		    "'2024-11-02T12:00:00Z'},'spec':{}}",
		    "['free','','60d']");
}

static void test_event(void **state)
{
	check_cells(
		"Event",
		"{'apiVersion':'v1','kind':'Event','metadata':{'name':'web-1.17f3a2b1c0d4e5f6',"
		"'namespace':'default','creationTimestamp':'2025-01-01T11:50:00Z'},"
		"'involvedObject':{'kind':'Pod','namespace':'default','name':'web-1','uid':'u1',"
		"'apiVersion':'v1','fieldPath':'spec.containers{nginx}'},'reason':'Pulled',"
		"'message':'  Successfully pulled image \\'nginx:1.27\\' in 1.2s\\n',"
		"'source':{'component':'kubelet','host':'node-1'},'firstTimestamp':"
		"'2025-01-01T11:50:00Z','lastTimestamp':'2025-01-01T11:55:00Z','count':3,"
		"'type':'Normal','eventTime':null,'reportingComponent':'kubelet',"
		"'reportingInstance':'node-1'}",
		"['5m','Normal','Pulled','pod/web-1','spec.containers{nginx}','kubelet, node-1',"
		"'Successfully pulled image \\'nginx:1.27\\' in 1.2s','10m',3,"
		"'web-1.17f3a2b1c0d4e5f6']");
	/* new-style event: eventTime, series, reporting controller/instance */
	check_cells("Event",
		    "{'apiVersion':'v1','kind':'Event','metadata':{'name':'p.1','namespace':"
		    "'default'},'involvedObject':{'kind':'Pod','name':'p'},'reason':"
		    "'FailedScheduling','message':'0/1 nodes are available','type':'Warning',"
		    "'eventTime':'2025-01-01T11:59:00.000000Z','series':{'count':4,"
		    "'lastObservedTime':'2025-01-01T11:59:30.000000Z'},'reportingComponent':"
		    "'default-scheduler','reportingInstance':'default-scheduler-cube'}",
		    "['30s','Warning','FailedScheduling','pod/p','','default-scheduler, "
		    "default-scheduler-cube','0/1 nodes are available','60s',4,'p.1']");
	/* singleton without host, involved object without a name */
	check_cells("Event",
		    "{'kind':'Event','metadata':{'name':'node-1.x'},'involvedObject':{'kind':"
		    "'Node'},'reason':'NodeReady','message':'Node node-1 status is now: NodeReady',"
		    "'source':{'component':'kubelet'},'firstTimestamp':'2025-01-01T11:00:00Z',"
		    "'type':'Normal'}",
		    "['60m','Normal','NodeReady','node','','kubelet','Node node-1 status is now: "
		    "NodeReady','60m',1,'node-1.x']");
	/* events.k8s.io/v1 spelling */
	check_cells("Event",
		    "{'apiVersion':'events.k8s.io/v1','kind':'Event','metadata':{'name':'e'},"
		    "'regarding':{'kind':'Node','name':'node-1'},'note':'Rebooted','reason':"
		    "'Rebooted','type':'Warning','deprecatedSource':{'component':'kubelet',"
		    "'host':'node-1'},'deprecatedFirstTimestamp':'2025-01-01T10:00:00Z',"
		    "'deprecatedLastTimestamp':'2025-01-01T11:00:00Z','deprecatedCount':2}",
		    "['60m','Warning','Rebooted','node/node-1','','kubelet, node-1','Rebooted',"
		    "'120m',2,'e']");
}

/* ---- apps -------------------------------------------------------------- */

static void test_deployment(void **state)
{
	check_cells(
		"Deployment",
		"{'apiVersion':'apps/v1','kind':'Deployment','metadata':{'name':'web','namespace':"
		"'default','creationTimestamp':'2024-12-31T12:00:00Z','generation':2},'spec':{"
		"'replicas':3,'selector':{'matchLabels':{'tier':'frontend','app':'web'},"
		"'matchExpressions':[{'key':'env','operator':'In','values':['prod','canary']},"
		"{'key':'legacy','operator':'DoesNotExist'},{'key':'track','operator':'NotIn',"
		"'values':['beta']},{'key':'zone','operator':'Exists'}]},'template':{'metadata':{"
		"'labels':{'app':'web','tier':'frontend','env':'prod'}},'spec':{'containers':["
		"{'name':'nginx','image':'nginx:1.27'},{'name':'log','image':'busybox:1.36'}]}}},"
		"'status':{'replicas':3,'updatedReplicas':3,'readyReplicas':2,"
		"'availableReplicas':2}}",
		"['web','2/3',3,2,'24h','nginx,log','nginx:1.27,busybox:1.36',"
		"'app=web,env in (canary,prod),!legacy,tier=frontend,track notin (beta),zone']");
	/* fresh: no status yet; a selector upstream cannot convert prints <invalid> */
	check_cells("Deployment",
		    "{'kind':'Deployment','metadata':{'name':'new','creationTimestamp':"
		    "'2025-01-01T11:59:59Z'},'spec':{'selector':{'matchExpressions':[{'key':'a',"
		    "'operator':'Near','values':['b']}]},'template':{'spec':{'containers':[{'name':"
		    "'c','image':'i'}]}}}}",
		    "['new','0/1',0,0,'1s','c','i','<invalid>']");
}

static void test_replicaset(void **state)
{
	check_cells("ReplicaSet",
		    "{'apiVersion':'apps/v1','kind':'ReplicaSet','metadata':{'name':'web-5d4f8c',"
		    "'namespace':'default','creationTimestamp':'2024-12-31T12:00:00Z',"
		    "'ownerReferences':[{'kind':'Deployment','name':'web','controller':true}]},"
		    "'spec':{'replicas':3,'selector':{'matchLabels':{'pod-template-hash':'5d4f8c',"
		    "'app':'web'}},'template':{'spec':{'containers':[{'name':'nginx','image':"
		    "'nginx:1.27'}]}}},'status':{'replicas':3,'fullyLabeledReplicas':3,"
		    "'readyReplicas':2,'availableReplicas':2}}",
		    "['web-5d4f8c',3,3,2,'24h','nginx','nginx:1.27',"
		    "'app=web,pod-template-hash=5d4f8c']");
	/* empty selector → <none>; unconvertible → <error> */
	check_cells("ReplicaSet",
		    "{'kind':'ReplicaSet','metadata':{'name':'empty','creationTimestamp':"
		    "'2024-12-31T12:00:00Z'},'spec':{'replicas':0,'selector':{},'template':{'spec':"
		    "{'containers':[]}}}}",
		    "['empty',0,0,0,'24h','','','<none>']");
	check_cells("ReplicaSet",
		    "{'kind':'ReplicaSet','metadata':{'name':'bad'},'spec':{'selector':{"
		    "'matchExpressions':[{'key':'a','operator':'In','values':[]}]}}}",
		    "['bad',1,0,0,'<unknown>','','','<error>']");
}

static void test_other_workloads(void **state)
{
	check_cells("DaemonSet",
		    "{'kind':'DaemonSet','metadata':{'name':'kube-proxy','creationTimestamp':"
		    "'2024-12-25T12:00:00Z'},'spec':{'selector':{'matchLabels':{'k8s-app':"
		    "'kube-proxy'}},'template':{'spec':{'nodeSelector':{'kubernetes.io/os':'linux'},"
		    "'containers':[{'name':'kube-proxy','image':'registry.k8s.io/kube-proxy:v1.32.0'"
		    "}]}}},'status':{'desiredNumberScheduled':3,'currentNumberScheduled':3,"
		    "'numberReady':2,'updatedNumberScheduled':3,'numberAvailable':2}}",
		    "['kube-proxy',3,3,2,3,2,'kubernetes.io/os=linux','7d','kube-proxy',"
		    "'registry.k8s.io/kube-proxy:v1.32.0','k8s-app=kube-proxy']");
	check_cells("DaemonSet",
		    "{'kind':'DaemonSet','metadata':{'name':'ds','creationTimestamp':"
		    "'2024-12-25T06:00:00Z'},'spec':{'template':{'spec':{'containers':[]}}}}",
		    "['ds',0,0,0,0,0,'<none>','7d6h','','','<none>']");
	check_cells("StatefulSet",
		    "{'kind':'StatefulSet','metadata':{'name':'db','creationTimestamp':"
		    "'2023-01-02T12:00:00Z'},'spec':{'replicas':3,'template':{'spec':{'containers':"
		    "[{'name':'pg','image':'postgres:17'}]}}},'status':{'readyReplicas':1}}",
		    "['db','1/3','2y','pg','postgres:17']");
}

/* ---- core kinds -------------------------------------------------------- */

static void test_core_kinds(void **state)
{
	check_cells("Namespace",
		    "{'kind':'Namespace','metadata':{'name':'kube-system','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'status':{'phase':'Active'}}",
		    "['kube-system','Active','16h']");
	check_cells("Service",
		    "{'kind':'Service','metadata':{'name':'kubernetes','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'spec':{'type':'ClusterIP','clusterIP':'10.96.0.1',"
		    "'clusterIPs':['10.96.0.1'],'ports':[{'name':'https','port':443,'protocol':"
		    "'TCP','targetPort':6443}]}}",
		    "['kubernetes','ClusterIP','10.96.0.1','<none>','443/TCP','16h','<none>']");
	check_cells("Service",
		    "{'kind':'Service','metadata':{'name':'web','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'spec':{'type':'NodePort','clusterIP':'10.96.3.4',"
		    "'externalIPs':['198.51.100.1'],'selector':{'tier':'fe','app':'web'},'ports':["
		    "{'port':80,'nodePort':30080,'protocol':'TCP'},{'port':53,'protocol':'UDP'}]}}",
		    "['web','NodePort','10.96.3.4','198.51.100.1','80:30080/TCP,53/UDP','16h',"
		    "'app=web,tier=fe']");
	check_cells("Service",
		    "{'kind':'Service','metadata':{'name':'lb'},'spec':{'type':'LoadBalancer',"
		    "'clusterIPs':['10.96.9.9'],'ports':[{'port':80,'nodePort':31000}]},"
		    "'status':{'loadBalancer':{}}}",
		    "['lb','LoadBalancer','10.96.9.9','<pending>','80:31000/TCP','<unknown>',"
		    "'<none>']");
	check_cells("Service",
		    "{'kind':'Service','metadata':{'name':'lb2'},'spec':{'type':'LoadBalancer',"
		    "'clusterIP':'None','externalIPs':['198.51.100.9']},'status':{'loadBalancer':"
		    "{'ingress':[{'ip':'203.0.113.9'},{'hostname':'lb.example.com'}]}}}",
		    "['lb2','LoadBalancer','None','203.0.113.9,lb.example.com,198.51.100.9',"
		    "'<none>','<unknown>','<none>']");
	check_cells("Endpoints",
		    "{'kind':'Endpoints','metadata':{'name':'web','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'subsets':[{'addresses':[{'ip':'10.244.0.5'},{'ip':"
		    "'10.244.0.6'},{'ip':'fd00::7'}],'ports':[{'name':'http','port':80},{'name':"
		    "'m','port':9090}]}]}",
		    "['web','10.244.0.5:80,10.244.0.6:80,[fd00::7]:80 + 3 more...','16h']");
	check_cells("Endpoints", "{'kind':'Endpoints','metadata':{'name':'none'},'subsets':[]}",
		    "['none','<none>','<unknown>']");
	check_cells("Endpoints",
		    "{'kind':'Endpoints','metadata':{'name':'headless'},'subsets':[{'addresses':["
		    "{'ip':'10.244.0.5'}]}]}",
		    "['headless','10.244.0.5','<unknown>']");
	check_cells("EndpointSlice",
		    "{'kind':'EndpointSlice','metadata':{'name':'web-abc12','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'addressType':'IPv4','ports':[{'name':'http','port':"
		    "80,'protocol':'TCP'},{'name':'named'},{}],'endpoints':[{'addresses':"
		    "['10.244.0.5']},{'addresses':['10.244.0.6']},{'addresses':['10.244.0.7']},"
		    "{'addresses':['10.244.0.8']}]}",
		    "['web-abc12','IPv4','80,named,*','10.244.0.5,10.244.0.6,10.244.0.7 + 1 "
		    "more...','16h']");
	check_cells("EndpointSlice",
		    "{'kind':'EndpointSlice','metadata':{'name':'empty'},'addressType':'IPv6'}",
		    "['empty','IPv6','<unset>','<unset>','<unknown>']");
	check_cells("ConfigMap",
		    "{'kind':'ConfigMap','metadata':{'name':'kube-root-ca.crt','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'data':{'ca.crt':'x'},'binaryData':{'b':'AA=='}}",
		    "['kube-root-ca.crt',2,'16h']");
	check_cells("Secret",
		    "{'kind':'Secret','metadata':{'name':'tls','creationTimestamp':"
		    "'2024-12-31T20:00:00Z'},'type':'kubernetes.io/tls','data':{'tls.crt':'eA==',"
		    "'tls.key':'eA=='}}",
		    "['tls','kubernetes.io/tls',2,'16h']");
	check_cells("Secret", "{'kind':'Secret','metadata':{'name':'s'}}",
		    "['s','Opaque',0,'<unknown>']");
}

/* ---- AGE --------------------------------------------------------------- */

static void test_age(void **state)
{
	static const struct {
		const char *created, *age;
	} cases[] = {
		{"2025-01-01T12:00:00Z", "0s"},
		{"2025-01-01T12:00:01Z", "0s"},
		{"2025-01-01T12:00:05Z", "<invalid>"},
		{"2025-01-01T11:58:01Z", "119s"},
		{"2025-01-01T11:58:00Z", "2m"},
		{"2025-01-01T11:50:01Z", "9m59s"},
		{"2025-01-01T11:50:00Z", "10m"},
		{"2025-01-01T09:00:01Z", "179m"},
		{"2025-01-01T09:00:00Z", "3h"},
		{"2025-01-01T04:01:00Z", "7h59m"},
		{"2024-12-30T12:00:01Z", "47h"},
		{"2024-12-30T12:00:00Z", "2d"},
		{"2024-12-25T00:00:00Z", "7d12h"},
		{"2024-12-24T12:00:00Z", "8d"},
		{"2023-01-03T12:00:00Z", "729d"},
		{"2023-01-02T12:00:00Z", "2y"},
		{"2022-01-01T12:00:00Z", "3y1d"},
		{"2021-12-01T12:00:00Z", "3y32d"},
		{"2015-01-01T12:00:00Z", "10y"},
		{"2025-01-01T11:59:30.999999+00:00", "29s"},
		{"2025-01-01T12:59:00+01:00", "60s"},
		{"garbage", "<unknown>"},
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *o, *cells;
		snprintf(buf, sizeof(buf), "{'metadata':{'name':'x','creationTimestamp':'%s'}}",
			 cases[i].created);
		o = J(buf);
		cells = printers_cells("PriorityClass", o, now_ns);
		assert_string_equal(json_string_value(json_array_get(cells, 1)), cases[i].age);
		json_decref(cells);
		json_decref(o);
	}
	check_cells("PriorityClass", "{'metadata':{'name':'nothing'}}", "['nothing','<unknown>']");
	check_cells("Widget", "{'metadata':{}}", "['','<unknown>']");
	/* printRole: the creation time itself, RFC 3339 */
	check_cells("Role", "{'metadata':{'name':'r','creationTimestamp':'2025-01-01T11:00:00Z'}}",
		    "['r','2025-01-01T11:00:00Z']");
	/* printRoleBinding: kind/name; users, groups, ns/name of service accounts */
	check_cells("ClusterRoleBinding",
		    "{'metadata':{'name':'b','creationTimestamp':'2025-01-01T11:00:00Z'},"
		    "'roleRef':{'kind':'ClusterRole','name':'view'},'subjects':["
		    "{'kind':'User','name':'alice'},{'kind':'User','name':'bob'},"
		    "{'kind':'Group','name':'devs'},"
		    "{'kind':'ServiceAccount','name':'robot','namespace':'ops'}]}",
		    "['b','ClusterRole/view','60m','alice, bob','devs','ops/robot']");
}

/* ---- envelope ---------------------------------------------------------- */

static const char lease_obj[] =
	"{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'node-1',"
	"'namespace':'kube-node-lease','uid':'u-1','resourceVersion':'41','creationTimestamp':"
	"'2025-01-01T11:59:20Z','labels':{'a':'b'},'managedFields':[{'manager':'kubelet',"
	"'operation':'Update'}]},'spec':{'holderIdentity':'node-1'}}";

static void test_table_envelope(void **state)
{
	json_t *items = json_array(), *t, *cols;

	json_array_append_new(items, J(lease_obj));
	t = printers_table("Lease", items, "1221", "MQ==", NULL, true, now_ns);
	cols = printers_columns("Lease");
	assert_true(json_equal(json_object_get(t, "columnDefinitions"), cols));
	json_decref(cols);
	json_object_del(t, "columnDefinitions");
	assert_json(t, "{'kind':'Table','apiVersion':'meta.k8s.io/v1','metadata':{"
		       "'resourceVersion':'1221','continue':'MQ=='},'rows':[{'cells':['node-1',"
		       "'node-1','40s'],'object':{'kind':'PartialObjectMetadata','apiVersion':"
		       "'meta.k8s.io/v1','metadata':{'name':'node-1','namespace':'kube-node-lease',"
		       "'uid':'u-1','resourceVersion':'41','creationTimestamp':"
		       "'2025-01-01T11:59:20Z','labels':{'a':'b'}}}}]}");
	json_decref(t);

	/* a later watch event: no headers, no continue, no RV when empty */
	t = printers_table("Lease", items, "", "", "Metadata", false, now_ns);
	assert_true(json_is_null(json_object_get(t, "columnDefinitions")));
	assert_json(json_object_get(t, "metadata"), "{}");
	json_decref(t);

	/* Object: the full object itself, managedFields and all */
	t = printers_table("Lease", items, "5", NULL, "Object", true, now_ns);
	assert_ptr_equal(json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object"),
			 json_array_get(items, 0));
	json_decref(t);

	/* None: object is null */
	t = printers_table("Lease", items, "5", NULL, "None", true, now_ns);
	assert_true(json_is_null(
		json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object")));
	json_decref(t);
	json_decref(items);

	/* empty list: rows is [], not null */
	items = json_array();
	t = printers_table("Pod", items, "9", NULL, NULL, false, now_ns);
	assert_json(t, "{'kind':'Table','apiVersion':'meta.k8s.io/v1','metadata':{"
		       "'resourceVersion':'9'},'columnDefinitions':null,'rows':[]}");
	json_decref(t);
	json_decref(items);
}

static void test_row_object(void **state)
{
	json_t *o = J(lease_obj), *r;

	r = printers_row_object(o, NULL);
	assert_json(r, "{'kind':'PartialObjectMetadata','apiVersion':'meta.k8s.io/v1','metadata':{"
		       "'name':'node-1','namespace':'kube-node-lease','uid':'u-1','resourceVersion':"
		       "'41','creationTimestamp':'2025-01-01T11:59:20Z','labels':{'a':'b'}}}");
	json_decref(r);
	/* the source keeps its managedFields */
	assert_non_null(json_object_get(json_object_get(o, "metadata"), "managedFields"));
	r = printers_row_object(o, "Object");
	assert_ptr_equal(r, o);
	json_decref(r);
	assert_null(printers_row_object(o, "None"));
	json_decref(o);

	o = J("{'kind':'Thing'}");
	r = printers_row_object(o, "Metadata");
	assert_json(r, "{'kind':'PartialObjectMetadata','apiVersion':'meta.k8s.io/v1',"
		       "'metadata':{}}");
	json_decref(r);
	json_decref(o);
}

static void test_include_parse(void **state)
{
	const char *out = NULL;

	assert_int_equal(printers_include_parse(NULL, &out), 0);
	assert_string_equal(out, "Metadata");
	assert_int_equal(printers_include_parse("", &out), 0);
	assert_string_equal(out, "Metadata");
	assert_int_equal(printers_include_parse("Metadata", &out), 0);
	assert_string_equal(out, "Metadata");
	assert_int_equal(printers_include_parse("Object", &out), 0);
	assert_string_equal(out, "Object");
	assert_int_equal(printers_include_parse("None", &out), 0);
	assert_string_equal(out, "None");

	assert_int_equal(printers_include_parse("Everything", &out), ERR_INVALID);
	assert_string_equal(err_msg(), "Unable to convert to Table as requested: includeObject: "
				       "Invalid value: \"Everything\": must be 'Metadata', 'Object', "
				       "'None', or empty");
	assert_int_equal(printers_include_parse("object", &out), ERR_INVALID);
	assert_int_equal(printers_include_parse("a\"b\\\n", &out), ERR_INVALID);
	assert_string_equal(err_msg(), "Unable to convert to Table as requested: includeObject: "
				       "Invalid value: \"a\\\"b\\\\\\n\": must be 'Metadata', "
				       "'Object', 'None', or empty");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_columns),
		cmocka_unit_test(test_node_ready_with_roles),
		cmocka_unit_test(test_node_not_ready),
		cmocka_unit_test(test_node_unknown_cordoned),
		cmocka_unit_test(test_pod_running),
		cmocka_unit_test(test_pod_pending_unscheduled),
		cmocka_unit_test(test_pod_terminating),
		cmocka_unit_test(test_pod_crashloop_restarts),
		cmocka_unit_test(test_pod_init),
		cmocka_unit_test(test_pod_completed),
		cmocka_unit_test(test_csr),
		cmocka_unit_test(test_lease),
		cmocka_unit_test(test_event),
		cmocka_unit_test(test_deployment),
		cmocka_unit_test(test_replicaset),
		cmocka_unit_test(test_other_workloads),
		cmocka_unit_test(test_core_kinds),
		cmocka_unit_test(test_age),
		cmocka_unit_test(test_table_envelope),
		cmocka_unit_test(test_row_object),
		cmocka_unit_test(test_include_parse),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
