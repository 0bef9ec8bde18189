"""What a SQLite user pays to start: ``import cronlab``, and ``import cronlab`` + opening a SQLite
store (what every ``App`` and engine process does), against the code before the lean-package
change (commit BASELINE, its ``src/`` taken from git into a temporary folder) in the same run.

Each figure is the median wall time of a fresh interpreter doing just that, the two versions'
runs interleaved; it also lists which heavy libraries each imported.

    .venv/bin/python bench/import_time.py [--runs 15] [--baseline bc8d06f]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "psycopg", "psycopg_pool", "redis", "etcd3gw", "starlette", "uvicorn")
CASES = {
    "import cronlab": "import cronlab",
    "import + open a SQLite store": ("import cronlab, sys; cronlab.App(sys.argv[1]).store()"),
}


def baseline_src(commit: str, into: Path) -> Path:
    """``src/`` as it was at ``commit``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def once(src: Path, code: str, db: Path) -> tuple[float, set[str]]:
    """Seconds for a fresh interpreter to run ``code`` with ``src`` first on its path."""
    argv = [sys.executable, "-X", "importtime", "-c", code, f"sqlite:///{db}"]
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    took = time.perf_counter() - t
    names = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    return took, names & set(HEAVY)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--baseline", default="bc8d06f")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline_src(args.baseline, Path(tmp) / "old")
        versions = {"now": ROOT / "src", f"{args.baseline}": old}
        for case, code in CASES.items():
            times: dict[str, list[float]] = {v: [] for v in versions}
            heavy: dict[str, set[str]] = {}
            for i in range(args.runs):
                for name, src in versions.items():
                    took, loaded = once(src, code, Path(tmp) / f"{name}-{i}.db")
                    times[name].append(took)
                    heavy[name] = loaded
            now, base = (statistics.median(times[v]) for v in versions)
            print(
                f"{case}: now {now * 1000:.0f} ms, {args.baseline} {base * 1000:.0f} ms, "
                f"ratio {now / base:.2f} (median of {args.runs}, interleaved)"
            )
            for name in versions:
                print(f"  heavy modules imported by {name}: {sorted(heavy[name]) or 'none'}")


if __name__ == "__main__":
    main()
