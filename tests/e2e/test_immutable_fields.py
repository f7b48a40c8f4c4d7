"""Immutable fields of kinds other than pods, through real kubectl.

Upstream 1.32's update validation (ValidateStatefulSetUpdate, the apps/v1
strategies' selector rule, ValidateConfigMapUpdate, ...) refuses these
updates with 422 Invalid; kubectl prints `The <Kind> "<name>" is invalid:
<field>: <reason>: <detail>` and exits 1, and the stored object is left as
it was.
"""

import json

import pytest

KUBECTL = "/usr/bin/kubectl"

STS_FORBIDDEN = ("spec: Forbidden: updates to statefulset spec for fields other "
                 "than 'replicas', 'ordinals', 'template', 'updateStrategy', "
                 "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                 "forbidden")


@pytest.fixture(scope="module")
def server(make_apiserver, tmp_path_factory):
    s = make_apiserver(tmp_path_factory.mktemp("apiserver"))
    yield s
    rc = s.stop()
    assert rc == 0, f"cube apiserver exited {rc} on SIGTERM\n{s.log()[-3000:]}"


@pytest.fixture
def kubectl(run, server):
    def _kubectl(*args, check=True, input=None):
        if isinstance(input, (dict, list)):
            input = json.dumps(input)
        return run(KUBECTL, *args, check=check, input=input,
                   env={"KUBECONFIG": server.admin_conf})
    return _kubectl


def get(kubectl, *what):
    return json.loads(kubectl("get", *what, "-o", "json").stdout)


def test_statefulset_claim_templates_are_fixed(kubectl, server):
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "web", "namespace": "default"},
           "spec": {"serviceName": "web", "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "nginx",
                                                          "image": "nginx"}]}},
                    "volumeClaimTemplates": [{
                        "metadata": {"name": "www"},
                        "spec": {"accessModes": ["ReadWriteOnce"],
                                 "resources": {"requests": {"storage": "1Gi"}}}}]}}
    kubectl("create", "-f", "-", input=sts)
    before = get(kubectl, "statefulset", "web")["spec"]
    r = kubectl("patch", "statefulset", "web", "--type=json", "-p",
                '[{"op":"replace","path":"/spec/volumeClaimTemplates/0/spec/resources/'
                'requests/storage","value":"2Gi"}]', check=False)
    assert r.returncode == 1, r
    assert f'The StatefulSet "web" is invalid: {STS_FORBIDDEN}' in r.stderr, r.stderr
    r = kubectl("patch", "statefulset", "web", "-p",
                '{"spec":{"serviceName":"other"}}', check=False)
    assert r.returncode == 1 and STS_FORBIDDEN in r.stderr, r.stderr
    assert get(kubectl, "statefulset", "web")["spec"] == before
    # What upstream lets change does.
    kubectl("patch", "statefulset", "web", "-p",
            '{"spec":{"replicas":0,"minReadySeconds":5}}')
    spec = get(kubectl, "statefulset", "web")["spec"]
    assert spec["replicas"] == 0 and spec["minReadySeconds"] == 5, spec

    # The Status as clients decode it: 422 Invalid, one cause for "spec".
    r = server.request("PATCH", "/apis/apps/v1/namespaces/default/statefulsets/web",
                       '{"spec":{"podManagementPolicy":"Parallel"}}',
                       content_type="application/merge-patch+json")
    st = json.loads(r.body)
    assert r.status == 422 and st["reason"] == "Invalid", st
    assert st["details"]["causes"] == [{
        "reason": "FieldValueForbidden", "field": "spec",
        "message": STS_FORBIDDEN[len("spec: "):]}], st


def test_deployment_selector_and_immutable_configmap(kubectl):
    kubectl("create", "deployment", "web", "--image=nginx")
    r = kubectl("patch", "deployment", "web", "-p",
                '{"spec":{"selector":{"matchLabels":{"app":"web2"}},'
                '"template":{"metadata":{"labels":{"app":"web2"}}}}}', check=False)
    assert r.returncode == 1, r
    assert ('The Deployment "web" is invalid: spec.selector: Invalid value: '
            'v1.LabelSelector{MatchLabels:map[string]string{"app":"web2"}, '
            'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is '
            'immutable') in r.stderr, r.stderr

    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "frozen", "namespace": "default"},
          "immutable": True, "data": {"a": "1"}}
    kubectl("create", "-f", "-", input=cm)
    r = kubectl("patch", "configmap", "frozen", "-p", '{"data":{"a":"2"}}',
                check=False)
    assert r.returncode == 1, r
    assert ('The ConfigMap "frozen" is invalid: data: Forbidden: field is '
            'immutable when `immutable` is set') in r.stderr, r.stderr
    r = kubectl("patch", "configmap", "frozen", "-p", '{"immutable":false}',
                check=False)
    assert ('immutable: Forbidden: field is immutable when `immutable` is set'
            in r.stderr), r.stderr
    assert get(kubectl, "configmap", "frozen")["data"] == {"a": "1"}
    kubectl("label", "configmap", "frozen", "tier=x")
