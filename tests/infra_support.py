"""Reading infra/ the way its tools do: Terraform merged from its .tf files
(python-hcl2), Cloud Build's substitutions resolved by Cloud Build's rules, and
the pins in requirements.lock the Dockerfiles must follow."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import hcl2
import yaml

REPO = Path(__file__).resolve().parent.parent
INFRA = REPO / "infra"
TERRAFORM = INFRA / "terraform"
KUBEFLOW_INFRA = INFRA / "kubeflow"
DOCKER = INFRA / "docker"
CLOUDBUILD = INFRA / "cloudbuild.yaml"
VERTEX_CONFIG = REPO / "configs" / "vertex.yaml"
PINNED_IMAGE = re.compile(r"^[\w./-]+(:(?!latest$)[\w.-]*\d[\w.-]*|@sha256:[0-9a-f]{64})$")
APIS = "${google_project_service.apis}"


def _clean(node):
    """python-hcl2 keeps quotes and adds __meta__ keys; strip both."""
    if isinstance(node, dict):
        return {_clean(k): _clean(v) for k, v in node.items() if not str(k).startswith("__")}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    if isinstance(node, str) and len(node) >= 2 and node[0] == node[-1] == '"':
        return node[1:-1]
    return node


def load_terraform(directory: Path = TERRAFORM) -> dict:
    """All .tf files of a root merged: {'resource': {type: {name: body}}, 'variable': ..., 'locals': ...,
    'output': ...}."""
    merged: dict = {"resource": {}, "variable": {}, "locals": {}, "output": {}}
    for path in sorted(directory.glob("*.tf")):
        doc = _clean(hcl2.loads(path.read_text()))
        for block in doc.get("resource", []):
            for rtype, named in block.items():
                merged["resource"].setdefault(rtype, {}).update(named)
        for kind in ("variable", "output", "locals"):
            for block in doc.get(kind, []):
                merged[kind].update(block)
    return merged


_TF_REF = re.compile(r"\$\{(var|local)\.([\w.]+)\}")


def interpolate(tf: dict, text: str, variables: dict[str, str]) -> str:
    """Resolve ${var.x} and ${local.x.y} in a Terraform string (enough for names and conditions)."""
    def value(match: re.Match) -> str:
        kind, path = match.groups()
        node = variables if kind == "var" else tf["locals"]
        for part in path.split("."):
            node = node[part]
        return interpolate(tf, node, variables)
    return _TF_REF.sub(value, text)


def lock_version(package: str) -> str:
    found = re.search(rf"^{re.escape(package)}==(\S+)$", (REPO / "requirements.lock").read_text(), flags=re.M)
    assert found, f"{package} is not pinned in requirements.lock"
    return found[1]


def dockerfile(name: str) -> str:
    return (DOCKER / name).read_text()


def docker_arg(text: str, name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S*)$", text, flags=re.M)
    assert found, f"no ARG {name}=... default"
    return found[1]


def cloudbuild() -> dict:
    return yaml.safe_load(CLOUDBUILD.read_text())


def steps(build: dict) -> dict[str, dict]:
    return {s["id"]: s for s in build["steps"]}


# Cloud Build's built-in substitutions. A trigger sets the commit ones; in a
# manual build they are empty (Cloud Build docs, "Substituting variable values").
BUILTINS = {"PROJECT_ID", "BUILD_ID", "PROJECT_NUMBER", "LOCATION", "TRIGGER_NAME", "COMMIT_SHA", "REVISION_ID",
            "SHORT_SHA", "REPO_NAME", "REPO_FULL_NAME", "BRANCH_NAME", "TAG_NAME", "REF_NAME",
            "TRIGGER_BUILD_CONFIG_PATH", "SERVICE_ACCOUNT_EMAIL", "SERVICE_ACCOUNT"}
_SUB = re.compile(r"\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def resolve_substitutions(build: dict, given: dict[str, str]) -> dict[str, str]:
    """Every substitution's value for one build: `given` overrides the file's
    defaults, and values may refer to others (dynamicSubstitutions)."""
    unknown = sorted(k for k in given if k not in BUILTINS and not k.startswith("_"))
    assert not unknown, f"not Cloud Build substitutions: {unknown}"
    raw = {**build.get("substitutions", {}), **{k: v for k, v in given.items() if k.startswith("_")}}
    builtins = {k: given.get(k, "") for k in BUILTINS}
    resolved: dict[str, str] = {}

    def get(name: str, seen: tuple[str, ...]) -> str:
        if name in builtins:
            return builtins[name]
        if name not in raw:
            raise KeyError(f"substitution ${{{name}}} is used but not defined")
        if name in seen:
            raise ValueError(f"substitution cycle: {' -> '.join((*seen, name))}")
        if name not in resolved:
            resolved[name] = _substitute(raw[name], lambda n: get(n, (*seen, name)))
        return resolved[name]

    for name in raw:
        get(name, ())
    return {**builtins, **resolved}


def substitute(text: str, subs: dict[str, str]) -> str:
    """One build-file string after substitution, as the step receives it."""
    def get(name: str) -> str:
        if name not in subs:
            raise KeyError(f"substitution ${{{name}}} is used but not defined")
        return subs[name]
    return _substitute(text, get)


def _substitute(text: str, get) -> str:
    def one(match: re.Match) -> str:
        if match[0] == "$$":
            return "$"
        name = match[1] if match[1] is not None else match[2]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"unsupported substitution {match[0]!r} (only plain names are used here)")
        return get(name)
    return _SUB.sub(one, text)


# --- IAM grants in the Terraform -------------------------------------------------

# Sample variable values for resolving names and conditions.
TF_VARS = {"project_id": "acme-ml-prod", "name": "penguin", "region": "europe-west4"}
WRITE_ROLES = {"roles/storage.objectUser", "roles/storage.objectCreator", "roles/storage.objectAdmin",
               "roles/storage.admin", "roles/storage.legacyBucketWriter", "roles/storage.legacyBucketOwner"}
DEPLOYER = "deployer"  # stands for each principal in var.deployers


def sa(name: str) -> str:
    """The member string Terraform uses for one of its service accounts."""
    return f"serviceAccount:${{google_service_account.{name}.email}}"


@dataclass(frozen=True)
class Grant:
    address: str
    role: str
    member: str
    target: str  # the bucket, repository, service account or project granted on
    condition: Optional[str]


def grants(tf: dict) -> list[Grant]:
    """Every IAM grant, one per for_each instance."""
    found = []
    for rtype, named in tf["resource"].items():
        if not rtype.endswith("_iam_member"):
            continue
        for name, body in named.items():
            target_key = next(k for k in ("bucket", "repository", "service_account_id", "topic", "project")
                              if k in body)
            condition = body.get("condition", [{}])[0].get("expression")
            for key, value in _instances(tf, body.get("for_each")):
                def fill(text, key=key, value=value):
                    return _each(text, key, value) if text is not None else None
                expression = fill(condition)
                expression = expression.replace('\\"', '"') if expression else None  # HCL escapes inner quotes
                found.append(Grant(f"{rtype}.{name}" + (f"[{key}]" if key else ""), fill(body["role"]),
                                   fill(body["member"]), fill(body[target_key]), expression))
    return found


def _instances(tf: dict, for_each) -> list[tuple]:
    if for_each is None:
        return [(None, None)]
    if isinstance(for_each, dict):
        return list(for_each.items())
    if for_each.startswith("${local.") and re.fullmatch(r"\$\{local\.\w+\}", for_each):
        return list(tf["locals"][for_each[len("${local."):-1]].items())
    members = re.findall(r"serviceAccount:\$\{google_service_account\.\w+\.email\}", for_each)
    members += [DEPLOYER] if "var.deployers" in for_each else []
    assert members, f"cannot expand for_each = {for_each}"
    return [(m, m) for m in members]


def _each(text: str, key, value) -> str:
    text = text.replace("${each.key}", str(key))
    if isinstance(value, dict):
        for k, v in value.items():
            text = text.replace(f"${{each.value.{k}}}", str(v))
        return text
    return text.replace("${each.value}", str(value))


_STARTS_WITH = re.compile(r'resource\.name\.startsWith\("([^"]+)"\)')


def condition_prefixes(tf: dict, expression: str) -> list[str]:
    """The object-name prefixes an IAM condition of the form
    `resource.name.startsWith("...") || ...` admits; anything else is an error."""
    resolved = interpolate(tf, expression, TF_VARS)
    clauses = [c.strip() for c in resolved.split("||")]
    prefixes = [_STARTS_WITH.fullmatch(c) for c in clauses]
    assert all(prefixes), f"unsupported IAM condition: {resolved}"
    return [p[1] for p in prefixes]


def pipeline_bucket(tf: dict) -> str:
    return interpolate(tf, tf["locals"]["bucket_name"], TF_VARS)


def may_write(tf: dict, member: str, object_name: str) -> bool:
    """Whether `member` may create or overwrite `object_name` in the pipeline bucket."""
    full = f"projects/_/buckets/{pipeline_bucket(tf)}/objects/{object_name}"
    for g in grants(tf):
        if g.member != member or g.role not in WRITE_ROLES or g.target != "${google_storage_bucket.pipeline.name}":
            continue
        if g.condition is None or any(full.startswith(p) for p in condition_prefixes(tf, g.condition)):
            return True
    return False


def tpu_library_path() -> str:
    """Where Dockerfile.tpu links libtpu.so: what the v5e job spec's
    TF_PLUGGABLE_DEVICE_LIBRARY_PATH must name."""
    found = re.search(r'ln -s "\$libtpu" (/\S+)$', re.sub(r"\\\n", "", dockerfile("Dockerfile.tpu")), flags=re.M)
    assert found, "Dockerfile.tpu does not link libtpu.so"
    return found[1]
