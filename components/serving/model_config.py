"""TF Serving's model config files beside the versions: which versions load, under the labels stable and canary.
Each is written whole; on GCS under a generation precondition. Why and sources: docs/serving.md."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Optional

from components import gcs
from components.errors import ServingConfigChanged

STABLE, CANARY = "stable", "canary"
# Both labels: a client names the label it wants (an unlabelled request gets the highest version listed).
CONFIG_FILE = "models.config"
# One version each and no labels, for a server that must answer unlabelled requests: the stable and canary
# Deployments (infra/serving/). canary.config lists the stable version while no canary is out.
TRACK_FILES = {STABLE: "stable.config", CANARY: "canary.config"}


@dataclasses.dataclass(frozen=True)
class Labels:
    stable: Optional[int] = None
    canary: Optional[int] = None

    def versions(self) -> list[int]:
        return sorted({v for v in (self.stable, self.canary) if v is not None})


@dataclasses.dataclass(frozen=True)
class Written:
    labels: Labels
    generation: str  # what `write` must find to replace it: a GCS generation, or a local file's mtime_ns
    listed: tuple[int, ...] = ()  # the versions it lists (model_version_policy.specific): what its servers load


def render(model_name: str, base_path: str, labels: Labels, track: Optional[str] = None,
           also: tuple[int, ...] = ()) -> str:
    """The ModelServerConfig text proto (tensorflow_serving/config/model_server_config.proto): the model's versions
    under model_version_policy.specific, with version_labels, and `also` listed without a label (loaded before a
    label moves onto them). `track`: that label's version alone and no labels, so the server's unlabelled requests
    get it and moving it needs no label move, which TF Serving refuses towards a version it has not loaded yet
    (server_core.cc, UpdateModelVersionLabelMap)."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    if labels.stable is None:
        raise ValueError("a model config needs a stable version")
    named = {k: v for k, v in ((STABLE, labels.stable), (CANARY, labels.canary)) if v is not None}
    if track is not None:
        named = {}
        versions = [labels.canary if track == CANARY and labels.canary is not None else labels.stable]
    else:
        versions = sorted(set(named.values()) | set(also))
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add(name=model_name, base_path=base_path, model_platform="tensorflow")
    model.model_version_policy.specific.versions.extend(versions)
    for label, version in named.items():
        model.version_labels[label] = version
    return text_format.MessageToString(config)


def _parse(text: str, where: str) -> tuple[Labels, tuple[int, ...]]:
    """The labels and the listed versions."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    models = list(config.model_config_list.config)
    if len(models) != 1:
        raise ValueError(f"{where}: expected one model, found {len(models)}")
    labels = dict(models[0].version_labels)
    return (Labels(labels.get(STABLE), labels.get(CANARY)),
            tuple(sorted(models[0].model_version_policy.specific.versions)))


def _path(base: str, name: str) -> str:
    return f"{gcs.api_uri(base).rstrip('/')}/{name}"


def read(base: str, gcs_client=None) -> Optional[Written]:
    """The labels models.config gives and its generation; None when there is none (a root from before)."""
    path = _path(base, CONFIG_FILE)
    if gcs.is_gcs(path):
        found = gcs.read(path, gcs_client)
        if found is None:
            return None
        text, stamp = found.body.decode(), found.generation
    else:
        try:
            with open(path) as f:
                text, stamp = f.read(), os.fstat(f.fileno()).st_mtime_ns
        except FileNotFoundError:
            return None
    labels, listed = _parse(text, path)
    return Written(labels, str(stamp), listed)


def onto_unloaded(written: Optional[Written], labels: Labels) -> tuple[int, ...]:
    """The versions `labels` would move a label onto that a server of `written` has not loaded: a label in use
    that names another version, towards a version `written` does not list. TF Serving refuses that move until the
    version is available, and applies the labels before it loads newly listed versions (server_core.cc, ReloadConfig
    calls UpdateModelVersionLabelMap before AddModelsViaModelConfigList), so the version must be listed by an
    earlier write. --allow_version_labels_for_unavailable_models covers only a label not in use yet."""
    if written is None:
        return ()
    before = {STABLE: written.labels.stable, CANARY: written.labels.canary}
    after = {STABLE: labels.stable, CANARY: labels.canary}
    return tuple(sorted({v for label, v in after.items() if v is not None and before[label] not in (None, v)
                         and v not in written.listed}))


def list_first(base: str, model_name: str, written: Written, versions: tuple[int, ...], gcs_client=None) -> Written:
    """Rewrite models.config with its labels as they are and `versions` listed too, so its servers load them before
    a later write moves a label onto them (onto_unloaded); the track files are left as they are. Returns what was
    written, for the next write's precondition."""
    listed = tuple(sorted(set(written.listed) | set(versions)))
    text = render(model_name, gcs.api_uri(base).rstrip("/"), written.labels, also=listed)
    return Written(written.labels, _put(_path(base, CONFIG_FILE), text, written, gcs_client), listed)


def write(base: str, model_name: str, labels: Labels, expected: Optional[Written], gcs_client=None) -> None:
    """Write the track files, then models.config (last: it is what `read` trusts), each whole. ServingConfigChanged
    when models.config is no longer the one read as `expected` (None: it must not exist)."""
    server_path = gcs.api_uri(base).rstrip("/")  # what TF Serving reads: gs:// even through a gcsfuse mount
    # Checked before the track files too, so that a writer that lost the race changes none of them; the write of
    # models.config below is still conditional, for a writer that gets in between.
    now = read(base, gcs_client)
    if (now.generation if now else "") != (expected.generation if expected else ""):
        raise ServingConfigChanged(f"{_path(base, CONFIG_FILE)} changed since it was read (generation "
                                   f"{(expected.generation if expected else '') or 'none'}); nothing written: read it "
                                   "again (python -m pipeline serving status)")
    for label, name in TRACK_FILES.items():
        _put(_path(base, name), render(model_name, server_path, labels, label), None, gcs_client)
    _put(_path(base, CONFIG_FILE), render(model_name, server_path, labels), expected or Written(Labels(), ""),
         gcs_client)


def _put(path: str, text: str, expected: Optional[Written], gcs_client) -> str:
    """Write path whole; its new generation. With `expected`, only if it is still that generation ("" : only if
    absent)."""
    body = text.encode()
    if gcs.is_gcs(path):
        if expected is None:
            gcs.write(path, body, "text/plain", gcs_client)
            return ""
        done = (gcs.create(path, body, gcs_client) if not expected.generation
                else gcs.replace(path, body, int(expected.generation), gcs_client))
        if done is None:
            raise ServingConfigChanged(f"{path} changed since it was read (generation {expected.generation or 'none'})"
                                       "; nothing written: read it again (python -m pipeline serving status)")
        return str(done)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    if expected is not None:
        try:
            now = str(os.stat(path).st_mtime_ns)
        except FileNotFoundError:
            now = ""
        if now != expected.generation:
            raise ServingConfigChanged(f"{path} changed since it was read; nothing written: read it again "
                                       "(python -m pipeline serving status)")
    fd, tmp = tempfile.mkstemp(prefix=".config-", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # TF Serving polls the file: it sees the old one or the new one, never half
    return str(os.stat(path).st_mtime_ns)
