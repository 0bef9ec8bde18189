"""Secrets a user typed never come back in an error (issue 28, items 8 and 9): a libpq keyword
string, a password holding an unencoded ``/``, ``?``, ``#`` or ``@``, a URL with no host after
the password, a webhook URL with userinfo; and a password typed on the command line does not
stay in the process's own command line (``ps``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance
SECRET = "hunter2"


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a refused command (exit 2, nothing on stdout)."""
    assert done.returncode == 2, done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cronlab: error: "), done.stderr[-500:]
    assert done.stdout == ""
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        # a libpq keyword string, given as --store
        ["status", "--store", f"host=127.0.0.1 password={SECRET} dbname=x"],
        ["status", "--store", f"host=127.0.0.1 password = '{SECRET} with spaces' dbname=x"],
        ["status", "--store", f"dbname=x sslpassword={SECRET}"],
        # an unencoded / ? # or @ in the password: urllib and libpq cut the URL there
        ["status", "--store", f"postgresql://u:hun/{SECRET}@127.0.0.1:1/x"],
        ["status", "--store", f"postgresql://u:{SECRET}/x@127.0.0.1:1/x"],
        ["status", "--store", f"postgresql://u:a#{SECRET}@127.0.0.1:1/x"],
        ["status", "--store", f"postgresql://u:a?{SECRET}@127.0.0.1:1/x"],
        ["status", "--store", f"postgresql://u:a@{SECRET}@127.0.0.1:1/x"],
        ["worker", "--queue", f"redis://u:{SECRET}/x@127.0.0.1:1/0"],
        ["worker", "--queue", f"redis://:a#{SECRET}@127.0.0.1:1/0"],
        ["scheduler", "--election", f"etcd://u:{SECRET}/x@127.0.0.1:1"],
        # no host after the password (the @host forgotten): the password reads as a port
        ["status", "--store", f"postgresql://u:{SECRET}"],
        ["status", "--store", f"postgresql://u:{SECRET}/db"],
        ["worker", "--queue", f"redis://u:{SECRET}"],
        ["scheduler", "--election", f"etcd://u:{SECRET}"],
        # a webhook URL: another scheme with userinfo, and userinfo at all (refused at start)
        ["cluster", "--alert-webhook", f"ftp://u:{SECRET}@example.com/x"],
        ["cluster", "--alert-webhook", f"u:{SECRET}@example.com/x"],
        ["cluster", "--alert-webhook", f"http://u:{SECRET}@127.0.0.1:9/x"],
        ["cluster", "--alert-webhook", f"https://{SECRET}@127.0.0.1:9/x"],
        ["scheduler", "--alert-webhook", f"http://u:{SECRET}@127.0.0.1:9/x"],
        ["run", "--app", "nosuch:app", "--alert-webhook", f"http://:{SECRET}@127.0.0.1:9/x"],
    ],
)
def test_a_secret_in_a_bad_value_is_never_printed(args: list[str], tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = [] if "--store" in args else ["--store", f"sqlite:///{db}"]
    line = refused(cronlab(*args, *store, cwd=tmp_path))
    assert SECRET not in line and "ter2" not in line, line
    assert not db.exists()


def test_a_keyword_string_in_cronlab_store_is_never_printed(tmp_path: Path) -> None:
    env = {**os.environ, "CRONLAB_STORE": f"host=127.0.0.1 port=1 password={SECRET}"}
    done = subprocess.run(
        [sys.executable, "-m", "cronlab", "status"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    line = refused(done)
    assert SECRET not in line and "postgresql://" in line, line


def test_a_webhook_with_userinfo_says_how_to_authenticate_instead(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    hook = f"https://alerts:{SECRET}@hooks.example.com/cronlab"
    line = refused(cronlab("cluster", "--store", f"sqlite:///{db}", "--alert-webhook", hook))
    assert "CRONLAB_ALERT_SECRET" in line and "hooks.example.com" in line, line
    assert SECRET not in line and not db.exists()
