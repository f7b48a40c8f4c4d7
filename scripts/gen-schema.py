#!/usr/bin/env python3
"""gen-schema.py — write src/api/schema_data.c, the schema of every kind cube serves.

The schema is wire data: for each message, its fields' JSON names, protobuf
numbers, types, and whether Go holds them as pointers (on the protobuf wire
only when set), omits them when empty, or inlines them into the parent's JSON.
It is read from upstream's sources at one tag:

  - generated.proto (kubernetes/api and kubernetes/apimachinery): messages,
    field numbers, scalar/message/map/repeated types;
  - the Go types (types.go and friends): pointer, omitempty, json ",inline",
    which messages are Go named slices (ExtraValue: a JSON array), and the
    strategic merge patch tags (patchStrategy, patchMergeKey).

Only names, numbers and types are taken, no text. Regenerate after fetching
both repositories (the tool library's `fetch`):

  scripts/gen-schema.py /work/.mirror/kubernetes+api/repo \\
      /work/.mirror/kubernetes+apimachinery/repo v0.32.0 > src/api/schema_data.c

With --vectors DIR it also copies kubernetes/api's round-trip fixtures of
those kinds (testdata/HEAD/<group>.<version>.<Kind>.{pb,json}: every field
set, the protobuf and JSON forms of one object) into DIR, for
tests/unit/test_schema.c.
"""

import re
import subprocess
import sys

# (repository index, package directory, proto package) read for messages.
PACKAGES = [
    (1, "pkg/apis/meta/v1", "k8s.io.apimachinery.pkg.apis.meta.v1"),
    (1, "pkg/api/resource", "k8s.io.apimachinery.pkg.api.resource"),
    (1, "pkg/util/intstr", "k8s.io.apimachinery.pkg.util.intstr"),
    (1, "pkg/runtime", "k8s.io.apimachinery.pkg.runtime"),
    (0, "core/v1", "k8s.io.api.core.v1"),
    (0, "apps/v1", "k8s.io.api.apps.v1"),
    (0, "batch/v1", "k8s.io.api.batch.v1"),
    (0, "autoscaling/v1", "k8s.io.api.autoscaling.v1"),
    (0, "certificates/v1", "k8s.io.api.certificates.v1"),
    (0, "coordination/v1", "k8s.io.api.coordination.v1"),
    (0, "discovery/v1", "k8s.io.api.discovery.v1"),
    (0, "authentication/v1", "k8s.io.api.authentication.v1"),
    (0, "authorization/v1", "k8s.io.api.authorization.v1"),
    (0, "policy/v1", "k8s.io.api.policy.v1"),
    (0, "rbac/v1", "k8s.io.api.rbac.v1"),
]

# (apiVersion, kind, message): the roots. apiVersion None: any group
# (DeleteOptions is registered in every group).
KINDS = [
    ("v1", "Namespace", "core.v1.Namespace"),
    ("v1", "Node", "core.v1.Node"),
    ("v1", "Pod", "core.v1.Pod"),
    ("v1", "Binding", "core.v1.Binding"),
    ("v1", "Event", "core.v1.Event"),
    ("v1", "Secret", "core.v1.Secret"),
    ("v1", "ConfigMap", "core.v1.ConfigMap"),
    ("v1", "Service", "core.v1.Service"),
    ("v1", "Endpoints", "core.v1.Endpoints"),
    ("v1", "ServiceAccount", "core.v1.ServiceAccount"),
    ("apps/v1", "Deployment", "apps.v1.Deployment"),
    ("apps/v1", "ReplicaSet", "apps.v1.ReplicaSet"),
    ("apps/v1", "StatefulSet", "apps.v1.StatefulSet"),
    ("apps/v1", "ControllerRevision", "apps.v1.ControllerRevision"),
    ("apps/v1", "DaemonSet", "apps.v1.DaemonSet"),
    ("batch/v1", "Job", "batch.v1.Job"),
    ("autoscaling/v1", "Scale", "autoscaling.v1.Scale"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest",
     "certificates.v1.CertificateSigningRequest"),
    ("coordination.k8s.io/v1", "Lease", "coordination.v1.Lease"),
    ("discovery.k8s.io/v1", "EndpointSlice", "discovery.v1.EndpointSlice"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "authentication.v1.SelfSubjectReview"),
    ("authentication.k8s.io/v1", "TokenRequest", "authentication.v1.TokenRequest"),
    ("authentication.k8s.io/v1", "TokenReview", "authentication.v1.TokenReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "authorization.v1.SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview",
     "authorization.v1.LocalSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview",
     "authorization.v1.SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview",
     "authorization.v1.SelfSubjectRulesReview"),
    ("policy/v1", "Eviction", "policy.v1.Eviction"),
    ("rbac.authorization.k8s.io/v1", "Role", "rbac.v1.Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "rbac.v1.ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rbac.v1.RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "rbac.v1.ClusterRoleBinding"),
    (None, "DeleteOptions", "meta.v1.DeleteOptions"),
]

