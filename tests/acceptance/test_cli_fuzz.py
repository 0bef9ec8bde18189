"""Hypothesis over argv for every ``cronlab`` command and subcommand (issue 13): whatever a user
types, no traceback, exit 0, 1 or 2, and a refusal (2) is one line naming the problem with
nothing on stdout and no store written.

Each command's argv is drawn from its real click parameters: every option (required ones
mostly given) with hostile values — huge, negative, NaN and infinite numbers, empty and very
long strings, unicode and undecodable bytes, JSON garbage, missing paths, URLs with bad schemes
or unreachable hosts, a foreign and a corrupt SQLite file, an ``--app`` that raises, does not
parse or is not an App — next to valid ones (a fresh SQLite store, the choices, small numbers)
so that the code behind the parsing runs too.

``main()`` runs in-process (fast). What would block is replaced: a scheduler, a worker or
``cronlab run`` runs one real round instead of its loop; ``cluster`` starts no children
(``launch``) and parses each child's command line with the child's own command instead (a
value the cluster takes must be one its children take);
``lab`` does everything but serve; ``verify --seeds`` draws no seeds. The budget is
``EXAMPLES`` argvs per parameter (its value hostile, the others sane) and three times as many
per command (any value hostile), derandomized: the same argvs in every run.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import functools
import os
import shutil
import signal
import socket
import sqlite3
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cronlab.cli import cli, main
from cronlab.exceptions import ConfigError
from cronlab.runtime import cluster, embedded, scheduler, worker

pytestmark = pytest.mark.acceptance
EXAMPLES = 10  # per parameter; three times as many with any value hostile
MIN_ARGVS = 1_000  # the whole module (issue 28)
WATCHDOG_S = 20
ENV = ("CRONLAB_STORE", "CRONLAB_QUEUE", "CRONLAB_ELECTION", "CRONLAB_APP", "CRONLAB_LAB_TOKEN")
APP_MODULES = ("jobs", "broken", "raises", "notapp")
NUMBERS = [  # "sane" has the small valid ones
    "0", "-1", "0.5", "-0", "1e3", "1_000", "nan", "NaN", "inf", "-inf", "1e309", "2147483648",
    "9223372036854775808", "1" + "0" * 30, "9" * 5000, "0x1f", "١٢", "", " ", "1 ",
    # issue 28: exponents past any bound, signs, Unicode digits int() takes, forms it does not
    "1e20", "100000000000000000000", "+1", ".5", "1.", "-0.0", "infinity", "-nan", "1e-400",
    "0b1", "¹", "１２", "٣", "½", "1,000", "1e", "--1",
]  # fmt: skip
TEXTS = [
    "", " ", "-", "--", "x", "é", "日本語", "\u202e", "\udcff", "a" * 100_000, "{", "[]", "null",
    '{"a": NaN}', '{"a": 1}', '{"a":' * 3000 + "1" + "}" * 3000, "$(id)", "%s%n", "\t\n",
    "../../../etc/passwd", "--help",
    "\r\n", "%00", "'; DROP TABLE schedules; --", "😀" * 50, "x" * 5000, "\\", "*", "~",
]  # fmt: skip
DELAYS = [
    "1s", "90s", "15m", "2h", "3d", "0s", "-1s", "1.5h", "10000000d", "99999999999999999999s",
    "nans", "infd", "1e309s", "+5", "+1e20", "+1e309", "+nan", "+-5", "2030-01-01T00:00:00Z",
    "2030-01-01T00:00:00", "2030-13-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
    "never", "300", "1e309", "nan", "-1",
]  # fmt: skip
CRONS = [
    "* * * * *", "0 0 * * *", "@daily", "@hourly", "*/15 * * * *", "0 0 31 2 *", "*/0 * * * *",
    "61 * * * *", "0 0 L * *", "0 0 * * 5L", "0 0 1W * *", "0 0 * * 1#6", "* * * * * * *",
    "1-0 * * * *", "99999999999999999999 * * * *", "R R * * *",
]  # fmt: skip
ZONES = ["UTC", "Europe/Paris", "Nope/Nope", "../../etc/passwd", "posix/UTC", "Etc/GMT+14"]
TASKS = ["fail", "invoice", "noop", "nosuch", "jobs.ping"]  # jobs.ping: --app jobs:app
WEBHOOKS = [
    "ftp://u:secret@example.invalid/x", "u:secret@example.invalid/x",
    "http://u:secret@127.0.0.1:9/x", "https://secret@127.0.0.1:9/x",
    "http://u:sec/secret@127.0.0.1:9/x", "http://127.0.0.1:99999/x", "http://[::1/x", "http://",
    "https://hooks.example.invalid/x?token=secret",
]  # fmt: skip
METRICS_HOSTS = ["0.0.0.0", "::", "example.invalid", "[::1]", "", "é", "\u202e", "x" * 300]


def commands() -> list[tuple[str, ...]]:
    """Every command path: ``("status",)``, ``("schedule", "add")``, …"""
    ctx = click.Context(cli)
    found: list[tuple[str, ...]] = []

    def walk(group: click.Group, path: tuple[str, ...]) -> None:
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            assert sub is not None
            if isinstance(sub, click.Group):
                if sub.invoke_without_command:  # (``lab``: a command, with subcommands)
                    found.append((*path, name))
                walk(sub, (*path, name))
            else:
                found.append((*path, name))

    walk(cli, ())
    return found


def command_at(path: tuple[str, ...]) -> click.Command:
    ctx = click.Context(cli)
    cmd: click.Command | None = cli
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.get_command(ctx, name)
    assert cmd is not None
    return cmd


def urls(tmp: Path) -> st.SearchStrategy[str]:
    """Stores and backends that are not a usable one (``sane`` gives a fresh SQLite file)."""
    return st.one_of(
        st.sampled_from(
            [
                f"sqlite:///{tmp / 'foreign.db'}",  # another program's database
                f"sqlite:///{tmp / 'garbage.db'}",  # not a database at all
                f"sqlite:///{tmp / 'no' / 'such' / 'dir' / 's.db'}",
                f"sqlite:///{tmp}",  # a directory
                "sqlite:////dev/null",
                "sqlite:///",
                "sqlite://",
                "sqlite:",
                "redis://:secret@127.0.0.1:99999/0",  # a port out of range: a traceback
                "etcd://127.0.0.1:1",
                "etcd://",
                "ftp://example.invalid/x",
                "http://[::1",
                "lease",
                "off",
                "mysql://root@localhost/x",
                *odd_urls(tmp),
            ]
        ),
        st.sampled_from(TEXTS),
    )


def odd_urls(tmp: Path) -> list[str]:
    """Issue 28's URLs and paths: every URL option of every command meets each of these (the
    table below), given on the command line and, when it holds a secret, in the environment."""
    return [
        "postgresql://u:secret@127.0.0.1:1/db",  # nothing listens on port 1
        "redis://:secret@127.0.0.1:1/0",
        "postgresql://u:secret@[::1/db",  # libpq's error echoed the password
        "etcd://u:secret@127.0.0.1:99999",
        # issue 28: secrets in forms the redaction missed, options the client reads
        "host=127.0.0.1 port=1 password=secret",
        "dbname=x password='secret with spaces'",
        "postgresql://u:sec/secret@127.0.0.1:1/x",
        "postgresql://u:a#secret@127.0.0.1:1/x",
        "postgresql://u:secret",
        "postgresql://u@127.0.0.1:1/x?password=secret",
        "redis://u:secret/x@127.0.0.1:1/0",
        "redis://127.0.0.1:1/0?socket_timeout=abc",
        "redis://127.0.0.1:1/0?db=abc",
        "redis://127.0.0.1:1/0?socket_connect_timeout=1e400",
        "redis://127.0.0.1:1/0?health_check_interval=nan",
        "etcd://u:secret",
        # odd paths: too long, too deep, a file as a directory, spaces, kernel files
        f"sqlite:///{tmp / ('x' * 300)}.db",
        f"sqlite:///{tmp / ('d/' * 2100)}s.db",
        f"sqlite:///{tmp / 'jobs.py' / 's.db'}",
        f"sqlite:///{tmp / 'a b ü.db'}",
        f"sqlite:///{tmp / 'real#1.db'}",  # (a file: URI cut these short: the data items)
        f"sqlite:///{tmp / 'q?mode=ro.db'}",
        f"sqlite:///{tmp / 'a%20b.db'}",
        "sqlite:////proc/self/mem",
        "sqlite:////proc/x.db",
    ]


def values(name: str, param: click.Parameter, tmp: Path) -> st.SearchStrategy[str]:
    """What a user might give ``param``, hostile: by its name first, then by its type."""
    text = st.sampled_from(TEXTS) | st.text(st.characters(exclude_characters="\x00"), max_size=30)
    text |= st.sampled_from(["\udcff", "k\udc80"])  # bytes that are not UTF-8, as Python has them
    named = {
        "store_url": urls(tmp),
        "queue_url": urls(tmp),
        "election": urls(tmp),
        "app_spec": st.sampled_from(
            [*(f"{m}:app" for m in APP_MODULES), "jobs:nothere", "nosuch:app", "os:path", ":"]
        )
        | st.sampled_from(["a:b:c", "..x:app", ".jobs:app", "é:x", "", "jobs"]),
        "payload": st.sampled_from(TEXTS),
        "delay": st.sampled_from(DELAYS),
        "at": st.sampled_from(DELAYS),
        "at_text": st.sampled_from(DELAYS),
        "restart_after": st.sampled_from(DELAYS),
        "catchup_window": st.sampled_from(DELAYS),
        "after": st.sampled_from(DELAYS),
        "expr": st.sampled_from(CRONS) | text,
        "tz": st.sampled_from(ZONES) | text,
        "task": st.sampled_from(TASKS) | text,
        "host": st.sampled_from(["0.0.0.0", "example.invalid", "[::1]", "999.0.0.1", "", "é"]),
        "metrics_host": st.sampled_from(METRICS_HOSTS),
        "alert_webhook": st.sampled_from(WEBHOOKS),
        "bucket": st.sampled_from(["0=-1", "99999999999=1", "0=1e309", "x", "", "0=" + "9" * 30]),
        "crash": st.sampled_from(["replica:99@0", "leader@1e309", "leader@-1", "leader", "@"]),
        "compare": st.sampled_from(["a=0", "replicas=0", "=", "crash=replica:9@0", "x"]),
        "faults": st.sampled_from(["nope", ",", ""]) | text,
        "task_id": st.sampled_from(NUMBERS) | st.integers(2**62, 2**70).map(str) | text,
    }
    if name in named:
        return named[name] | st.sampled_from(TEXTS)
    if isinstance(param.type, click.Choice):
        return text
    if isinstance(param.type, click.types._NumberParamTypeBase):
        huge = st.integers(2**31, 2**70) | st.integers(-(2**70), -1)
        return st.sampled_from(NUMBERS) | huge.map(str)
    return text


def sane_values(tmp: Path) -> dict[str, list[str]]:
    """Values that should pass, by parameter name (the first: the table's pick)."""
    return {
        "store_url": [f"sqlite:///{tmp / 's.db'}", f"sqlite:///{tmp / 'seeded.db'}"],
        "queue_url": ["store"],
        "election": ["lease", "off"],
        "app_spec": ["jobs:app"],
        "payload": ["{}", '{"a": 1}'],
        "delay": ["1s", "15m", "2h", "3d"],
        "at": ["2030-01-01T00:00:00Z", "+5"],
        "at_text": ["+5", "2030-01-01T00:00:00Z"],
        "restart_after": ["300", "never", "1h"],
        "catchup_window": ["1h", "10m"],
        "after": ["2030-01-01T00:00:00Z"],
        "expr": CRONS[:6],
        "tz": ZONES[:2],
        "task": TASKS[:3],
        "host": ["127.0.0.1", "127.0.0.2", "::1", "localhost"],
        "port": ["1", "8000", "65535"],
        "bucket": ["0=1000", "5=20"],
        "crash": ["leader@0", "replica:1@5"],
        "compare": ["election=off", "crash=none", "replicas=5"],
        "faults": ["kill", "kill,pause"],
        "seeds": ["1", "3"],
        "seed": ["0", "1", str(2**63 - 1)],
        "name": ["nightly", "a.b-c_1"],
        "key": ["k1", "invoice/2030-01/7"],
        "task_id": ["1", "2", "21", "424242"],  # 21: nightly's occurrence
    }


def sane(name: str, param: click.Parameter, tmp: Path) -> st.SearchStrategy[str]:
    """A value that should pass, so that the code behind the parsing runs too."""
    return st.sampled_from(sane_list(name, param, tmp))


def sane_list(name: str, param: click.Parameter, tmp: Path) -> list[str]:
    named = sane_values(tmp)
    if name in named:
        return named[name]
    if isinstance(param.type, click.Choice):
        return [str(c) for c in param.type.choices]
    if isinstance(param.type, click.types._NumberParamTypeBase):
        return ["1", "2", "3", "5", "10"]
    return ["x", "nightly"]


def value(draw: st.DrawFn, param: click.Parameter, tmp: Path, hostile: bool) -> str:
    return draw((values if hostile else sane)(param.name or "", param, tmp))


@st.composite
def argvs(draw: st.DrawFn, path: tuple[str, ...], target: str | None, tmp: Path) -> list[str]:
    """One argv for the command at ``path``: its options in any order, then its arguments.
    The value of the parameter named ``target`` is hostile and the others sane, so that the
    argv gets past every other check to the one of that value; with no target, any value may
    be hostile."""
    command = command_at(path)

    def hostile(p: click.Parameter) -> bool:
        return p.name == target if target else draw(st.integers(0, 3)) == 0

    tokens: list[list[str]] = []
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        given = param.name == target or draw(st.integers(0, 9) if param.required else st.booleans())
        if not given:
            continue
        flag = param.opts[0]
        if param.is_flag:
            tokens.append([flag])
            continue
        text = value(draw, param, tmp, hostile(param))
        tokens.append([f"{flag}={text}"] if draw(st.booleans()) else [flag, text])
    order = draw(st.permutations(tokens))
    args = [
        value(draw, p, tmp, hostile(p))
        for p in command.params
        if isinstance(p, click.Argument) and (p.required or draw(st.booleans()))
    ]
    extra = draw(st.sampled_from([[]] * 12 + [["--bogus"], ["extra"], ["--help"]]))
    return [*path, *(t for pair in order for t in pair), *args, *extra]


def cases() -> list[tuple[tuple[str, ...], str | None]]:
    """(command, the parameter whose value is hostile): each valued parameter of each
    command, and each command with no one target (any value may be hostile)."""
    found: list[tuple[tuple[str, ...], str | None]] = []
    for path in commands():
        params = [p for p in command_at(path).params if not getattr(p, "is_flag", False)]
        found += [(path, p.name) for p in params] + [(path, None)]
    return found


def make_fixtures(tmp: Path) -> None:
    """A fresh directory: a store with due invoices and a schedule ``nightly``, a foreign and
    a corrupt SQLite file, and ``--app`` modules (no ``s.db``: a fresh store goes there)."""
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy(seeded_store(), tmp / "seeded.db")
    with contextlib.closing(sqlite3.connect(tmp / "foreign.db")) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
        db.commit()
    (tmp / "garbage.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
    (tmp / "jobs.py").write_text(
        "import cronlab\napp = cronlab.App()\n\n@app.task\ndef ping(ctx):\n    return None\n"
    )
    (tmp / "broken.py").write_text("def f(:\n")
    (tmp / "raises.py").write_text("raise RuntimeError('the user module raised')\n")
    (tmp / "notapp.py").write_text("app = 42\n")


@functools.cache
def seeded_store() -> Path:
    """A store made once by the CLI: 20 invoices due now and a schedule ``nightly``."""
    folder = tempfile.mkdtemp(prefix="cronlab-fuzz-")
    atexit.register(shutil.rmtree, folder, True)
    path = Path(folder) / "seeded.db"
    url = f"sqlite:///{path}"
    for argv in (
        ["invoices", "seed", "--store", url, "--count", "20", "--at", "+0"],
        ["schedule", "add", "nightly", "0 0 * * *", "--handler", "fail", "--store", url],
    ):
        assert main(argv) == 0, argv
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def one_round(self: Any, stopping: Any) -> None:
    """A scheduler's or worker's loop, one real round long."""
    self.step()


def one_embedded_round(app: Any, *, concurrency: int, scan_interval: Any, ops: Any = None) -> None:
    """``cronlab run``'s loop (``App.run``), one real round long."""
    scan_ms = int(scan_interval.total_seconds() * 1000)
    engine = embedded.start(app, concurrency=concurrency, scan_ms=scan_ms, ops=ops)
    engine.step()
    engine.stop()


def children_parse(self: cluster.Cluster) -> None:
    """Instead of spawning: each child's command line, parsed by the child's own command."""
    for role, index in self.slots()[:2] + self.slots()[-1:]:
        argv = cluster.command(self.cfg, role, index)[3:]  # python -m cronlab ROLE …
        child = command_at((argv[0],))
        with mock.patch.dict(os.environ, cluster.secret_env(self.cfg)):
            child.make_context(argv[0], argv[1:])


def serve_and_close(port: int, host: str, registry: Any, token: str | None) -> None:
    """``metrics.server.serve`` checked as it is (host, token, the port taken or not), then
    closed at once: a metrics server left listening in this process took the ports later
    tests use (a fuzzed ``--metrics-port 1`` answered the etcd tests' ``127.0.0.1:1``)."""
    from cronlab.metrics import server

    server.check(host, token)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        with socket.socket(found[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(found[0][4][:2])
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port} on {host}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def in_process(tmp: Path) -> Iterator[dict[str, Any]]:
    """The process state a command may change (cwd, environment, import path and modules,
    signal handlers), put back; the blocking parts replaced (see the module docstring)."""
    saved = (os.getcwd(), dict(os.environ), list(sys.path), set(sys.modules))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    os.chdir(tmp)
    try:
        with (
            mock.patch.object(scheduler.Scheduler, "run", one_round),
            mock.patch.object(worker.Worker, "run", one_round),
            mock.patch.object(embedded, "run", one_embedded_round),
            mock.patch.object(cluster.Cluster, "launch", lambda self: None),  # no children
            mock.patch.object(cluster.Cluster, "run", children_parse),
            mock.patch.object(cluster, "tune_gc", lambda: None),
            mock.patch("uvicorn.run", lambda *a, **k: None),
            mock.patch("cronlab.cli.serving._has_display", lambda: False),
            mock.patch("cronlab.sim.verify.run_many", lambda *a, **k: []),
            mock.patch("cronlab.metrics.server.serve", serve_and_close),
        ):
            yield {}
    finally:
        os.chdir(saved[0])
        os.environ.clear()
        os.environ.update(saved[1])
        sys.path[:] = saved[2]
        for name in set(sys.modules) - saved[3]:
            if name in APP_MODULES:
                del sys.modules[name]
        for s, h in handlers.items():
            signal.signal(s, h)


RAN: dict[str, int] = {}  # argvs run, by command


def run(
    argv: list[str], tmp: Path, env: dict[str, str] | None = None
) -> tuple[int | str, str, str]:
    """``cronlab ARGV`` in-process (``env``: CRONLAB_* variables set): exit code, stdout,
    stderr (a traceback if one escaped). An argv still running after ``WATCHDOG_S`` is
    interrupted and its code is ``"hung"`` (an unbounded count made a command run for hours:
    a hang in CI would say nothing)."""
    runner = CliRunner()
    RAN[argv[0] if argv else ""] = RAN.get(argv[0] if argv else "", 0) + 1
    hung = threading.Event()

    def interrupt() -> None:
        hung.set()
        _thread.interrupt_main()

    watchdog = threading.Timer(WATCHDOG_S, interrupt)
    variables: dict[str, str | None] = {**dict.fromkeys(ENV), **(env or {})}
    with in_process(tmp), runner.isolation(env=variables) as (out, err, _):
        watchdog.start()
        try:
            code: int | str = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            err.write(traceback.format_exc().encode("utf-8", "backslashreplace"))
            code = "escaped"
        finally:
            watchdog.cancel()
        sys.stdout.flush()
        sys.stderr.flush()
        texts = [s.getvalue().decode("utf-8", "backslashreplace") for s in (out, err)]
    return "hung" if hung.is_set() else code, texts[0], texts[1]


@pytest.mark.parametrize(
    ("path", "target"),
    cases(),
    ids=[" ".join(path) + " " + (target or "any") for path, target in cases()],
)
def test_no_argv_makes_a_traceback(
    path: tuple[str, ...], target: str | None, tmp_path: Path
) -> None:
    tmp = tmp_path / "w"

    @settings(
        max_examples=EXAMPLES if target else 3 * EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.generate],  # no shrinking: a hung argv would hang again at every step
    )
    @given(argv=argvs(path, target, tmp))
    def check(argv: list[str]) -> None:
        make_fixtures(tmp)
        judge(argv, tmp)

    make_fixtures(tmp)
    check()


def judge(argv: list[str], tmp: Path, env: dict[str, str] | None = None) -> None:
    """Run ``argv`` and hold it to the promises: no traceback, no secret shown, exit 0, 1 or
    2, and a refusal (2) is one line with nothing on stdout and no store written."""
    code, out, err = run(argv, tmp, env)
    shown = f"{env or ''} cronlab {' '.join(a[:60] for a in argv)}\n{err[-2000:]}"
    assert "Traceback" not in out + err, shown
    assert "secret" not in out + err, f"a secret printed: {shown}"
    if code == "hung":  # a command that blocks needs its loop replaced in in_process()
        raise AssertionError(f"still running after {WATCHDOG_S} s: {shown}")
    assert code in (0, 1, 2), f"exit {code!r}: {shown}"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cronlab: error: "), shown
        assert out == "", shown
        assert not (tmp / "s.db").exists(), f"a refused command wrote the store: {shown}"


# The table: every URL and host option of every command meets each of issue 28's odd URLs,
# paths, webhooks and hosts (hypothesis, above, draws a few of them per option at random).
URL_VARIABLES = {"store_url": "CRONLAB_STORE", "queue_url": "CRONLAB_QUEUE"}
URL_VARIABLES |= {"election": "CRONLAB_ELECTION"}
TABLE = (*URL_VARIABLES, "alert_webhook", "metrics_host")


def table_cases() -> list[tuple[tuple[str, ...], str]]:
    """Each command's URL and host options; an option a lab process command shares with the
    engine's (the same object: the same checks) is the engine command's case alone."""
    return [
        (path, str(p.name))
        for path in commands()
        for p in command_at(path).params
        if isinstance(p, click.Option) and p.name in TABLE and not _shared(path, p)
    ]


def _shared(path: tuple[str, ...], param: click.Parameter) -> bool:
    if len(path) != 2 or path[0] != "lab":
        return False
    return any(param is q for q in command_at(path[1:]).params)


def table_argvs(
    path: tuple[str, ...], target: str, tmp: Path
) -> Iterator[tuple[list[str], dict[str, str] | None]]:
    """Each of ``target``'s odd values in an argv otherwise sane (its required options, --app
    and --metrics-port where they apply); a URL holding a secret is given in its environment
    variable too, where it is allowed."""
    command = command_at(path)
    rest: list[str] = []
    for p in command.params:
        name = str(p.name)
        if isinstance(p, click.Option) and name != target and (p.required or name == "app_spec"):
            rest += [p.opts[0], sane_list(name, p, tmp)[0]]
    if target == "metrics_host":
        rest += ["--metrics-port", "65000"]
    rest += [
        sane_list(str(p.name), p, tmp)[0]
        for p in command.params
        if isinstance(p, click.Argument) and p.required
    ]
    flag = next(p.opts[0] for p in command.params if p.name == target)
    odd = {"alert_webhook": WEBHOOKS, "metrics_host": METRICS_HOSTS}.get(target) or odd_urls(tmp)
    for text in odd:
        yield [*path, flag, text, *rest], None
        if target in URL_VARIABLES and "secret" in text:
            yield [*path, *rest], {URL_VARIABLES[target]: text}


@pytest.mark.parametrize(
    ("path", "target"),
    table_cases(),
    ids=[" ".join(path) + " " + target for path, target in table_cases()],
)
def test_every_odd_url_and_host_meets_every_option_that_takes_one(
    path: tuple[str, ...], target: str, tmp_path: Path
) -> None:
    tmp = tmp_path / "w"
    for argv, env in table_argvs(path, target, tmp):
        make_fixtures(tmp)
        judge(argv, tmp, env)


def test_every_command_is_fuzzed() -> None:
    names = {p[0] for p in commands()}
    assert names == set(cli.list_commands(click.Context(cli)))
    assert {("schedule", "add"), ("chaos", "pause-leader"), ("invoices", "seed")} <= set(commands())


def test_the_fuzzer_sees_a_traceback_when_there_is_one(tmp_path: Path) -> None:
    """The harness itself: an exception escaping ``main`` is reported, not swallowed."""
    make_fixtures(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        run(["invoices", "seed", "--store", url, "--count", "1", "--at", "+60"], tmp_path)[0] == 0
    )
    with mock.patch("cronlab.cli.observe.status", side_effect=KeyError("boom")):
        code, _, err = run(["status", "--store", url], tmp_path)
    assert code == "escaped" and "Traceback" in err and "KeyError: 'boom'" in err


def test_the_fuzzer_ran_a_thousand_argvs_over_every_command() -> None:
    """Last in the module: with every case above run, at least ``MIN_ARGVS`` argvs ran and each
    command had its share (hypothesis stops early when a strategy runs out of new values)."""
    if len(RAN) < len({p[0] for p in commands()}):
        pytest.skip("run with the whole module: only some cases ran")
    print(f"\ncli fuzz: {sum(RAN.values())} argvs, {dict(sorted(RAN.items()))}")
    assert sum(RAN.values()) >= MIN_ARGVS
    assert set(RAN) >= {p[0] for p in commands()}
