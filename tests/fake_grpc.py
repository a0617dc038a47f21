"""The loopback gRPC server the gRPC stand-ins (fake_pubsub.py, fake_monitoring.py) answer on."""

from __future__ import annotations

from concurrent import futures

import grpc


def serve(handler: grpc.GenericRpcHandler, workers: int) -> tuple[grpc.Server, str]:
    """A started server on a free port of 127.0.0.1, and its host:port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers([handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"
