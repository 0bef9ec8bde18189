"""``cronlab`` as a user runs it from a shell: a subprocess, its output captured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def cronlab(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
