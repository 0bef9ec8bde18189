"""The live run's reaper: what cleans up after a lab that died without stopping its run.

The lab starts ``python -m cronlab.lab.web.reaper FOLDER`` with a pipe on its stdin and writes
there the process group of everything it starts for the run, one number a line. The reaper
reads until the pipe closes — which the kernel does when the lab exits, however it exits
(SIGKILL and the OOM killer included) — then stops those groups (SIGCONT, SIGTERM, SIGKILL
after a grace) and removes the folder. A lab that stops its run itself kills its reaper first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "cronlab-live-"
GRACE_S = 8.0


def main(argv: list[str]) -> int:
    """Wait for the lab to exit, then clean up its run; 2 for a folder that is not a run's."""
    folder = Path(argv[0])
    if not is_run_folder(folder):
        print(f"cronlab reaper: {folder} is not a live run's folder", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the lab's terminal is the lab's
    groups = [int(line) for line in sys.stdin.buffer.read().split()]  # until the lab exits
    stop([g for g in groups if ours(g, folder)])
    shutil.rmtree(folder, ignore_errors=True)
    return 0


def is_run_folder(folder: Path) -> bool:
    """A folder the lab made for a run: ``cronlab-live-*`` in the temporary directory."""
    parent = folder.resolve().parent
    return folder.name.startswith(PREFIX) and parent == Path(tempfile.gettempdir()).resolve()


def ours(pgid: int, folder: Path) -> bool:
    """Whether group ``pgid`` is still the run's: its leader's command names the run's store (a
    group whose leader has gone, or whose number now belongs to another, is left alone).
    Without ``/proc`` the number is trusted."""
    if not Path("/proc/self").exists():
        return True
    try:
        return str(folder).encode() in Path(f"/proc/{pgid}/cmdline").read_bytes()
    except OSError:
        return False


def stop(groups: list[int]) -> None:
    """SIGCONT (a paused process cannot die politely) and SIGTERM every group, then SIGKILL
    what is left after ``GRACE_S``."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        for g in groups:
            _signal(g, sig)
    deadline = time.monotonic() + GRACE_S
    while any(_alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    for g in groups:
        _signal(g, signal.SIGKILL)


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
