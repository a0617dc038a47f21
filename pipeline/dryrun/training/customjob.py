"""A local Vertex AI JobService for the unmodified TFX training client. Why: docs/internals.md."""

from __future__ import annotations

import datetime
import json
import socket
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import grpc
from google.cloud.aiplatform_v1.types import (
    custom_job,
    hyperparameter_tuning_job,
    job_service,
    job_state,
    pipeline_job,
    pipeline_service,
)
from google.protobuf import empty_pb2, json_format

from pipeline.dryrun.job_board import JobBoard
from pipeline.dryrun.training.tuning import TuningService
from pipeline.dryrun.training.workers import JobRun
from pipeline.errors import JobRefused

_SERVICE = "/google.cloud.aiplatform.v1.JobService/"
# The dry runs' own PipelineJobs (job_board.py): what a run lease or an exit handler asks about a run.
_GET_PIPELINE_JOB = "/google.cloud.aiplatform.v1.PipelineService/GetPipelineJob"
_STATES = {"SUCCEEDED": job_state.JobState.JOB_STATE_SUCCEEDED, "FAILED": job_state.JobState.JOB_STATE_FAILED,
           "RUNNING": job_state.JobState.JOB_STATE_RUNNING, "PENDING": job_state.JobState.JOB_STATE_PENDING}
_CustomJob = custom_job.CustomJob.pb()
_Create = job_service.CreateCustomJobRequest.pb()
_Get = job_service.GetCustomJobRequest.pb()
_GetPipelineJob = pipeline_service.GetPipelineJobRequest.pb()
_PipelineJob = pipeline_job.PipelineJob.pb()
_Tuning = hyperparameter_tuning_job.HyperparameterTuningJob.pb()
_TUNING_CALLS = {"CreateHyperparameterTuningJob": job_service.CreateHyperparameterTuningJobRequest.pb(),
                 "GetHyperparameterTuningJob": job_service.GetHyperparameterTuningJobRequest.pb(),
                 "CancelHyperparameterTuningJob": job_service.CancelHyperparameterTuningJobRequest.pb()}


