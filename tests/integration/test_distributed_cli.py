"""The CLI with distributed backends: an unreachable or unknown server is one line, exit 2;
``status`` and ``chaos`` find a leader elected on etcd (``--election`` / ``CRONLAB_ELECTION``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from contract.dist_servers import ETCD, START_ETCD, need
from cronlab.election.etcd import parse_url, ping
from cronlab.runtime.proc import alive

from .conftest import stop_cluster

pytestmark = pytest.mark.acceptance


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["status", "--store", "postgresql://postgres@127.0.0.1:1/x"],
            "postgresql://postgres@127.0.0.1:1/x unreachable",  # (with a password: secrets)
        ),
        (
            ["scheduler", "--store", "sqlite:///{tmp}/s.db", "--election", "etcd://127.0.0.1:1"],
            "etcd etcd://127.0.0.1:1 unreachable",
        ),
        (
            ["worker", "--store", "sqlite:///{tmp}/s.db", "--queue", "redis://127.0.0.1:1"],
            "redis redis://127.0.0.1:1 unreachable",
        ),
        (
            ["scheduler", "--store", "sqlite:///{tmp}/s.db", "--election", "zk://h:2181"],
            "--election 'zk://h:2181'",
        ),
        (
            ["worker", "--store", "sqlite:///{tmp}/s.db", "--queue", "amqp://h"],
            "--queue 'amqp://h'",
        ),
        (["status", "--store", "mysql://h/db"], "unknown store scheme 'mysql'"),
    ],
)
def test_a_bad_or_unreachable_backend_is_one_line_naming_it(
    args: list[str], named: str, tmp_path: object
) -> None:
    done = run(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert done.returncode == 2
    assert done.stderr.startswith("cronlab: error: ") and named in done.stderr
    assert done.stderr.count("\n") == 1 and "pw" not in done.stderr
    assert "Traceback" not in done.stderr


def status_json(store: str, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "cronlab", "status", "--store", store, "--json", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def leader_once_up(store: str, election: str) -> Any:
    """The etcd leader per ``status``, or None while the cluster is still creating its store."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cronlab",
            "status",
            "--store",
            store,
            "--json",
            "--election",
            election,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        assert "store" in done.stderr, done.stderr  # only "no store yet" may be waited out
        return None
    return json.loads(done.stdout)["leader"]


