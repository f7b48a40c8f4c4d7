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

import json
import os
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
    "meta.v1.FieldsV1": "ST_FIELDS",
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


def comment_tags(lines):
    """The +key=value markers of a block of comment lines: {key: [values]}."""
    tags = {}
    for c in lines:
        m = re.match(r"\s*//\s*\+([\w.:-]+)(?:=(.*))?$", c)
        if m:
            tags.setdefault(m.group(1), []).append((m.group(2) or "").strip())
    return tags


def comments_before(text, pos):
    """The contiguous // lines right above the line starting at pos."""
    lines = text[:pos].split("\n")[:-1]
    out = []
    while lines and lines[-1].strip().startswith("//"):
        out.insert(0, lines.pop())
    return out


def parse_go(text, gopkg):
    """{short struct name: {proto number: Field}}, the named slices, the
    atomic structs, the enum types and the string constants. The JSON name
    is the Go json tag's, which the proto name need not be
    (BoundObjectReference's uid is "uID" in the proto)."""
    structs, slices, named, atomic = {}, set(), {}, set()
    pkgname = gopkg.rsplit(".", 1)[-1]
    enums, consts = set(), {}
    for m in re.finditer(r"^type\s+(\w+)\s+string\s*$", text, flags=re.M):
        if "enum" in comment_tags(comments_before(text, m.start())):
            enums.add(m.group(1))
    for m in re.finditer(r"^\s*(\w+)\s+(\w+)\s*=\s*\"([^\"]*)\"", text, flags=re.M):
        consts[m.group(1)] = (m.group(2), m.group(3))
    # Conversions: X = T("v"), or X = T(pkg.Y), resolved once every package
    # is read (discovery/v1's AddressType is core/v1's IPFamily values).
    for m in re.finditer(r"^\s*(\w+)\s*=\s*(\w+)\((?:\"([^\"]*)\"|(?:\w+\.)?(\w+))\)",
                         text, flags=re.M):
        consts[m.group(1)] = (m.group(2), m.group(3) if m.group(3) is not None
                              else ("ref", m.group(4)))
    for m in re.finditer(r"^type\s+(\w+)\s+\[\]\S+\s*$", text, flags=re.M):
        slices.add(gopkg + "." + m.group(1))
    for m in re.finditer(r"^type\s+(\w+)\s+((?:\[\]|map\[)\S+)\s*$", text, flags=re.M):
        named[m.group(1)] = m.group(2)
    for m in re.finditer(r"^type\s+(\w+)\s+struct\s*\{[ \t]*\n(.*?)^\}", text, flags=re.M | re.S):
        fields = {}
        if comment_tags(comments_before(text, m.start())).get("structType") == ["atomic"]:
            atomic.add(gopkg + "." + m.group(1))
        comments = []
        for line in m.group(2).splitlines():
            if line.strip().startswith("//"):
                comments.append(line)
                continue
            above, comments = comments, []
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
            tags = comment_tags(above)
            omit = "omitempty" in jopts[1:]
            # kube-openapi's rule: +optional, else +required, else omitempty.
            optional = "optional" in tags or ("required" not in tags and omit)
            base = re.sub(r"^[*\[\]]+", "", gotype)
            fields[number] = Field(
                pointer=gotype.startswith("*"), omit=omit,
                inline=jopts[0] == "" and "inline" in jopts[1:], json=jopts[0],
                gotype=go_qualify(gotype, pkgname),
                elem=go_qualify(elem, pkgname) if elem else None,
                strategy=ps.group(1).split(",") if ps else [],
                merge_key=pk.group(1) if pk else None,
                required=not optional, list_type=(tags.get("listType") or [None])[0],
                list_keys=tags.get("listMapKey") or [],
                map_type=(tags.get("mapType") or [None])[0],
                default=(tags.get("default") or [None])[0],
                enum_type=base if "." not in base else None, pkg=gopkg)
        structs[gopkg + "." + m.group(1)] = fields
    return structs, slices, atomic, enums, consts


class Field:
    def __init__(self, **kw):
        self.__dict__.update(kw)


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


def openapi_name(short_name):
    """core.v1.Pod -> io.k8s.api.core.v1.Pod, meta.v1.Time ->
    io.k8s.apimachinery.pkg.apis.meta.v1.Time: the definitions' names."""
    for prefix, full in (("meta.", "io.k8s.apimachinery.pkg.apis.meta."),
                         ("resource.", "io.k8s.apimachinery.pkg.api.resource."),
                         ("intstr.", "io.k8s.apimachinery.pkg.util.intstr."),
                         ("runtime.", "io.k8s.apimachinery.pkg.runtime.")):
        if short_name.startswith(prefix):
            return full + short_name[len(prefix):]
    return "io.k8s.api." + short_name


