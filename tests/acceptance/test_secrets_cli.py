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


def in_env(variable: str, value: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``cronlab ARGS`` with ``variable=value`` in its environment (the way a password goes)."""
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args],
        capture_output=True,
        text=True,
        env={**os.environ, variable: value},
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("variable", "value", "args", "words"),
    [
        ("CRONLAB_STORE", f"host=127.0.0.1 port=1 password={SECRET}", [], "postgresql://"),
        ("CRONLAB_STORE", f"postgresql://u:{SECRET}@[::1/x", [], "malformed"),  # libpq echoed it
        ("CRONLAB_STORE", f"postgresql://u:{SECRET}%zz@127.0.0.1/x", [], "percent"),
        ("CRONLAB_STORE", f"postgresql://u@[::1/x?password={SECRET}", [], "malformed"),
        ("CRONLAB_STORE", f"postgresql://postgres:{SECRET}@127.0.0.1:1/x", [], ":***@127.0.0.1:1"),
        ("CRONLAB_QUEUE", f"redis://:{SECRET}@127.0.0.1:1/0", ["worker"], "unreachable"),
        # cronlab's etcd client does not authenticate: credentials are refused, not ignored
        ("CRONLAB_ELECTION", f"etcd://u:{SECRET}@127.0.0.1:1", ["scheduler"], "authenticate"),
    ],
)
def test_a_secret_in_the_environment_is_never_printed_either(
    variable: str, value: str, args: list[str], words: str, tmp_path: Path
) -> None:
    """The way a password is meant to go: the errors about it show none of it."""
    db = tmp_path / "s.db"
    store = [] if variable == "CRONLAB_STORE" else ["--store", f"sqlite:///{db}"]
    line = refused(in_env(variable, value, *(args or ["status"]), *store, cwd=tmp_path))
    assert SECRET not in line and words in line, line
    assert not db.exists()


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        (["status", "--store", f"postgresql://u:{SECRET}@127.0.0.1:1/x"], "CRONLAB_STORE"),
        (["status", "--store", f"postgresql://u@127.0.0.1:1/x?password={SECRET}"], "CRONLAB_STORE"),
        (
            ["enqueue", "h", "--in", "1h", "--store", f"postgresql://u:{SECRET}@h/x"],
            "CRONLAB_STORE",
        ),
        (
            ["run", "--app", "nosuch:app", "--store", f"postgresql://u:{SECRET}@h/x"],
            "CRONLAB_STORE",
        ),
        (["worker", "--queue", f"redis://:{SECRET}@127.0.0.1:1/0"], "CRONLAB_QUEUE"),
        # (etcd URLs with credentials are refused wherever they come from: see the test above)
    ],
)
def test_a_password_typed_on_the_command_line_is_refused(
    args: list[str], variable: str, tmp_path: Path
) -> None:
    """Item 9 (the cluster, its /proc/PID/cmdline: tests/integration/test_secrets_ps.py)."""
    db = tmp_path / "s.db"
    store = [] if "--store" in args else ["--store", f"sqlite:///{db}"]
    line = refused(cronlab(*args, *store, cwd=tmp_path))
    assert SECRET not in line and f"set {variable} instead" in line and "(ps)" in line, line
    assert not db.exists()


def test_a_webhook_with_userinfo_says_how_to_authenticate_instead(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    hook = f"https://alerts:{SECRET}@hooks.example.com/cronlab"
    line = refused(cronlab("cluster", "--store", f"sqlite:///{db}", "--alert-webhook", hook))
    assert "CRONLAB_ALERT_SECRET" in line and "hooks.example.com" in line, line
    assert SECRET not in line and not db.exists()