class VertexEmulator:
    """Context manager: the JobService (and the dry runs' PipelineJobs), its proxy and trust files; `env` points
    a process at them."""

    def __init__(self, project: str, region: str, workdir: Path,
                 start_job: Callable[[str, dict], JobRun], report: Callable[[str], None], board: JobBoard):
        self.project, self.region, self.host = project, region, f"{region}-aiplatform.googleapis.com"
        self.workdir, self.start_job, self.report, self.board = workdir, start_job, report, board
        self.jobs: dict[str, tuple[JobRun, object]] = {}
        # HyperparameterTuningJobs, whose trials are CustomJobs started as start_job starts the Trainer's.
        self.tuning = TuningService(f"projects/{project}/locations/{region}", start_job, workdir / "tuning", report)
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def __enter__(self) -> "VertexEmulator":
        from pipeline.dryrun.training import trust

        self.workdir.mkdir(parents=True, exist_ok=True)
        key, cert, ca = trust.server_certificate(self.host)
        (self.workdir / "ca.pem").write_bytes(ca)
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self._grpc.add_generic_rpc_handlers([_Handler(self)])
        grpc_port = self._grpc.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
        self._grpc.start()
        self._proxy = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(self, grpc_port))
        self._proxy.daemon_threads = True
        threading.Thread(target=self._proxy.serve_forever, daemon=True).start()
        proxy = f"http://127.0.0.1:{self._proxy.server_address[1]}"
        (self.workdir / "service-account.json").write_text(json.dumps(
            trust.service_account_key(self.project, f"{proxy}/token")))
        self.env = {"grpc_proxy": proxy, "no_grpc_proxy": "127.0.0.1,localhost",
                    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(self.workdir / "ca.pem"),
                    "GOOGLE_APPLICATION_CREDENTIALS": str(self.workdir / "service-account.json"),
                    "NO_GCE_CHECK": "True"}
        return self

    def __exit__(self, *exc) -> None:
        self.tuning.stop()
        for run, _ in self.jobs.values():
            run.stop()
        self._proxy.shutdown()
        self._grpc.stop(grace=None)

    def refuse(self, message: str) -> str:
        self.errors.append(message)
        self.report(f"Vertex AI emulator: {message}")
        return message

    # -- the two calls TFX makes ----------------------------------------------

    def create(self, request, context):
        parent = f"projects/{self.project}/locations/{self.region}"
        if request.parent != parent:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, self.refuse(
                f"CreateCustomJob parent {request.parent!r}: the dry run emulates {parent} (vertex.project/region)"))
        with self._lock:
            name = f"{parent}/customJobs/{len(self.jobs) + 1}"
        job = json_format.MessageToDict(request.custom_job, preserving_proto_field_name=True)
        try:
            run = self.start_job(name, job)
        except JobRefused as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, self.refuse(f"CustomJob refused: {e}"))
        answer = _CustomJob()
        answer.CopyFrom(request.custom_job)
        answer.name = name
        answer.state = _STATES["PENDING"]
        answer.create_time.FromDatetime(datetime.datetime.now(datetime.timezone.utc))
        self.jobs[name] = (run, answer)
        return answer

    def get(self, request, context):
        if request.name not in self.jobs:
            context.abort(grpc.StatusCode.NOT_FOUND, f"CustomJob {request.name} not found")
        run, stored = self.jobs[request.name]
        run.done.wait()
        answer = _CustomJob()
        answer.CopyFrom(stored)
        answer.state = _STATES[run.state]
        answer.end_time.FromDatetime(datetime.datetime.now(datetime.timezone.utc))
        if run.error:
            answer.error.code, answer.error.message = 13, run.error
        return answer


    # -- what the Tuner's client (components/tuner/vertex_job.py) calls ----------

    def create_tuning(self, request, context):
        job = json_format.MessageToDict(request.hyperparameter_tuning_job, preserving_proto_field_name=True)
        try:
            return json_format.ParseDict(self.tuning.create(request.parent, job), _Tuning())
        except JobRefused as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, self.refuse(str(e)))

    def get_tuning(self, request, context):
        try:
            return json_format.ParseDict(self.tuning.get(request.name), _Tuning())
        except KeyError as e:
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))

    def cancel_tuning(self, request, context):
        try:
            self.tuning.cancel(request.name)
        except KeyError as e:
            context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        return empty_pb2.Empty()

    def get_pipeline_job(self, request, context):
        found = self.board.get(request.name)
        if found is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"PipelineJob {request.name} not found")
        return pipeline_job.PipelineJob.pb(found)


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, emulator: VertexEmulator):
        self.emulator = emulator

    def service(self, details):
        serialize = _CustomJob.SerializeToString
        if details.method == _SERVICE + "CreateCustomJob":
            return grpc.unary_unary_rpc_method_handler(self.emulator.create, _Create.FromString, serialize)
        if details.method == _SERVICE + "GetCustomJob":
            return grpc.unary_unary_rpc_method_handler(self.emulator.get, _Get.FromString, serialize)
        tuning = details.method[len(_SERVICE):] if details.method.startswith(_SERVICE) else ""
        if tuning in _TUNING_CALLS:
            handler = {"CreateHyperparameterTuningJob": self.emulator.create_tuning,
                       "GetHyperparameterTuningJob": self.emulator.get_tuning,
                       "CancelHyperparameterTuningJob": self.emulator.cancel_tuning}[tuning]
            answer = empty_pb2.Empty if tuning.startswith("Cancel") else _Tuning
            return grpc.unary_unary_rpc_method_handler(handler, _TUNING_CALLS[tuning].FromString,
                                                       answer.SerializeToString)
        if details.method == _GET_PIPELINE_JOB:
            return grpc.unary_unary_rpc_method_handler(self.emulator.get_pipeline_job, _GetPipelineJob.FromString,
                                                       _PipelineJob.SerializeToString)

        def unimplemented(request, context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, self.emulator.refuse(
                f"{details.method} is not emulated (only JobService CreateCustomJob, GetCustomJob and Create, Get "
                "and CancelHyperparameterTuningJob, and PipelineService GetPipelineJob, are)"))
        return grpc.unary_unary_rpc_method_handler(unimplemented, lambda b: b, lambda b: b)


def _proxy_handler(emulator: VertexEmulator, grpc_port: int) -> type:
    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_CONNECT(self) -> None:  # noqa: N802 - the HTTP method's name
            if self.path != f"{emulator.host}:443":
                emulator.refuse(f"a task tried to reach {self.path} over gRPC; only {emulator.host} is emulated")
                self.send_error(403, "only the Vertex AI JobService is emulated")
                return
            upstream = socket.create_connection(("127.0.0.1", grpc_port))
            self.send_response(200, "Connection established")
            self.end_headers()
            back = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
            back.start()
            _pipe(self.connection, upstream)
            back.join()
            self.close_connection = True

        def do_POST(self) -> None:  # noqa: N802 - a token request, should a client not sign its own JWT
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"access_token": "dry-run", "expires_in": 3600, "token_type": "Bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Proxy


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass
