"""The lab cleans up its live run however it exits (issue 13): SIGKILLed, it left its live
cluster running and its temporary folder behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from .conftest import wait_until

pytestmark = pytest.mark.integration
SMALL = {"replicas": 2, "workers": 1, "count": 50, "drain_s": 5, "lead_s": 2, "ttl": 3}


def test_a_sigkilled_lab_leaves_no_live_cluster_and_no_folder(tmp_path: Path) -> None:
    with lab(tmp_path) as (proc, url):
        started = post(url + "/api/live/start", SMALL)
        assert started["running"], started
        (folder,) = tmp_path.glob("cronlab-live-*")
        cluster = int(started["events"][0]["text"].split("cluster pid ")[1].split(":")[0])
        wait_until(lambda: len(group(cluster)) == 4, 30, "the cluster and its 3 children")
        proc.kill()  # SIGKILL: no lifespan, no atexit, nothing of the lab runs
        proc.wait()
        wait_until(lambda: not group(cluster), 15, "no process of the live cluster alive")
        wait_until(lambda: not folder.exists(), 5, "the live run's folder removed")


def group(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(stat.parent.name))
    return found


def post(url: str, body: dict[str, object]) -> dict[str, object]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})  # no Origin
    with urllib.request.urlopen(req, timeout=60) as res:
        answer: dict[str, object] = json.load(res)
    return answer


class lab:
    """``cronlab lab`` on a free port with its temporary folders under ``tmp``; whatever
    happens, nothing it started is left running at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    def __enter__(self) -> tuple[subprocess.Popen[bytes], str]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        argv = [sys.executable, "-m", "cronlab", "lab", "--port", str(port), "--no-open"]
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(url), 30, "the lab to answer")
        return self.proc, url

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stat in Path("/proc").glob("[0-9]*/environ"):  # what an orphaned run left
            try:
                if f"TMPDIR={self.tmp}".encode() in stat.read_bytes().split(b"\0"):
                    os.kill(int(stat.parent.name), signal.SIGKILL)
            except OSError:
                pass


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/openapi.json", timeout=2):
            return True
    except OSError:
        return False
