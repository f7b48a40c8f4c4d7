#!/usr/bin/env python3
"""Generate authz_matrix.json: upstream 1.32's authorization decisions for the
built-in identities over every resource and subresource cube serves.

    authz_matrix_gen.py --policy DIR --kubeconfig admin.conf > authz_matrix.json

DIR holds upstream's bootstrap policy as kubernetes/kubernetes keeps it in
plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata (cluster-roles.yaml,
cluster-role-bindings.yaml, controller-roles.yaml,
controller-role-bindings.yaml, namespace-roles.yaml,
namespace-role-bindings.yaml) at v1.32.0, plus kubeadm's three bindings.
The resources come from a running cube's discovery (--kubeconfig), the
decisions from that policy alone, evaluated here:

  - system:masters is allowed everything (upstream's privileged group);
  - for system:node:<name>, upstream's Node authorizer (1.32,
    AuthorizeNodeWithSelectors on) first, for requests that name no object:
    plugin/pkg/auth/authorizer/node/node_authorizer.go, transcribed below;
  - then RBAC: a ClusterRoleBinding, or a RoleBinding of the namespace, whose
    subject is the user, a group of it or its service account, to a role
    with a rule matching verb, group and resource (RuleAllows).

Aggregated roles (admin, edit, view) get the union of the roles their
selectors match, as the aggregation controller makes them.
"""

import argparse
import json
import subprocess
import sys

import yaml

VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
NS = "default"

IDENTITIES = {
    "admin": ("kubernetes-admin", ["system:masters", "system:authenticated"]),
    "scheduler": ("system:kube-scheduler", ["system:authenticated"]),
    "controller-manager": ("system:kube-controller-manager", ["system:authenticated"]),
    "node": ("system:node:matrix-node", ["system:nodes", "system:authenticated"]),
    "bootstrap-token": ("system:bootstrap:abcdef",
                        ["system:bootstrappers",
                         "system:bootstrappers:kubeadm:default-node-token",
                         "system:authenticated"]),
    "anonymous": ("system:anonymous", ["system:unauthenticated"]),
    "viewer": ("viewer", ["system:authenticated"]),
    "replicaset-controller": ("system:serviceaccount:kube-system:replicaset-controller",
                              ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                               "system:authenticated"]),
}

KUBEADM = [
    ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper",
     [{"kind": "Group", "name": "system:bootstrappers:kubeadm:default-node-token"}]),
    ("kubeadm:node-autoapprove-bootstrap",
     "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
     [{"kind": "Group", "name": "system:bootstrappers:kubeadm:default-node-token"}]),
    ("kubeadm:node-autoapprove-certificate-rotation",
     "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
     [{"kind": "Group", "name": "system:nodes"}]),
    # The test binds the viewer itself.
    ("viewer-view", "view", [{"kind": "User", "name": "viewer"}]),
]


def items(path):
    with open(path) as f:
        return yaml.safe_load(f)["items"]


def load_policy(d):
    roles = {r["metadata"]["name"]: r for r in
             items(f"{d}/cluster-roles.yaml") + items(f"{d}/controller-roles.yaml")}
    for r in roles.values():
        agg = r.get("aggregationRule")
        if not agg:
            continue
        rules = []
        for sel in agg["clusterRoleSelectors"]:
            want = sel["matchLabels"]
            for name in sorted(roles):
                labels = roles[name]["metadata"].get("labels") or {}
                if name != r["metadata"]["name"] and \
                        all(labels.get(k) == v for k, v in want.items()):
                    for rule in roles[name].get("rules") or []:
                        if rule not in rules:
                            rules.append(rule)
        r["rules"] = rules
    bindings = [(b["roleRef"]["name"], b.get("subjects") or [], None) for b in
                items(f"{d}/cluster-role-bindings.yaml") +
                items(f"{d}/controller-role-bindings.yaml")]
    bindings += [(role, subs, None) for _, role, subs in KUBEADM]
    ns_roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r
                for r in items(f"{d}/namespace-roles.yaml")}
    ns_bindings = [(b["metadata"]["namespace"], b["roleRef"]["name"], b.get("subjects") or [])
                   for b in items(f"{d}/namespace-role-bindings.yaml")]
    return roles, bindings, ns_roles, ns_bindings


def subject_matches(s, user, groups):
    if s["kind"] == "User":
        return s["name"] == user
    if s["kind"] == "Group":
        return s["name"] in groups
    if s["kind"] == "ServiceAccount":
        return user == f"system:serviceaccount:{s.get('namespace', '')}:{s['name']}"
    return False


