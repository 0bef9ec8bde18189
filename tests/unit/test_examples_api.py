"""examples/quickstart.py and examples/web.py (issue 14) run as a user runs them."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from starlette.testclient import TestClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_web_example_defers_from_a_request_and_the_worker_sends_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its store is sqlite:///cron.db, relative to here
    web = load("web")
    with TestClient(web.web) as client:
        first = client.post("/checkout", json={"order": 42, "email": "ada@example.com"})
        again = client.post("/checkout", json={"order": 42, "email": "ada@example.com"})
        bad = client.post("/checkout", json={"order": "many"})
    assert (first.status_code, first.json()["new"]) == (202, True)
    assert (again.status_code, again.json()) == (202, {"task": first.json()["task"], "new": False})
    assert bad.status_code == 422
    assert web.jobs.run_until_idle()["ok"] == 1
    assert web.outbox == [{"order": 42, "email": "ada@example.com", "attempt": 1}]


def test_the_quickstart_runs_its_deferred_task_and_its_cron_task(tmp_path: Path) -> None:
    """The quickstart as it is, but for its cron: every second instead of every minute (the
    next whole minute was up to 60 s of this test's time)."""
    code = (EXAMPLES / "quickstart.py").read_text()
    assert code.count('@app.cron("* * * * *")') == 1
    (tmp_path / "quickstart.py").write_text(code.replace('"* * * * *"', '"* * * * * *"'))
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "quickstart.py")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(0.5)
        assert proc.poll() is None  # still running: scheduler and worker
        # The deferred task is due at once, the cron task at the next whole second.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
            if _count(tmp_path, "DONE") >= 2:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "welcome, ada" in out and "report for" in out, err
    assert proc.returncode == 0 and "Traceback" not in err


def _count(workdir: Path, status: str) -> int:
    import sqlite3

    try:
        with sqlite3.connect(workdir / "cron.db") as c:
            return int(
                c.execute(
                    "SELECT count(*) FROM cronlab_tasks WHERE status = ?", (status,)
                ).fetchone()[0]
            )
    except sqlite3.Error:
        return 0


def _code(text: str) -> list[str]:
    lines = (line.split("#", 1)[0].rstrip() for line in text.splitlines())
    return [line for line in lines if line.strip()]


def test_the_readme_quickstart_is_the_example_and_fits_fifteen_lines() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert _code(block) == _code((EXAMPLES / "quickstart.py").read_text())
    assert len(_code(block)) <= 15
    assert len(block.splitlines()) <= 15, "blank lines and comments count too"