def read_docs(path):
    """schema-docs.txt: {message: (description, {json field: description})}.
    Section "*" holds the fields every kind shares (TypeMeta's apiVersion
    and kind, a kind's metadata), used where its own section has no line."""
    docs, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            m = re.match(r"\[([\w.*]+)\]$", line)
            if m:
                cur = docs.setdefault(m.group(1), ["", {}])
                continue
            if cur is None:
                sys.exit(f"gen-schema: {path}:{n}: text before the first [section]")
            m = re.match(r"(\w+): (.+)$", line)
            if m:
                cur[1][m.group(1)] = m.group(2).strip()
            elif not cur[0]:
                cur[0] = line.strip()
            else:
                sys.exit(f"gen-schema: {path}:{n}: a second description line")
    return docs


def c_str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_list(values):
    if not values:
        return "NULL"
    return "(const char *const[]){" + ", ".join(c_str(v) for v in values) + ", NULL}"


# Messages served beside the kinds: the list envelope, errors, watch events
# and the PATCH body's name, as every OpenAPI document refers to them.
EXTRA_ROOTS = ["meta.v1.ListMeta", "meta.v1.Status", "meta.v1.WatchEvent", "meta.v1.Patch"]

SPECIAL_NAMES = [("ST_TIME", "meta.v1.Time"), ("ST_MTIME", "meta.v1.MicroTime"),
                 ("ST_RAW", "runtime.RawExtension"), ("ST_QTY", "resource.Quantity"),
                 ("ST_IOS", "intstr.IntOrString"), ("ST_FIELDS", "meta.v1.FieldsV1")]


