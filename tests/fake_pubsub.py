"""A Pub/Sub stand-in on 127.0.0.1 for the real google-cloud-pubsub client (PUBSUB_EMULATOR_HOST).

It serves the one call the client makes to publish, google.pubsub.v1.Publisher/Publish, over gRPC with the
request and response types the client's own pubsub_v1 package defines, and keeps what it was sent. As the
service does (pubsub.proto, PublishRequest; the Publish reference page): a topic must be
`projects/{project}/topics/{topic}` and exist, else NOT_FOUND; a message needs data or an attribute, else
INVALID_ARGUMENT; each published message gets a message id. Any other method is UNIMPLEMENTED.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field

import grpc
from google.pubsub_v1.types import pubsub

from tests.fake_grpc import serve

_PUBLISH = "/google.pubsub.v1.Publisher/Publish"
_TOPIC_RE = re.compile(r"^projects/[^/]+/topics/[^/]+$")


@dataclass
class Published:
    topic: str
    data: bytes
    attributes: dict[str, str]

    def json(self) -> dict:
        return json.loads(self.data)


@dataclass
class FakePubsub:
    topics: set[str] = field(default_factory=set)
    published: list[Published] = field(default_factory=list)

    def start(self) -> str:
        """Serve on a free port; returns host:port for PUBSUB_EMULATOR_HOST."""
        self._lock = threading.Lock()
        self._server, address = serve(_Handler(self), workers=4)
        return address

    def stop(self) -> None:
        self._server.stop(grace=None)

    def publish(self, request, context):
        if not _TOPIC_RE.match(request.topic):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid [topics] name: ({request.topic})")
        if request.topic not in self.topics:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Topic not found: {request.topic}")
        ids = []
        with self._lock:
            for message in request.messages:
                if not message.data and not message.attributes:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "A message needs data or an attribute")
                self.published.append(Published(request.topic, bytes(message.data), dict(message.attributes)))
                ids.append(str(len(self.published)))
        return pubsub.PublishResponse.pb()(message_ids=ids)


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, fake: FakePubsub):
        self.fake = fake

    def service(self, details):
        if details.method == _PUBLISH:
            return grpc.unary_unary_rpc_method_handler(self.fake.publish, pubsub.PublishRequest.pb().FromString,
                                                       pubsub.PublishResponse.pb().SerializeToString)

        def unimplemented(request, context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{details.method} is not served by the stand-in")
        return grpc.unary_unary_rpc_method_handler(unimplemented, lambda b: b, lambda b: b)
