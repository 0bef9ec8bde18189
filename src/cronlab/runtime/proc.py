"""Where a process is: what makes a pid in the store's registry *this* process, here.

A pid alone names nothing outside its machine and PID namespace: two pods on one store each
have a pid 7, and a pid is reused once its process exits. A registered process therefore
carries its ``place``: the kernel's boot id (this machine, this boot), the inode of the PID
namespace its pid is a number in, and its start time in clock ticks since boot.
``chaos`` signals a registered pid only where ``place(pid)`` here equals the one stored.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PARENT_ENV = "CRONLAB_CLUSTER_PID"  # in a cluster's child: the pid of the cluster it dies with
PR_SET_PDEATHSIG = 1


def place(pid: int) -> str | None:
    """``BOOT:NAMESPACE:START`` of ``pid`` as this process sees it (its pid is a number in
    this process's PID namespace); None where /proc cannot tell (not Linux, gone)."""
    try:
        boot = BOOT_ID.read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    start = start_ticks(pid)
    return None if start is None else f"{boot}:{namespace}:{start}"


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # (the command may hold spaces and parentheses)
    return int(fields[19]) if len(fields) > 19 and fields[19].isdecimal() else None


def here(pid: int, recorded: str | None) -> bool:
    """True when ``pid`` here is the process registered at ``recorded``: the same machine
    and boot, the same PID namespace, and the same start (not a pid reused since)."""
    return recorded is not None and place(pid) == recorded


def alive(pid: int) -> bool:
    """True when ``pid`` runs (not a zombie) and is a cronlab process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state != "Z" and b"cronlab" in cmdline


def die_with_parent() -> None:
    """In a cluster's child (``PARENT_ENV`` set), first thing after exec: SIGTERM when the
    cluster dies, however it dies (SIGKILL too), so no scheduler or worker outlives it (Linux
    ``PR_SET_PDEATHSIG``; elsewhere the process group is all there is). A child whose cluster
    died before this exits at once, quietly: it was started for nobody.

    The child sets this itself, not the cluster between fork and exec (``preexec_fn``): that
    runs Python's at-fork callbacks in the cluster around each fork, where CPython discards
    any exception raised — a Ctrl-C arriving as the cluster started its children was lost so,
    and the cluster ran on (``test_cluster_startup.py``)."""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is None:
        return
    if sys.platform.startswith("linux"):
        import ctypes  # (only in a cluster's child)

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if not parent.isdecimal() or os.getppid() != int(parent):
        sys.exit(0)
