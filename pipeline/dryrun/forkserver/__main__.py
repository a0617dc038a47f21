"""The fork server's entry: python -m pipeline.dryrun.forkserver <socket fd> <parent pid> <module>..."""

import signal
import socket
import sys

from pipeline.dryrun.forkserver.server import serve


def main(argv: list[str]) -> int:
    fd, parent, modules = int(argv[0]), int(argv[1]), argv[2:]
    sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the tasks and the dry run, which closes us
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # The dry run's end, or its death (even by SIGKILL), closes its end of the socket: we stop then.
    # (Not PR_SET_PDEATHSIG: it fires when the *thread* that started us ends, e.g. a CustomJob's.)
    return serve(sock, parent, modules)


sys.exit(main(sys.argv[1:]))
