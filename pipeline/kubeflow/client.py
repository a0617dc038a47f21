"""The kfp.Client set-up for the kubeflow section, and errors a person can act on. Why: docs/internals.md."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from pathlib import Path
from typing import Callable, Optional, TypeVar

from pipeline.config import Config, resolve
from pipeline.errors import ConfigError, KubeflowError

T = TypeVar("T")

# The oldest open-source KFP backend that runs the compiled spec, and why (kubeflow/pipelines at the tags):
# - 2.5.0: the driver replaces {{$.pipeline_job_resource_name}} and {{$.pipeline_job_uuid}} in a constant
#   input (backend/src/v2/driver/resolve.go, #11599): the run lease names its run with them; earlier drivers
#   leave the text, and RunLease refuses to start;
# - 2.4.0: an exit task runs as the Argo exit hook of the DAG it follows (3059f7c): ReleaseRunLease;
# - the exit task takes no PipelineTaskFinalStatus (the API server refuses one before 2.14.0, "task final
#   status not supported yet", #11953), so 2.14 is not needed: it reads the run's state from the API instead.
# docs/kubeflow.md lists them.
MIN_BACKEND_VERSION = (2, 5, 0)
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


@dataclasses.dataclass(frozen=True)
class Health:
    """The API server's GET /apis/v2beta1/healthz answer: multi-user mode and its release (TAG_NAME)."""
    multi_user: bool
    tag_name: str

    @property
    def version(self) -> Optional[tuple[int, int, int]]:
        m = _VERSION_RE.match(self.tag_name)
        return (int(m[1]), int(m[2]), int(m[3])) if m else None


def version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def require_version(health: Health, host: str) -> None:
    """KubeflowError unless the server is at least MIN_BACKEND_VERSION; a server that does not say which release
    it is is refused too (fail closed)."""
    need = version_text(MIN_BACKEND_VERSION)
    if health.version is None:
        raise KubeflowError(f"the KFP API server at {host} does not say which release it is (healthz tag_name "
                            f"{health.tag_name!r}); the compiled pipeline needs Kubeflow Pipelines {need} or later "
                            "(docs/kubeflow.md), so nothing is sent: set TAG_NAME on its ml-pipeline deployment to "
                            "the release it runs")
    if health.version < MIN_BACKEND_VERSION:
        raise KubeflowError(f"the KFP API server at {host} is Kubeflow Pipelines {version_text(health.version)}; "
                            f"the compiled pipeline needs {need} or later (docs/kubeflow.md says why): upgrade it")


def read_token(config: Config) -> Optional[str]:
    """The bearer token from kubeflow.token_file or the variable kubeflow.token_env names; None
    when neither is set. A source that is set but missing or empty is a ConfigError."""
    kf = config.kubeflow
    if kf.token_file:
        path = Path(resolve(kf.token_file))
        if not path.is_file():
            raise ConfigError(f"kubeflow.token_file {kf.token_file!r}: no such file ({path})")
        token, where = path.read_text().strip(), f"kubeflow.token_file {kf.token_file!r}"
    elif kf.token_env:
        token, where = os.environ.get(kf.token_env, "").strip(), f"kubeflow.token_env: ${kf.token_env}"
        if not token:
            raise ConfigError(f"kubeflow.token_env names {kf.token_env}, which is not set or empty in the "
                              "environment; export it (e.g. `export "
                              f"{kf.token_env}=$(kubectl create token default -n {kf.namespace})`)")
    else:
        return None
    if not token:
        raise ConfigError(f"{where}: the token is empty")
    if any(c.isspace() or not c.isprintable() for c in token):
        raise ConfigError(f"{where}: the token contains whitespace or control characters; expected one bearer token")
    return token


def make_client(config: Config):
    """A kfp.Client for kubeflow.host, with the token as its bearer token."""
    if config.kubeflow is None:
        raise ConfigError("this command needs a kubeflow section in the config (see configs/kubeflow.yaml)")
    kf = config.kubeflow
    token = read_token(config)
    ca = None
    if kf.ssl_ca_cert:
        ca = resolve(kf.ssl_ca_cert)
        if not Path(ca).is_file():
            raise ConfigError(f"kubeflow.ssl_ca_cert {kf.ssl_ca_cert!r}: no such file ({ca})")
    require_version(check_server(config, token, ca), kf.host)
    import kfp

    with warnings.catch_warnings():
        # "This client only works with Kubeflow Pipeline v2.0.0-beta.2 and later": we target 2.x.
        warnings.simplefilter("ignore", FutureWarning)
        # The namespace is also passed to every call: kfp.Client otherwise takes it from
        # ~/.config/kfp/context.json when it is the default "kubeflow".
        return call(config, "connecting to the KFP API server", lambda: kfp.Client(
            host=kf.host, namespace=kf.namespace, existing_token=token, ssl_ca_cert=ca))


def check_server(config: Config, token: Optional[str] = None, ca: Optional[str] = None) -> Health:
    """GET /apis/v2beta1/healthz once, with the token: the server's answer, or a KubeflowError saying what is
    wrong. kfp.Client makes this call itself, but retries an answered error (a 401 included) five times, 5 s
    apart, and then reports a timeout. Read as JSON: the generated model drops `tag_name`, which the server's
    own handler writes (backend/src/apiserver/main.go, healthzResponse; in every 2.x release)."""
    import kfp_server_api

    configuration = kfp_server_api.Configuration(host=config.kubeflow.host)
    if token:
        configuration.api_key["authorization"] = token
        configuration.api_key_prefix["authorization"] = "Bearer"
    if ca:
        configuration.ssl_ca_cert = ca
    api = kfp_server_api.HealthzServiceApi(kfp_server_api.ApiClient(configuration))
    answer = call(config, "health check of the KFP API server",
                  lambda: api.get_healthz(_request_timeout=30, _preload_content=False))
    try:
        body = json.loads(answer.data or b"{}")
    except ValueError:
        raise KubeflowError(f"health check of the KFP API server at {config.kubeflow.host}: the answer is not "
                            "JSON; is kubeflow.host the API server?") from None
    return Health(bool(body.get("multi_user")), str(body.get("tag_name") or ""))


def call(config: Config, action: str, fn: Callable[[], T]) -> T:
    """fn(), with the API server's and the network's failures as one KubeflowError line."""
    import kfp_server_api
    import urllib3

    host = config.kubeflow.host
    try:
        return fn()
    except kfp_server_api.ApiException as e:
        raise KubeflowError(describe_api_error(e, action, config)) from None
    except (urllib3.exceptions.HTTPError, OSError, TimeoutError) as e:
        raise KubeflowError(f"{action}: cannot reach the KFP API server at {host}: {e}; is kubeflow.host right "
                            "(a port-forward running)?") from None


def describe_api_error(e, action: str, config: Config) -> str:
    try:
        message = json.loads(e.body or "{}").get("message") or e.reason
    except (ValueError, AttributeError):
        message = e.body or e.reason
    kf = config.kubeflow
    if e.status == 401:
        source = (f"the token in {kf.token_file}" if kf.token_file else f"the token in ${kf.token_env}"
                  if kf.token_env else "no token (set kubeflow.token_env or kubeflow.token_file)")
        return f"{action}: not authenticated (401): {message}; the server refused {source}"
    if e.status == 403:
        return (f"{action}: permission denied (403): {message}; the token's identity needs access to "
                f"namespace {kf.namespace} (a Kubeflow profile contributor)")
    if e.status == 404:
        return f"{action}: not found (404): {message}"
    return f"{action}: HTTP {e.status}: {message}"