def main():
    args = sys.argv[1:]
    docs_path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "src", "api", "schema-docs.txt")
    if args[:1] == ["--docs"]:
        docs_path, args = args[1], args[2:]
    if args[:1] == ["--vectors"]:
        outdir, args = args[1], args[2:]
        copy_vectors(args[0], args[2], outdir)
    repos, tag = args[0:2], args[2]
    docs = read_docs(docs_path)
    protos, gostructs, goslices, atomic = {}, {}, set(), set()
    enums, consts = {}, {}
    for ri, path, package in PACKAGES:
        repo = repos[ri]
        protos_pkg = parse_proto(git_show(repo, tag, path + "/generated.proto"), package)
        protos.update({k: (v, package) for k, v in protos_pkg.items()})
        gopkg = short(package + ".x").rsplit(".", 1)[0]
        for f in git_ls(repo, tag, path + "/"):
            if (not f.endswith(".go") or f.endswith("_test.go") or f.startswith("zz_")
                    or f.startswith("generated")):
                continue
            s, sl, at, en, co = parse_go(git_show(repo, tag, path + "/" + f), gopkg)
            gostructs.update(s)
            goslices |= sl
            atomic |= at
            enums.setdefault(gopkg, set()).update(en)
            consts.setdefault(gopkg, {}).update(co)

    def const_value(v):
        if isinstance(v, tuple):  # ("ref", name): another package's constant
            for pkg in consts.values():
                if v[1] in pkg and isinstance(pkg[v[1]][1], str):
                    return pkg[v[1]][1]
            sys.exit(f"gen-schema: constant {v[1]} not found")
        return v

    def enum_values(f):
        if not f.enum_type or f.enum_type not in enums.get(f.pkg, ()):
            return []
        return sorted({const_value(v) for t, v in consts[f.pkg].values() if t == f.enum_type})

    def default_json(f):
        if f.default is None:
            return None
        m = re.match(r"ref\((\w+)\)$", f.default)
        if m:
            return json.dumps(consts[f.pkg][m.group(1)][1])
        return json.dumps(json.loads(f.default))

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
    for msg in EXTRA_ROOTS:
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

    missing = []

    def doc_of(msg, field, shared):
        d = docs.get(msg, ["", {}])[1].get(field)
        if not d and shared:
            d = docs.get("*", ["", {}])[1].get(field)
        if not d:
            missing.append(f"{msg}.{field}")
        return d or ""

    def msg_doc(msg):
        d = docs.get(msg, [""])[0]
        if not d:
            missing.append(msg)
        return d

    out = []
    out.append("/* Generated by scripts/gen-schema.py from kubernetes/api and "
               f"kubernetes/apimachinery {tag}")
    out.append(" * (names, numbers, types, markers) and src/api/schema-docs.txt "
               "(descriptions): do not edit. */")
    out.append('#include "api/schema.h"\n')
    out.append("/* clang-format off */")
    out.append("#define N(a) (sizeof(a) / sizeof((a)[0]))")
    spans = []
    for name in order:
        fields, package = protos[name]
        if name not in gostructs and name not in goslices and fields:
            sys.exit(f"gen-schema: no Go struct for {name}")
        # A named slice's message has one field, items (its elements); an
        # empty struct (meta.v1.Patch) has none.
        if name in goslices:
            go = {1: Field(pointer=False, omit=False, inline=False, json="items",
                           gotype="[]string", elem="string", strategy=[], merge_key=None,
                           required=False, list_type=None, list_keys=[], map_type=None,
                           default=None, enum_type=None, pkg=None)}
        else:
            go = gostructs.get(name, {})
        rows = []
        if go.get("typemeta"):
            for jn in ("apiVersion", "kind"):
                rows.append((jn, 0, "ST_STRING", "ST_NONE", "SCHEMA_NONE", ["SF_OMIT"], False,
                             "string", None, None, [], [], None))
        for label, typ, fname, num in fields:
            flags = []
            if num not in go:
                sys.exit(f"gen-schema: {name}.{fname} ({num}) not in its Go struct")
            f = go[num]
            if "merge" in f.strategy:
                flags.append("SF_MERGE")
            if "retainKeys" in f.strategy:
                flags.append("SF_RETAIN")
            if f.json and f.json != "-":
                fname = f.json
            if label == "repeated":
                flags.append("SF_REP")
            if f.required and not f.inline:
                flags.append("SF_REQ")
            if f.list_type:
                flags.append({"atomic": "SF_LIST_ATOMIC", "set": "SF_LIST_SET",
                              "map": "SF_LIST_MAP"}[f.list_type])
            if f.map_type == "atomic":
                flags.append("SF_MAP_ATOMIC")
            mm = re.match(r"map<\s*\w+\s*,\s*([\w.]+)\s*>", typ)
            if mm:
                st, msg = kind_of(resolve(mm.group(1), package))
                if f.omit:
                    flags.append("SF_OMIT")
                rows.append((fname, num, "ST_MAP", st, msg, flags, f.inline, f.gotype, f.elem,
                             f.merge_key, f.list_keys, enum_values(f), default_json(f)))
                continue
            st, msg = kind_of(resolve(typ, package))
            if f.pointer:
                flags.append("SF_PTR")
            if f.omit:
                flags.append("SF_OMIT")
            if f.inline:
                flags.append("SF_INLINE")
            rows.append((fname, num, st, "ST_NONE", msg, flags, f.inline, f.gotype, f.elem,
                         f.merge_key, f.list_keys, enum_values(f), default_json(f)))
        # Inline fields first (they have no JSON name), then by JSON name.
        rows.sort(key=lambda r: (not r[6], r[0]))
        ident = name.replace(".", "_")
        out.append(f"\nstatic const struct schema_field {ident}[] = {{")
        for (fname, num, st, val, msg, flags, inline, gotype, elem, mkey, keys, enum,
             dflt) in rows:
            jname = "" if inline else fname
            fl = "|".join(flags) or "0"
            el = c_str(elem) if elem else "NULL"
            mk = c_str(mkey) if mkey else "NULL"
            df = c_str(dflt) if dflt else "NULL"
            # apiVersion and kind of TypeMeta, and a kind's metadata, say
            # the same of every kind.
            shared = num == 0 or (fname == "metadata" and go.get("typemeta"))
            doc = "NULL" if inline else c_str(doc_of(name, fname, shared))
            out.append(f'\t{{"{jname}", {num}, {st}, {val}, {fl}, {msg}, "{gotype}", {el}, '
                       f'{mk}, {c_list(keys)}, {c_list(enum)}, {df},\n\t {doc}}},')
        out.append("};")
        spans.append((name, ident, len(rows), sum(1 for r in rows if r[6])))
    out.append("\nconst struct schema_msg schema_msgs[] = {")
    for i, (name, ident, n, ninline) in enumerate(spans):
        fl = "SM_ATOMIC" if name in atomic else "0"
        out.append(f'\t{{"{name}", "{openapi_name(name)}", {ident}, N({ident}), {ninline}, '
                   f'{fl},\n\t {c_str(msg_doc(name))}}}, /* {i} */')
    out.append("};")
    out.append(f"const size_t schema_msgs_count = {len(spans)};\n")
    out.append("const struct schema_special schema_specials[] = {")
    for st, name in SPECIAL_NAMES:
        out.append(f'\t{{{st}, "{name}", "{openapi_name(name)}",\n\t {c_str(msg_doc(name))}}},')
    out.append("};")
    out.append(f"const size_t schema_specials_count = {len(SPECIAL_NAMES)};\n")
    out.append("const struct schema_kind schema_kinds[] = {")
    for api, kind, msg in KINDS:
        a = f'"{api}"' if api else "NULL"
        out.append(f'\t{{{a}, "{kind}", {index[msg]}}},')
    out.append("};")
    out.append(f"const size_t schema_kinds_count = {len(KINDS)};")
    out.append("/* clang-format on */")
    if missing:
        sys.exit(f"gen-schema: no description in {docs_path} for: " + ", ".join(missing))
    print("\n".join(out))


if __name__ == "__main__":
    main()