@contextmanager
def etcd_cluster(store: str, election: str) -> Iterator[None]:
    """Two scheduler replicas and a worker electing on etcd; every child reaped on exit."""
    args = ["cluster", "--store", store, "--election", election, "--replicas", "2"]
    flags = ["--workers", "1", "--lease-ttl", "2", "--restart-after", "never"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", *args, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        stop_cluster(proc)


@pytest.mark.etcd
def test_status_and_chaos_find_the_etcd_leader(tmp_path: Path) -> None:
    election = f"{ETCD}/cronlab-it-{uuid.uuid4().hex[:10]}"
    need(lambda: ping(parse_url(election)), START_ETCD)
    store = f"sqlite:///{tmp_path}/s.db"
    env = os.environ | {"CRONLAB_ELECTION": election}
    with etcd_cluster(store, election):
        first = wait_for(lambda: leader_once_up(store, election), 30, "a leader")
        assert status_json(store)["leader"] is None  # the store's lease row knows nothing of etcd
        schedulers = {p["pid"] for p in status_json(store)["processes"] if p["role"] == "scheduler"}
        assert first["pid"] in schedulers and first["epoch"] > 0
        assert run("chaos", "crash-leader", "--store", store).returncode == 2
        crash = subprocess.run(
            [sys.executable, "-m", "cronlab", "chaos", "crash-leader", "--store", store],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,  # the election from CRONLAB_ELECTION
        )
        assert crash.returncode == 0, crash.stderr
        assert f"pid {first['pid']}" in crash.stdout and not alive(first["pid"])
        second = wait_for(
            lambda: (
                (lead := status_json(store, env=env)["leader"])
                and lead["epoch"] > first["epoch"]
                and lead
            ),
            30,
            "a takeover",
        )
        assert second["pid"] in schedulers - {first["pid"]}


@contextmanager
def redis_with_password(password: str) -> Iterator[str]:
    """A throwaway ``redis-server`` that requires ``password``; its URL, password included."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        pytest.skip("redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--requirepass", password]
    server = subprocess.Popen(
        [*argv, "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    url = f"redis://:{password}@127.0.0.1:{port}/0"
    try:
        wait_for(lambda: _pings(url), 10, "the throwaway redis-server")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def _pings(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def children_of(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``: their argv as ``ps`` shows every local user."""
    table = subprocess.run(
        ["ps", "-eww", "-o", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout
    rows = [line.split(None, 2) for line in table.splitlines()]
    return {int(r[0]): r[2] for r in rows if len(r) == 3 and r[1] == str(pid)}


def both_roles(pid: int) -> dict[int, str]:
    """``pid``'s children once a scheduler and a worker are among them, else nothing."""
    found = children_of(pid)
    shown = " | ".join(found.values())
    return found if "cronlab scheduler" in shown and "cronlab worker" in shown else {}


def environment_of(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(e.split("=", 1) for e in entries if "=" in e)


def test_passwords_in_the_store_queue_and_election_urls_reach_no_argv_and_no_log(
    tmp_path: Path,
) -> None:
    """Issue 13: every scheduler and worker got the store URL in its argv (``ps`` showed the
    password to every local user) and the banner printed it. A cluster given a password in
    each of its three URLs, the documented way (``CRONLAB_STORE``, ``CRONLAB_QUEUE``,
    ``CRONLAB_ELECTION``): its children get them in their environment, no argv holds any of
    them, and nothing the cluster or its children print does. (cronlab's etcd client does not
    authenticate, so an etcd URL with credentials is refused, not carried: issue 27.)"""
    from contract.dist_servers import pg_database

    etcd = parse_url(ETCD)
    need(lambda: ping(etcd), START_ETCD)
    nonce = uuid.uuid4().hex[:8]
    secrets = {name: f"hunter2-{name}-{nonce}" for name in ("store", "queue")}
    with pg_database() as url, redis_with_password(secrets["queue"]) as queue:
        env = {
            "CRONLAB_STORE": url.replace("//postgres@", f"//postgres:{secrets['store']}@"),
            "CRONLAB_QUEUE": f"{queue}?prefix=t{nonce}",
            "CRONLAB_ELECTION": f"etcd://{etcd.host}:{etcd.port}/cronlab-t{nonce}",
        }
        assert all(s in v for s, v in zip(secrets.values(), env.values(), strict=False))
        log = tmp_path / "cluster.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cronlab", "cluster", "--replicas", "1", "--workers", "1"],
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            try:
                found = wait_for(lambda: both_roles(proc.pid), 30, "a scheduler and a worker")
                time.sleep(3)  # let them elect, dispatch and log a little
                assert proc.poll() is None, log.read_text()[-2000:]
                everyone = subprocess.run(
                    ["ps", "-eww", "-o", "args="], capture_output=True, text=True, check=True
                ).stdout
                for pid in found:
                    assert {k: environment_of(pid).get(k) for k in env} == env
            finally:
                stop_cluster(proc)
        text = log.read_text()
        assert "cronlab cluster:" in text and "postgres:***@" in text, text[-2000:]
        for name, secret in secrets.items():
            assert secret not in everyone, f"the {name} password in ps"
            assert secret not in text, f"the {name} password printed: {text[-2000:]}"


def catalogue(url: str) -> list[tuple[Any, ...]]:
    """What a migration would change in a PostgreSQL database: its schemas, relations and
    functions outside the system's, and the rows of its ``customers`` table."""
    import psycopg

    user = "NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    with psycopg.connect(url, autocommit=True) as c:
        found = c.execute(f"SELECT nspname, '', '' FROM pg_namespace WHERE nspname {user}")
        rows = found.fetchall()
        rows += c.execute(
            "SELECT n.nspname, c.relname, c.relkind::text FROM pg_class c "
            f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname {user}"
        ).fetchall()
        rows += c.execute(
            "SELECT n.nspname, p.proname, '' FROM pg_proc p "
            f"JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname {user}"
        ).fetchall()
        rows += c.execute("SELECT 'row', id::text, name FROM customers").fetchall()
    return sorted(rows)


def test_a_writer_on_another_programs_postgresql_database_builds_beside_it() -> None:
    """Issue 13: refuse to migrate a non-empty database that is not a cronlab store. Issue
    31: such a database is an application's; ``invoices seed`` builds the store in a schema
    of its own (``cronlab``) and the application's schema is as it was, but for the lab's
    app's own ``invoices`` table (its on_start makes it, as any app's would)."""
    import psycopg

    from contract.dist_servers import pg_database

    with pg_database() as url:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)")
            c.execute("CREATE TABLE orders (id int PRIMARY KEY, customer int REFERENCES customers)")
            c.execute("CREATE TABLE tasks (id int PRIMARY KEY, title text)")
            c.execute("INSERT INTO customers VALUES (1, 'Ada'), (2, 'Grace')")
        before = catalogue(url)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "cronlab",
                "invoices",
                "seed",
                "--count",
                "5",
                "--at",
                "+60",
                "--store",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr[-500:]
        after = catalogue(url)
        # (a session's temporary schemas, pg_temp_N, are the server's, made by any COPY)
        theirs = [r for r in after if r[0] in ("public", "row") and "invoices" not in r[1]]
        assert theirs == [r for r in before if r[0] in ("public", "row")]
        with psycopg.connect(url, autocommit=True) as c:
            assert c.execute("SELECT count(*) FROM cronlab.tasks").fetchone() == (5,)
            assert c.execute("SELECT count(*) FROM public.tasks").fetchone() == (0,)


def test_a_cluster_whose_children_cannot_start_stops_and_says_why(tmp_path: Path) -> None:
    """Issue 13: children that fail at start-up printed one line and died, and the cluster
    never exited. It stops, exit 2, with the children's line once (issue 28). (The issue's
    case was an unreachable --election: the cluster now asks it before starting anything,
    below; here the app fails in the children only, as one might that needs their
    environment.)"""
    (tmp_path / "jobs.py").write_text(
        "import os\nimport cronlab\nif os.environ.get('CRONLAB_NONCE'):\n"
        "    raise RuntimeError('no billing credentials here')\napp = cronlab.App()\n"
    )
    store = ["--store", f"sqlite:///{tmp_path / 's.db'}", "--replicas", "1", "--workers", "1"]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cronlab", "cluster", *store, "--app", "jobs:app"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and time.monotonic() - started < 50
    assert "RuntimeError: no billing credentials here" in done.stderr.splitlines()[-1]
    assert done.stderr.count("cronlab: error: ") == 1
    assert "Traceback" not in done.stderr


def test_a_cluster_with_an_unreachable_election_is_refused_before_it_starts(
    tmp_path: Path,
) -> None:
    """Issue 13's case: an unreachable --election. Before, the children failed one by one;
    now the cluster asks etcd first: one line, exit 2, no child started, no store written."""
    db = tmp_path / "s.db"
    args = ["--store", f"sqlite:///{db}", "--replicas", "1", "--workers", "1"]
    done = run("cluster", *args, "--election", "etcd://127.0.0.1:1")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "etcd etcd://127.0.0.1:1 unreachable" in done.stderr
    assert not db.exists()