# Messages whose JSON is not an object of their fields.
SPECIAL = {
    "meta.v1.Time": "ST_TIME",
    "meta.v1.MicroTime": "ST_MTIME",
    "meta.v1.FieldsV1": "ST_RAW",
    "runtime.RawExtension": "ST_RAW",
    "resource.Quantity": "ST_QTY",
    "intstr.IntOrString": "ST_IOS",
}

SCALARS = {
    "string": "ST_STRING",
    "bytes": "ST_BYTES",
    "bool": "ST_BOOL",
    "int32": "ST_INT32",
    "int64": "ST_INT64",
    "uint32": "ST_UINT32",
    "uint64": "ST_UINT64",
    "double": "ST_DOUBLE",
    "float": "ST_DOUBLE",
}


def git_show(repo, tag, path):
    return subprocess.run(["git", "--git-dir", repo, "show", f"{tag}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def git_ls(repo, tag, path):
    out = subprocess.run(["git", "--git-dir", repo, "ls-tree", "--name-only", f"{tag}:{path}"],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def short(full):
    """k8s.io.api.core.v1.Pod -> core.v1.Pod; ...pkg.apis.meta.v1.Time -> meta.v1.Time."""
    full = full.lstrip(".")
    for prefix in ("k8s.io.api.", "k8s.io.apimachinery.pkg.apis.",
                   "k8s.io.apimachinery.pkg.api.", "k8s.io.apimachinery.pkg.util.",
                   "k8s.io.apimachinery.pkg."):
        if full.startswith(prefix):
            return full[len(prefix):]
    return full


def parse_proto(text, package):
    """{short message name: [(label, type, name, number)]}; types fully qualified."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    msgs = {}
    for m in re.finditer(r"\bmessage\s+(\w+)\s*\{([^{}]*)\}", text):
        fields = []
        for f in re.finditer(r"(optional|repeated)?\s*(map<\s*\w+\s*,\s*[\w.]+\s*>|[\w.]+)\s+"
                             r"(\w+)\s*=\s*(\d+)\s*;", m.group(2)):
            label, typ, name, num = f.group(1) or "optional", f.group(2), f.group(3), int(f.group(4))
            fields.append((label, typ, name, num))
        msgs[short(package + "." + m.group(1))] = fields
    return msgs


def resolve(typ, package):
    """A proto type as written in package -> short name (scalars stay)."""
    if typ in SCALARS:
        return typ
    if "." in typ:
        return short(typ)
    return short(package + "." + typ)


TAG = re.compile(r'`([^`]*)`')


GO_BUILTINS = {"string", "bool", "int", "int32", "int64", "uint", "uint32", "uint64",
               "float32", "float64", "byte", "interface"}


def go_qualify(t, pkgname):
    """A Go type as declared in a package -> as reflect.Type.String() prints it:
    []Container -> []v1.Container, metav1.Time -> v1.Time, []byte -> []uint8."""
    def ident(m):
        name = m.group(0)
        if "." in name:
            alias, base = name.split(".", 1)
            return ("v1" if alias.endswith("v1") else alias) + "." + base
        if name == "byte":
            return "uint8"
        if name in GO_BUILTINS or not name[0].isupper():
            return name
        return pkgname + "." + name
    return re.sub(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)?", ident, t.lstrip("*"))


def go_elem(t, named):
    """The element type of a slice or map type (named ones resolved), or None."""
    t = t.lstrip("*")
    t = named.get(t, t)
    if t.startswith("[]") and t != "[]byte":
        return t[2:]
    m = re.match(r"map\[[^\]]+\](.*)", t)
    return m.group(1) if m else None


def parse_go(text, gopkg):
    """{short struct name: {proto number: (pointer, omitempty, inline, json name)}},
    and the named slices. The JSON name is the Go json tag's, which the proto
    name need not be (BoundObjectReference's uid is "uID" in the proto)."""
    structs, slices, named = {}, set(), {}
    pkgname = gopkg.rsplit(".", 1)[-1]
    for m in re.finditer(r"^type\s+(\w+)\s+\[\]\S+\s*$", text, flags=re.M):
        slices.add(gopkg + "." + m.group(1))
    for m in re.finditer(r"^type\s+(\w+)\s+((?:\[\]|map\[)\S+)\s*$", text, flags=re.M):
        named[m.group(1)] = m.group(2)
    for m in re.finditer(r"^type\s+(\w+)\s+struct\s*\{[ \t]*\n(.*?)^\}", text, flags=re.M | re.S):
        fields = {}
        for line in m.group(2).splitlines():
            t = TAG.search(line)
            if not t:
                continue
            # An inlined TypeMeta: apiVersion and kind are the struct's own
            # JSON fields (no protobuf number: the envelope carries them).
            if re.match(r"\s*(metav1\.)?TypeMeta\s", line) and ",inline" in t.group(1):
                fields["typemeta"] = True
                continue
            pb = re.search(r'protobuf:"([^"]*)"', t.group(1))
            js = re.search(r'json:"([^"]*)"', t.group(1))
            parts = pb.group(1).split(",") if pb else []
            if len(parts) < 2 or not parts[1].isdigit():
                continue
            number = int(parts[1])
            decl = line[:t.start()].split()
            gotype = decl[-1]
            jopts = js.group(1).split(",") if js else [""]
            elem = go_elem(gotype, named)
            ps = re.search(r'patchStrategy:"([^"]*)"', t.group(1))
            pk = re.search(r'patchMergeKey:"([^"]*)"', t.group(1))
            fields[number] = (gotype.startswith("*"), "omitempty" in jopts[1:],
                              jopts[0] == "" and "inline" in jopts[1:], jopts[0],
                              go_qualify(gotype, pkgname),
                              go_qualify(elem, pkgname) if elem else None,
                              ps.group(1).split(",") if ps else [],
                              pk.group(1) if pk else None)
        structs[gopkg + "." + m.group(1)] = fields
    return structs, slices


def copy_vectors(repo, tag, outdir):
    import os
    names = set(git_ls(repo, tag, "testdata/HEAD/"))
    for api, kind, _ in KINDS:
        if not api:
            continue
        group, _, version = api.rpartition("/")
        stem = f"{group or 'core'}.{version}.{kind}"
        for ext in ("pb", "json"):
            name = f"{stem}.{ext}"
            if name not in names:
                sys.exit(f"gen-schema: no fixture {name}")
            data = subprocess.run(["git", "--git-dir", repo, "show",
                                   f"{tag}:testdata/HEAD/{name}"],
                                  check=True, capture_output=True).stdout
            with open(os.path.join(outdir, name), "wb") as f:
                f.write(data)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--vectors"]:
        outdir, args = args[1], args[2:]
        copy_vectors(args[0], args[2], outdir)
    repos, tag = args[0:2], args[2]
    protos, gostructs, goslices = {}, {}, set()
    for ri, path, package in PACKAGES:
        repo = repos[ri]
        protos_pkg = parse_proto(git_show(repo, tag, path + "/generated.proto"), package)
        protos.update({k: (v, package) for k, v in protos_pkg.items()})
        gopkg = short(package + ".x").rsplit(".", 1)[0]
        for f in git_ls(repo, tag, path + "/"):
            if (not f.endswith(".go") or f.endswith("_test.go") or f.startswith("zz_")
                    or f.startswith("generated")):
                continue
            s, sl = parse_go(git_show(repo, tag, path + "/" + f), gopkg)
            gostructs.update(s)
            goslices |= sl

    # Reachable messages, in a stable order.
    order, seen = [], set()

    def visit(name):
        if name in seen or name in SPECIAL:
            return
        if name == "meta.v1.Duration":
            sys.exit("gen-schema: meta.v1.Duration needs a JSON form in schema.c first")
        if name not in protos:
            sys.exit(f"gen-schema: message {name} not found")
        seen.add(name)
        order.append(name)
        fields, package = protos[name]
        for label, typ, fname, num in fields:
            mm = re.match(r"map<\s*\w+\s*,\s*([\w.]+)\s*>", typ)
            t = resolve(mm.group(1) if mm else typ, package)
            if t not in SCALARS:
                visit(t)

    for _, _, msg in KINDS:
        visit(msg)
    order.sort()
    index = {name: i for i, name in enumerate(order)}

    def kind_of(t):
        if t in SCALARS:
            return SCALARS[t], "SCHEMA_NONE"
        if t in SPECIAL:
            return SPECIAL[t], "SCHEMA_NONE"
        if t in goslices:
            return "ST_LIST", str(index[t])
        return "ST_MSG", str(index[t])

    out = []
    out.append("/* Generated by scripts/gen-schema.py from kubernetes/api and "
               f"kubernetes/apimachinery {tag}: do not edit. */")
    out.append('#include "api/schema.h"\n')
    out.append("/* clang-format off */")
    out.append("const struct schema_field schema_fields[] = {")
    spans, pos = [], 0
    for name in order:
        fields, package = protos[name]
        if name not in gostructs and name not in goslices:
            sys.exit(f"gen-schema: no Go struct for {name}")
        # A named slice's message has one field, items (its elements).
        go = gostructs.get(name) or {1: (False, False, False, "items", "[]string", "string",
                                         [], None)}
        rows = []
        if go.get("typemeta"):
            for jn in ("apiVersion", "kind"):
                rows.append((jn, 0, "ST_STRING", "ST_NONE", "SCHEMA_NONE", ["SF_OMIT"], False,
                             "string", None, None))
        for label, typ, fname, num in fields:
            flags = []
            if num not in go:
                sys.exit(f"gen-schema: {name}.{fname} ({num}) not in its Go struct")
            pointer, omit, inline, jname, gotype, elem, strategy, mkey = go[num]
            if "merge" in strategy:
                flags.append("SF_MERGE")
            if "retainKeys" in strategy:
                flags.append("SF_RETAIN")
            if jname and jname != "-":
                fname = jname
            if label == "repeated":
                flags.append("SF_REP")
            mm = re.match(r"map<\s*\w+\s*,\s*([\w.]+)\s*>", typ)
            if mm:
                st, msg = kind_of(resolve(mm.group(1), package))
                if omit:
                    flags.append("SF_OMIT")
                rows.append((fname, num, "ST_MAP", st, msg, flags, inline, gotype, elem, mkey))
                continue
            st, msg = kind_of(resolve(typ, package))
            if pointer:
                flags.append("SF_PTR")
            if omit:
                flags.append("SF_OMIT")
            if inline:
                flags.append("SF_INLINE")
            rows.append((fname, num, st, "ST_NONE", msg, flags, inline, gotype, elem, mkey))
        # Inline fields first (they have no JSON name), then by JSON name.
        rows.sort(key=lambda r: (not r[6], r[0]))
        out.append(f"\t/* {pos}: {name} */")
        for fname, num, st, val, msg, flags, inline, gotype, elem, mkey in rows:
            jname = "" if inline else fname
            fl = "|".join(flags) or "0"
            el = f'"{elem}"' if elem else "NULL"
            mk = f'"{mkey}"' if mkey else "NULL"
            out.append(f'\t{{"{jname}", {num}, {st}, {val}, {fl}, {msg}, "{gotype}", {el}, {mk}}},')
        spans.append((name, pos, len(rows), sum(1 for r in rows if r[6])))
        pos += len(rows)
    out.append("};\n")
    out.append("const struct schema_msg schema_msgs[] = {")
    for i, (name, first, n, ninline) in enumerate(spans):
        out.append(f'\t{{"{name}", {first}, {n}, {ninline}}}, /* {i} */')
    out.append("};")
    out.append(f"const size_t schema_msgs_count = {len(spans)};\n")
    out.append("const struct schema_kind schema_kinds[] = {")
    for api, kind, msg in KINDS:
        a = f'"{api}"' if api else "NULL"
        out.append(f'\t{{{a}, "{kind}", {index[msg]}}},')
    out.append("};")
    out.append(f"const size_t schema_kinds_count = {len(KINDS)};")
    out.append("/* clang-format on */")
    print("\n".join(out))


if __name__ == "__main__":
    main()
