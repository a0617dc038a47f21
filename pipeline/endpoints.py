"""The one rule for a service endpoint in config or on the command line: http(s) with a host, plain http
only to this machine, so no credential travels unencrypted. (docs/internals.md)"""

from __future__ import annotations

from urllib.parse import ParseResult, urlparse

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# Kubernetes service names: traffic to them stays inside the cluster (a pod calling its own cluster's API).
CLUSTER_SUFFIXES = (".svc", ".svc.cluster.local")


def parse_endpoint(endpoint: str, what: str, bare_host: bool = True, in_cluster: bool = False) -> ParseResult:
    """The parsed URL; a ValueError names `what` when it is not http(s)://host[:port] (or, with
    `bare_host`, host[:port], meaning https) or is plain http to another machine (with `in_cluster`, plain
    http to a Kubernetes service name is allowed too)."""
    text = endpoint if "://" in endpoint or not bare_host else f"https://{endpoint}"
    url = urlparse(text)
    try:
        _ = url.port  # a non-numeric or out-of-range port raises here
    except ValueError:
        url = url._replace(netloc="")
    if url.scheme not in ("http", "https") or not url.hostname or url.username or url.password \
            or url.query or url.fragment:
        expected = "host[:port] or http(s)://host[:port]" if bare_host else "http(s)://host[:port][/path]"
        raise ValueError(f"{what} {endpoint!r}: expected {expected}, without credentials or query")
    cluster = in_cluster and url.hostname.endswith(CLUSTER_SUFFIXES)
    if url.scheme == "http" and url.hostname not in LOCAL_HOSTS and not cluster:
        where = f"this machine ({', '.join(LOCAL_HOSTS)})" + (
            " or a cluster service (*.svc, *.svc.cluster.local)" if in_cluster else "")
        raise ValueError(f"{what} {endpoint!r}: plain http is only allowed to {where}; use https")
    return url
