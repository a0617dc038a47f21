"""A local Cloud Resource Manager for the one gRPC call aiplatform makes on submit.

PipelineJob.submit() checks that the pipeline bucket belongs to the project
by asking Resource Manager for the project number over gRPC, at a fixed
googleapis.com host. gRPC honours `grpc_proxy` and GRPC_DEFAULT_SSL_ROOTS_FILE_PATH,
so a CONNECT proxy on 127.0.0.1 forwards that host to a local TLS gRPC server
whose certificate the test trusts. Offline without it, the call retries for 60 s.
"""

from __future__ import annotations

import datetime
import socket
import socketserver
import threading
from concurrent import futures
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.cloud.resourcemanager_v3.types import GetProjectRequest, Project

HOST = "cloudresourcemanager.googleapis.com"


def _self_signed(directory: Path) -> tuple[bytes, bytes, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path = directory / "fake-resource-manager.pem"
    path.write_bytes(cert_pem)
    return cert_pem, key_pem, path


class FakeResourceManager:
    """GetProject answers projects/<number> for every project in `numbers`, NOT_FOUND otherwise."""

    def __init__(self, directory: Path, numbers: dict[str, str]):
        self.numbers = numbers
        self.calls: list[str] = []
        cert, key, self.ca_file = _self_signed(directory)
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self._grpc.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "google.cloud.resourcemanager.v3.Projects",
            {"GetProject": grpc.unary_unary_rpc_method_handler(
                self._get_project, request_deserializer=GetProjectRequest.deserialize,
                response_serializer=Project.serialize)})])
        grpc_port = self._grpc.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
        self._proxy = _ConnectProxy(("127.0.0.1", 0), _ConnectHandler)
        self._proxy.target = ("127.0.0.1", grpc_port)

    def _get_project(self, request: GetProjectRequest, context) -> Project:
        project_id = request.name.removeprefix("projects/")
        self.calls.append(project_id)
        if project_id not in self.numbers:
            context.abort(grpc.StatusCode.NOT_FOUND, f"project {project_id} not found")
        return Project(name=f"projects/{self.numbers[project_id]}", project_id=project_id)

    def start(self) -> dict[str, str]:
        """Start both servers; returns the environment a client process needs."""
        self._grpc.start()
        threading.Thread(target=self._proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return {"grpc_proxy": f"http://127.0.0.1:{self._proxy.server_address[1]}",
                "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(self.ca_file)}

    def stop(self) -> None:
        self._proxy.shutdown()
        self._proxy.server_close()
        self._grpc.stop(grace=None)


class _ConnectProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    target: tuple[str, int]


class _ConnectHandler(socketserver.StreamRequestHandler):
    def handle(self):
        request = self.rfile.readline().decode("latin-1").split()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        if len(request) < 2 or request[0] != "CONNECT" or request[1] != f"{HOST}:443":
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\n\r\n")
            return
        upstream = socket.create_connection(self.server.target)
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True).start()
        _pipe(self.connection, upstream)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
