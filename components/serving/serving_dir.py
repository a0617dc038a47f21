"""The directory TF Serving watches: which version serves, and publishing a new one whole.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import uuid
from typing import Callable, Optional

from components import gcs
from components.coordination import lease
from components.serving import model_config
from components.storage import Storage, chunks, storage_for

SAVED_MODEL = "saved_model.pb"
STAGING_PREFIX = ".staging-"
CLAIMS_DIR = ".claims"
_MAX_CLAIM_ATTEMPTS = 1000


@dataclasses.dataclass(frozen=True)
class Version:
    number: int
    path: str

    @property
    def name(self) -> str:
        return str(self.number)


@dataclasses.dataclass(frozen=True)
class Claim:
    version: int
    owner: str
    claimed: float  # seconds since the epoch, on the claimant's clock


def _children(store: Storage) -> dict[str, set[str]]:
    """{top-level name: relative paths of the files under it} of everything under the store."""
    out: dict[str, set[str]] = {}
    for path in store.list():
        top, _, rest = path.partition("/")
        out.setdefault(top, set()).add(rest)
    if not gcs.is_gcs(store.uri) and os.path.isdir(store.uri):
        # GCS has no empty directories; locally an empty one still shows TF Serving a version.
        for entry in os.scandir(store.uri):
            out.setdefault(entry.name, set())
    return out


def versions(base: str, gcs_client=None) -> list[Version]:
    """Loadable versions under base (numeric name and a saved_model.pb), oldest first."""
    store = storage_for(base, gcs_client)
    found = [Version(int(name), version_path(base, int(name))) for name, files in _children(store).items()
             if name.isdigit() and SAVED_MODEL in files]
    return sorted(found, key=lambda v: v.number)


def version_path(base: str, number: int) -> str:
    return _join(base, str(number))


def incomplete(base: str, gcs_client=None) -> list[int]:
    """Numeric version directories without saved_model.pb: a push under way, or one that was killed."""
    return sorted(int(name) for name, files in _children(storage_for(base, gcs_client)).items()
                  if name.isdigit() and SAVED_MODEL not in files)


def highest(base: str, gcs_client=None) -> Optional[Version]:
    """The version TF Serving serves under its default policy: the highest loadable one."""
    found = versions(base, gcs_client)
    return found[-1] if found else None


def served(base: str, gcs_client=None) -> dict[str, Version]:
    """{label: version} of what serves, from one read of TF Serving's model config and one listing: stable is "the
    model serving now", the version labelled stable (components/serving/rollout.py), or without one (a root from before
    it was written) the highest loadable version; canary is there only while one is out. While a canary is out
    stable is the drift gate's, the Evaluator's and warm start's model (docs/serving.md)."""
    written = model_config.read(base, gcs_client)
    found = versions(base, gcs_client)
    by_number = {v.number: v for v in found}
    labels = written.labels if written is not None else model_config.Labels()
    out = {}
    stable = by_number.get(labels.stable) if labels.stable is not None else None
    if stable is not None or found:
        out[model_config.STABLE] = stable or found[-1]
    if labels.canary is not None and labels.canary in by_number:
        out[model_config.CANARY] = by_number[labels.canary]
    return out


def serving(base: str, gcs_client=None) -> Optional[Version]:
    """"The model serving now" (served's stable)."""
    return served(base, gcs_client).get(model_config.STABLE)


def canary(base: str, gcs_client=None) -> Optional[Version]:
    """The version labelled canary, if one is out."""
    return served(base, gcs_client).get(model_config.CANARY)


def tree_digest(directory: str, gcs_client=None) -> str:
    """sha256 over every file's relative path and bytes: equal digests, equal models."""
    store = storage_for(directory, gcs_client)
    entries = []
    for rel in store.list():
        h = hashlib.sha256()
        with store.open_read(rel) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        entries.append(f"{h.hexdigest()}  {rel}\n")
    return hashlib.sha256("".join(sorted(entries)).encode()).hexdigest()


def _claims_store(base: str, gcs_client) -> Storage:
    """Where the version claims are: under base, through google-cloud-storage when base is in a bucket
    (also when it is reached through a gcsfuse mount: a create there could not carry its precondition)."""
    return storage_for(gcs.api_uri(_join(base, CLAIMS_DIR)), gcs_client)


def claims(base: str, gcs_client=None) -> dict[int, Claim]:
    store = _claims_store(base, gcs_client)
    out = {}
    for path in store.list():
        stem = path.rsplit("/", 1)[-1].removesuffix(".json")
        if stem.isdigit():
            with store.open_read(path) as f:
                try:
                    body = json.loads(f.read())
                except ValueError:  # being written: owned by someone, claimed now
                    body = {}
            out[int(stem)] = Claim(int(stem), str(body.get("owner", "")), float(body.get("claimed", time.time())))
    return out


def next_version(base: str, now: Optional[float] = None, gcs_client=None) -> int:
    """A Unix timestamp like TFX's, but above every existing or claimed version (two pushes in one second)."""
    taken = [int(name) for name in _children(storage_for(base, gcs_client)) if name.isdigit()]
    taken += list(claims(base, gcs_client))
    return max(int(now if now is not None else time.time()), max(taken, default=0) + 1)


def claim_version(base: str, owner: str, now: Optional[float] = None, gcs_client=None) -> int:
    """A version number no other push has or will have: its claim is created only if absent."""
    store = _claims_store(base, gcs_client)
    version = next_version(base, now, gcs_client)
    for _ in range(_MAX_CLAIM_ATTEMPTS):
        body = json.dumps({"owner": owner, "claimed": time.time()}).encode()
        if store.create(f"{version}.json", body):
            return version
        version += 1  # another push claimed it first
    raise RuntimeError(f"{base}: no free version number after {_MAX_CLAIM_ATTEMPTS} claims from {version}")


def is_debris(claim: Optional[Claim], written: Optional[float], this_run: str,
              live_since: Optional[float], now: Optional[float] = None) -> bool:
    """May a cleaner (run `this_run`) remove something claimed by `claim`, last written at `written`?"""
    if claim is not None and claim.owner == this_run:
        return True
    when = claim.claimed if claim is not None else written
    return when is not None and when < lease.debris_cutoff(live_since, now)


def clear_debris(base: str, this_run: str, live_since: Optional[float], gcs_client=None,
                 now: Optional[float] = None) -> list[str]:
    """Remove what killed pushes left (staging, unfinished versions) that is debris (is_debris); says what."""
    store = storage_for(base, gcs_client)
    held = claims(base, gcs_client)
    unfinished = {str(v) for v in incomplete(base, gcs_client)}
    removed = []
    for name in sorted(_children(store)):
        number = _staging_version(name) if name.startswith(STAGING_PREFIX) else (
            int(name) if name in unfinished else None)
        if number is None:
            continue
        if is_debris(held.get(number), store.modified(name), this_run, live_since, now):
            store.delete(name)
            removed.append(f"staging {name}" if name.startswith(STAGING_PREFIX)
                           else f"unfinished version {name} (no {SAVED_MODEL}: a killed push)")
    return removed


def _staging_version(name: str) -> Optional[int]:
    number = name[len(STAGING_PREFIX):].split("-", 1)[0]
    return int(number) if number.isdigit() else None


def publish(model_dir: str, base: str, version: int,
            copy_file: Optional[Callable[[str, str], None]] = None, gcs_client=None) -> str:
    """Copy model_dir to <base>/<version> (a version this push claimed) so that TF Serving never loads it
    incomplete; returns that path.

    copy_file(source path, staging path) is the one file copy, a parameter so a test can kill a push midway.
    """
    final = _join(base, str(version))
    dst, src = storage_for(base, gcs_client), storage_for(model_dir, gcs_client)
    if dst.list(str(version)):
        raise FileExistsError(f"serving version {final} already exists; refusing to overwrite it")
    staging = f"{STAGING_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    for rel in sorted(src.list()):
        if copy_file is not None:
            os.makedirs(os.path.dirname(_join(base, staging, rel)), exist_ok=True)
            copy_file(_join(model_dir, rel), _join(base, staging, rel))
        else:
            dst.write(f"{staging}/{rel}", chunks(src, rel))
    if tree_digest(_join(base, staging), gcs_client) != tree_digest(model_dir, gcs_client):
        dst.delete(staging)
        raise OSError(f"the copy of {model_dir} in {_join(base, staging)} does not match it; nothing was pushed")
    dst.publish(staging, str(version), SAVED_MODEL)  # a rename locally; saved_model.pb last on GCS
    return final


def _join(*parts: str) -> str:
    return "/".join([parts[0].rstrip("/"), *(p.strip("/") for p in parts[1:])])
