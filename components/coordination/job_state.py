"""Is the run that holds a lease over? Asked of its backend (a Vertex AI PipelineJob, a Kubeflow Pipelines run);
None whenever the backend can't say, so the lease is then treated as held (fail closed)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Optional, Protocol

log = logging.getLogger(__name__)

# One question to a backend waits at most this long (a run waiting for a lease asks again later).
REQUEST_TIMEOUT_SECONDS = 30.0

# aiplatform_v1 PipelineState: the states a PipelineJob never leaves.
VERTEX_TERMINAL = ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")
# kubeflow/pipelines backend/api/v2beta1/run.proto, RuntimeState: the states a run never leaves.
KUBEFLOW_TERMINAL = ("SUCCEEDED", "SKIPPED", "FAILED", "CANCELED")


class JobStates(Protocol):
    """A cancelled run's exit handler may never run (Vertex documents nothing about it; the open-source
    backend's terminate fails exit handlers, kubeflow/pipelines#6101), so its lease would block every later
    run until it expires; the run's own backend knows it is over."""

    def ended(self, owner: str, run_id: str) -> Optional[str]:
        """The terminal state of the run `owner` (with its backend id `run_id`), or None while it runs or when
        the backend cannot say."""

    def failures(self, owner: str, run_id: str) -> Optional[list[tuple[str, str]]]:
        """(task, error) of the run's failed tasks, not counting a DAG task that failed because a task in it did;
        None when the backend cannot say."""


@dataclasses.dataclass(frozen=True)
class VertexJobs:
    """PipelineJob.get by the owner's resource name (projects/P/locations/L/pipelineJobs/J), with Application
    Default Credentials; `endpoint` (a local stand-in in tests) gets anonymous credentials over plain http."""
    endpoint: str = ""

    def ended(self, owner: str, run_id: str = "") -> Optional[str]:
        job = self._job(owner)
        state = job.state.name if job is not None else ""
        return state if state in VERTEX_TERMINAL else None

    def failures(self, owner: str, run_id: str = "") -> Optional[list[tuple[str, str]]]:
        job = self._job(owner)
        if job is None:
            return None
        details = list(job.job_detail.task_details)
        return _leaf_failures([(d.task_id, d.parent_task_id, d.task_name, d.state.name == "FAILED", d.error.message)
                               for d in details])

    def _job(self, owner: str):
        """The PipelineJob's resource (aiplatform_v1 PipelineJob), or None when it can't be had."""
        parts = owner.split("/")
        if len(parts) != 6 or parts[0] != "projects" or parts[2] != "locations" or parts[4] != "pipelineJobs":
            log.warning("run %r is not a PipelineJob resource name; its state is not asked", owner)
            return None
        try:
            from google.api_core import exceptions as gexc
            from google.cloud import aiplatform_v1
        except ImportError as e:
            log.warning("cannot ask Vertex AI about %s: %s", owner, e)
            return None
        credentials, options = None, {"api_endpoint": f"{parts[3]}-aiplatform.googleapis.com"}
        if self.endpoint:
            options = {"api_endpoint": self.endpoint}
            if self.endpoint.startswith("http://"):
                from google.auth.credentials import AnonymousCredentials

                credentials = AnonymousCredentials()
        try:
            # One call, no retries: a run waiting for the lease asks again later (ASK_EVERY_SECONDS in lease.py).
            # REST to a given endpoint (a stand-in in tests); else gRPC, the client's own default.
            service = aiplatform_v1.PipelineServiceClient(credentials=credentials, client_options=options,
                                                          transport="rest" if self.endpoint else None)
            return service.get_pipeline_job(name=owner, retry=None, timeout=REQUEST_TIMEOUT_SECONDS)
        except (gexc.GoogleAPICallError, gexc.RetryError, OSError, ValueError) as e:
            log.warning("could not ask Vertex AI about %s (%s: %s); treating it as running", owner,
                        type(e).__name__, e)
            return None


@dataclasses.dataclass(frozen=True)
class KubeflowRuns:
    """GET /apis/v2beta1/runs/{run_id} from inside the cluster: `host` is the API server's in-cluster address,
    `token_file` the pod's projected service-account token for it (multi-user Kubeflow), if present."""
    host: str
    token_file: str = ""

    def ended(self, owner: str, run_id: str) -> Optional[str]:
        run = self._run(owner, run_id)
        state = str(run.state or "") if run is not None else ""
        return state if state in KUBEFLOW_TERMINAL else None

    def failures(self, owner: str, run_id: str) -> Optional[list[tuple[str, str]]]:
        run = self._run(owner, run_id)
        if run is None:
            return None
        details = (run.run_details.task_details if run.run_details else None) or []
        return _leaf_failures([(d.task_id, d.parent_task_id, d.display_name, str(d.state) == "FAILED",
                                (d.error.message if d.error else "") or "") for d in details])

    def _run(self, owner: str, run_id: str):
        """The run (kfp_server_api V2beta1Run), or None when it can't be had."""
        if not run_id:
            log.warning("run %s has no run id recorded; its state is not asked", owner)
            return None
        try:
            import kfp_server_api
            import urllib3
        except ImportError as e:
            log.warning("cannot ask the KFP API about run %s: %s", run_id, e)
            return None
        configuration = kfp_server_api.Configuration(host=self.host)
        token = _read_token(self.token_file)
        if token:
            configuration.api_key["authorization"] = token
            configuration.api_key_prefix["authorization"] = "Bearer"
        api = kfp_server_api.RunServiceApi(kfp_server_api.ApiClient(configuration))
        try:
            return api.get_run(run_id=run_id, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        except (kfp_server_api.ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            log.warning("could not ask the KFP API about run %s (%s); treating it as running", run_id,
                        getattr(e, "status", None) or f"{type(e).__name__}: {e}")
            return None


def _leaf_failures(tasks: list[tuple[str, str, str, bool, str]]) -> list[tuple[str, str]]:
    """(name, error) of the failed tasks among (id, parent id, name, failed, error) that are no task's parent."""
    parents = {parent for _, parent, _, _, _ in tasks if parent}
    return [(name, error) for task_id, _, name, failed, error in tasks if failed and task_id not in parents]


def _read_token(path: str) -> str:
    if not path:
        return ""
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""  # a single-user cluster mounts none
