"""How a cluster's child tells its cluster why it could not go on: its one error line and
whether it is a configuration mistake (``config``) or a backend it could not reach or use in
time (``unavailable``), written to a pipe the cluster passes it (``CRONLAB_REPORT_FD``) instead
of to stderr. The cluster decides what to say: a configuration mistake at start-up stops it
with that one line (once, however many children said it); anything else is said with the
child's name, and the child is started again. Standard library only: ``cronlab.cli`` uses it
on every error."""

from __future__ import annotations

import os
import sys
from typing import Literal

ENV = "CRONLAB_REPORT_FD"
Kind = Literal["config", "unavailable"]
MAX_BYTES = 4_000  # under PIPE_BUF: one write, never interleaved with another child's


def send(kind: Kind, line: str) -> bool:
    """Report ``line`` to the cluster; False when this process is no cluster's child (or the
    pipe is gone): the caller prints it itself."""
    fd = os.environ.get(ENV)
    if not fd or not fd.isdecimal():
        return False
    record = f"{os.getpid()} {kind} {line}".encode("utf-8", "replace")[:MAX_BYTES] + b"\n"
    try:
        os.write(int(fd), record)
    except OSError:
        return False
    return True


def read(fd: int) -> dict[int, tuple[str, str]]:
    """Every report waiting on the (non-blocking) read end: pid → (kind, line)."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65_536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    found = {}
    for record in data.decode("utf-8", "replace").splitlines():
        pid, _, rest = record.partition(" ")
        kind, _, line = rest.partition(" ")
        if pid.isdecimal():
            found[int(pid)] = (kind, line)
    return found


def stderr(line: str) -> None:
    """Say ``line`` on the process's stderr, at once (a process's default ``say``)."""
    print(line, file=sys.stderr, flush=True)
