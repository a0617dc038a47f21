"""The wire between a dry run and its fork server: length-prefixed JSON, file descriptors with the first bytes."""

from __future__ import annotations

import json
import socket
import struct
from typing import Optional

HEADER = struct.Struct("!I")


def send(sock: socket.socket, message: dict, fds: tuple = ()) -> None:
    data = json.dumps(message).encode()
    data = HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    sock.sendall(data[sent:])


def receive(sock: socket.socket) -> tuple[Optional[dict], list[int]]:
    header, fds, _, _ = socket.recv_fds(sock, HEADER.size, 4)
    if not header:
        return None, fds
    while len(header) < HEADER.size:
        more = sock.recv(HEADER.size - len(header))
        if not more:
            return None, fds
        header += more
    (size,) = HEADER.unpack(header)
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None, fds
        chunks.append(chunk)
        remaining -= len(chunk)
    return json.loads(b"".join(chunks)), fds
