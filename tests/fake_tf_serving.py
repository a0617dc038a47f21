"""A model of how TF Serving 2.16 applies a --model_config_file, for the label moves of
components/serving/rollout.py: no TF Serving binary is installable here (docs/serving.md).

What it models, read in tensorflow/serving at tag 2.16.1:
- model_servers/server.cc, PollFilesystemAndReloadConfig: every --model_config_file_poll_wait_seconds the server
  parses the file and calls ServerCore::ReloadConfig with it, whether or not it changed; a failed reload is logged
  and the server carries on with what it had.
- model_servers/server_core.cc, ReloadConfig: the new config is taken, then UpdateModelVersionLabelMap() runs, and
  only when it succeeds AddModelsViaModelConfigList(), which hands the listed versions
  (model_version_policy.specific) to the storage path source: newly listed versions start loading, versions no
  longer listed are unloaded. A failed label update returns before that: nothing newly listed starts loading.
- server_core.cc, UpdateModelVersionLabelMap: every label must name a version whose state is kAvailable, else
  FailedPrecondition "Request to assign label to version V of model M, which is not currently available for
  inference". With --allow_version_labels_for_unavailable_models that is waived only for a label that does not yet
  name another version (contains_existing_label_with_different_version). The new label map replaces the old whole.
- A request without a version or label gets the highest available version (the servable's "latest").

Where it simplifies, said here: a version listed by an applied reload is loading until the next poll, when it is
available if its directory holds a saved_model.pb (a load shorter than one poll interval); the policy's versions
on disk only; one model per config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from components.serving import model_config, serving_dir

LOADING, AVAILABLE = "loading", "available"


class ModelServer:
    """One model server reading `config_file` beside the versions in `base` (a local serving dir)."""

    def __init__(self, base: str, config_file: str = model_config.CONFIG_FILE, allow_unavailable_labels: bool = True):
        self.base, self.path = base, Path(base) / config_file
        self.allow_unavailable_labels = allow_unavailable_labels  # --allow_version_labels_for_unavailable_models
        self.states: dict[int, str] = {}   # version -> LOADING | AVAILABLE (unloaded: absent)
        self.labels: dict[str, int] = {}   # the label map in force
        self.errors: list[str] = []        # each failed reload, as the server logs it
        self.polls = 0

    def poll(self, seconds: float = 0.0) -> None:
        """One poll of the config file (`seconds`: how long the caller waited, for Reload.wait)."""
        self.polls += 1
        on_disk = {v.number for v in serving_dir.versions(self.base)}
        self.states = {v: AVAILABLE if v in on_disk else state for v, state in self.states.items()}
        config = text_format.Parse(self.path.read_text(), model_server_config_pb2.ModelServerConfig())
        [model] = config.model_config_list.config
        try:
            self._update_labels(model)
        except ValueError as e:  # PollFilesystemAndReloadConfig: "failed to ReloadConfig", nothing else changes
            self.errors.append(str(e))
            return
        listed = set(model.model_version_policy.specific.versions)  # AddModelsViaModelConfigList
        self.states = {v: self.states.get(v, LOADING) for v in sorted(listed)}

    def _update_labels(self, model) -> None:
        new = {}
        for label, version in model.version_labels.items():
            existing = self.labels.get(label)
            waived = self.allow_unavailable_labels and existing in (None, version)
            if not waived and self.states.get(version) != AVAILABLE:
                raise ValueError(f"Request to assign label to version {version} of model {model.name}, which is not "
                                 "currently available for inference")
            new[label] = version
        self.labels = new

    def serves(self, label: Optional[str] = None) -> Optional[int]:
        """The version a request to `label` (None: no label) gets; None: refused."""
        if label is not None:
            version = self.labels.get(label)
            return version if self.states.get(version) == AVAILABLE else None
        available = [v for v, state in self.states.items() if state == AVAILABLE]
        return max(available) if available else None