def rule_allows(rule, verb, group, resource, sub):
    full = f"{resource}/{sub}" if sub else resource
    if "*" not in rule.get("verbs", []) and verb not in rule.get("verbs", []):
        return False
    if "nonResourceURLs" in rule and "resources" not in rule:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    res = rule.get("resources") or []
    ok = "*" in res or full in res or (sub and f"*/{sub}" in res)
    # resourceNames restrict to named objects: never a collection request.
    return ok and not rule.get("resourceNames")


def rbac(policy, user, groups, verb, group, resource, sub, ns):
    roles, bindings, ns_roles, ns_bindings = policy
    for role, subs, _ in bindings:
        if any(subject_matches(s, user, groups) for s in subs) and role in roles:
            if any(rule_allows(r, verb, group, resource, sub)
                   for r in roles[role].get("rules") or []):
                return True
    for bns, role, subs in ns_bindings:
        if ns and bns == ns and any(subject_matches(s, user, groups) for s in subs):
            r = ns_roles.get((bns, role))
            if r and any(rule_allows(x, verb, group, resource, sub) for x in r["rules"]):
                return True
    return False


def node_authorizer(policy, verb, group, resource, sub, ns):
    """True / False for a decision, None for no opinion (then RBAC)."""
    roles = policy[0]
    gr = (group, resource)
    if gr in (("", "secrets"), ("", "configmaps"), ("", "persistentvolumes"),
              ("resource.k8s.io", "resourceclaims"), ("storage.k8s.io", "volumeattachments"),
              ("", "serviceaccounts"), ("", "persistentvolumeclaims")):
        return None  # each needs a named, related object: no opinion on a collection
    if gr == ("coordination.k8s.io", "leases"):
        return True if verb == "create" and ns == "kube-node-lease" else None
    if gr == ("storage.k8s.io", "csinodes"):
        return True if verb == "create" and not sub else None
    if gr == ("resource.k8s.io", "resourceslices"):
        return True if verb == "create" and not sub else None
    if gr == ("", "nodes"):
        if not sub and verb in ("create", "update", "patch"):
            return True
        if sub == "status" and verb in ("update", "patch"):
            return True
        return None
    if gr == ("", "pods"):
        if not sub and verb in ("create", "delete"):
            return True
        if sub == "status" and verb in ("update", "patch"):
            return True
        if sub == "eviction" and verb == "create":
            return True
        return None
    # Not subdivided: the static node rules (upstream's NodeRules, the
    # system:node role's).
    if any(rule_allows(r, verb, group, resource, sub) for r in roles["system:node"]["rules"]):
        return True
    return None


def decide(policy, who, verb, group, resource, sub, ns):
    user, groups = IDENTITIES[who]
    if "system:masters" in groups:
        return True
    if user.startswith("system:node:") and "system:nodes" in groups:
        if node_authorizer(policy, verb, group, resource, sub, ns):
            return True
    return rbac(policy, user, groups, verb, group, resource, sub, ns)


def namespaces_for(r):
    """Where a cell is asked: leases also in the node lease namespace."""
    if not r["namespaced"]:
        return [""]
    return [NS, "kube-node-lease"] if r["resource"] == "leases" else [NS]


def cell_name(verb, r, ns):
    sub = "/" + r["subresource"] if r["subresource"] else ""
    return f"{verb} {r['group']}/{r['resource']}{sub}{' in ' + ns if ns else ''}"


def discover_with(get):
    """Every resource and subresource a server serves; get(path) -> JSON."""
    paths = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}"
                           for g in get("/apis")["groups"]]
    out = []
    for p in paths:
        lst = get(p)
        group = lst["groupVersion"].split("/")[0] if "/" in lst["groupVersion"] else ""
        for r in lst["resources"]:
            res, _, sub = r["name"].partition("/")
            out.append({"group": group, "resource": res, "subresource": sub,
                        "namespaced": r["namespaced"], "verbs": sorted(r["verbs"])})
    return sorted(out, key=lambda r: (r["group"], r["resource"], r["subresource"]))


def discover(kubeconfig):
    def raw(path):
        out = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "get", "--raw", path],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)
    return discover_with(raw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--kubeconfig", required=True)
    a = ap.parse_args()
    policy = load_policy(a.policy)
    resources = discover(a.kubeconfig)
    allowed = {}
    for who in IDENTITIES:
        cells = []
        for r in resources:
            for ns in namespaces_for(r):
                for verb in VERBS:
                    if decide(policy, who, verb, r["group"], r["resource"], r["subresource"],
                              ns):
                        cells.append(cell_name(verb, r, ns))
        allowed[who] = cells
    json.dump({"source": "upstream v1.32.0 bootstrap policy testdata + node_authorizer.go; "
                         "generated by tests/e2e/authz_matrix_gen.py",
               "identities": {k: {"user": u, "groups": g} for k, (u, g) in IDENTITIES.items()},
               "verbs": VERBS, "resources": resources, "allowed": allowed},
              sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
