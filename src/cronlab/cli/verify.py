"""``cronlab verify``: the deterministic simulator of the real code, over many seeds.

``--seeds N`` runs seeds 1..N (from ``--seed S`` when given) on every core, with a progress
bar, and prints a table per fault kind; ``--seed S`` alone replays one seed and prints its
violations with the shortest trace that shows each. ``--json``: one object with ``seeds``,
``violations`` (each with ``seed``, ``kind``, ``replay``) and ``by_fault``. Exit 1 on any
violation. Names and flags are a contract (scripts use them).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import Counter, defaultdict
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from cronlab import urls
from cronlab.exceptions import ConfigError
from cronlab.sim import checker, verify
from cronlab.sim import scenario as sc
from cronlab.urls import redact

MAX_SEEDS = 10_000_000


def _kinds(ctx: click.Context, param: click.Parameter, text: str | None) -> tuple[str, ...]:
    if not text:
        return sc.KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in sc.KINDS]
    if unknown or not kinds:
        raise ConfigError(
            f"--faults {text!r}: unknown kind(s) {unknown}; know {', '.join(sc.KINDS)}"
        )
    return kinds


@click.command("verify")
@click.option("--seeds", type=click.IntRange(1, MAX_SEEDS), default=None, help="How many seeds.")
@click.option(
    "--seed", type=click.IntRange(0, 2**63 - 1), default=None, help="One seed, or the first."
)
@click.option(
    "--faults",
    callback=_kinds,
    default=None,
    metavar="KIND,…",
    help=f"Fault kinds to draw from (default all: {', '.join(sc.KINDS)}).",
)
@click.option(
    "--jobs", type=click.IntRange(1, 64), default=None, help="Processes (default: cores)."
)
@click.option(
    "--store",
    envvar="CRONLAB_VERIFY_STORE",
    default=None,
    metavar="postgresql://…",
    help="Run on this PostgreSQL server (a scratch database per process, made and dropped "
    "here; the role needs CREATEDB). Default: a SQLite file. Env: CRONLAB_VERIFY_STORE.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def verify_cmd(
    seeds: int | None,
    seed: int | None,
    faults: tuple[str, ...],
    jobs: int | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Run the real engine under simulated faults, seed by seed, and check every run."""
    if seeds is None and seed is None:
        raise ConfigError("give --seeds N (many runs) or --seed S (one run, with its trace)")
    if store is not None and urls.parse(store).scheme == "sqlite":
        raise ConfigError(
            "verify --store takes a postgresql:// server; without it, runs use a SQLite file"
        )
    with _scratch(store):
        if seeds is None:
            assert seed is not None
            code = _one(seed, faults, as_json, store)
        else:
            first = 1 if seed is None else seed
            jobs = jobs or os.cpu_count() or 1
            code = _many(range(first, first + seeds), faults, jobs, as_json, store)
    sys.exit(code)


def _scratch(store: str | None) -> Any:
    if store is None:
        return contextlib.nullcontext()
    from cronlab.sim import postgres  # needs psycopg: the postgres extra

    return postgres.scratch_run(store)


def _one(seed: int, kinds: tuple[str, ...], as_json: bool, store: str | None) -> int:
    r = verify.run_seed(seed, kinds, store)
    if as_json:
        click.echo(json.dumps(_summary([r], kinds, r.seconds, store)))
        return 1 if r.violations else 0
    s = sc.draw(seed, kinds)
    out = Console()
    out.print(
        f"seed {seed}: {s.replicas} schedulers, {s.workers} workers, {len(s.jobs)} jobs, "
        f"a schedule every {s.every_s} s (catchup {s.catchup}, overlap {s.overlap}), "
        f"{'server' if s.server_clock else 'caller'} clock",
        highlight=False,
    )
    for f in s.faults:
        out.print(f"  fault: {f.describe()}", highlight=False)
    if not r.violations:
        out.print(f"no violation ({r.seconds * 1000:.0f} ms)", highlight=False)
        return 0
    for kind in sorted({v.kind for v in r.violations}, key=checker.KINDS.index):
        _explain(out, seed, kinds, kind, [v for v in r.violations if v.kind == kind], store)
    return 1


def _explain(
    out: Console,
    seed: int,
    kinds: tuple[str, ...],
    kind: str,
    found: list[checker.Violation],
    store: str | None,
) -> None:
    for v in found[:5]:
        out.print(f"[bold red]{kind}[/] {v.key}: {v.detail}", highlight=False)
    if len(found) > 5:
        out.print(f"  … and {len(found) - 5} more {kind}", highlight=False)
    smaller, outcome = verify.shrink(seed, kinds, kind, store)
    needed = ", ".join(f.describe() for f in smaller.faults) or "none"
    out.print(f"  the fewest faults that still show it: {needed}", highlight=False)
    keys = {v.key for v in checker.check(outcome) if v.kind == kind}
    for line in verify.trace(outcome, keys):
        out.print(f"  {line}", highlight=False)
    out.print(f"  replay: {verify.replay(seed, kinds, store)}", highlight=False)


def _many(seeds: range, kinds: tuple[str, ...], jobs: int, as_json: bool, store: str | None) -> int:
    started = time.perf_counter()
    console = Console(stderr=True)
    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=as_json, transient=True) as bar:
        task = bar.add_task("simulating", total=len(seeds))
        results = verify.run_many(seeds, kinds, jobs, lambda r: bar.advance(task), store)
    took = time.perf_counter() - started
    summary = _summary(results, kinds, took, store)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        _print(Console(), summary, took)
    return 1 if summary["violations"] else 0


def _summary(
    results: list[verify.SeedResult], kinds: tuple[str, ...], took: float, store: str | None
) -> dict[str, Any]:
    by_fault: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"seeds": 0, "failing": 0, "violations": Counter()}
    )
    violations = []
    for r in results:
        for kind in r.faults or ("none",):
            row = by_fault[kind]
            row["seeds"] += 1
            row["failing"] += bool(r.violations)
            row["violations"].update(v.kind for v in r.violations)
        for v in r.violations:
            violations.append(
                {
                    "seed": r.seed,
                    "kind": v.kind,
                    "key": v.key,
                    "detail": v.detail,
                    "replay": verify.replay(r.seed, kinds, store),
                }
            )
    return {
        "store": "sqlite" if store is None else redact(store),
        "seeds": len(results),
        "faults": list(kinds),
        "seconds": round(took, 3),
        "seeds_per_s": round(len(results) / took, 2) if took else None,
        "violations": violations,
        "by_fault": {
            k: {**v, "violations": dict(v["violations"])} for k, v in sorted(by_fault.items())
        },
    }


def _print(out: Console, summary: dict[str, Any], took: float) -> None:
    table = Table(
        "fault kind", "seeds with it", "failing seeds", *checker.KINDS, title="cronlab verify"
    )
    for kind, row in summary["by_fault"].items():
        counts = [str(row["violations"].get(k, 0)) for k in checker.KINDS]
        table.add_row(kind, f"{row['seeds']:,}", f"{row['failing']:,}", *counts)
    out.print(table)
    n = summary["seeds"]
    failing = sorted({v["seed"] for v in summary["violations"]})
    out.print(
        f"{n:,} seeds in {took:.1f} s ({summary['seeds_per_s']} seeds/s); {len(failing):,} failing",
        highlight=False,
    )
    for seed in failing[:10]:
        first = next(v for v in summary["violations"] if v["seed"] == seed)
        out.print(
            f"  seed {seed}: {first['kind']} {first['key']} — {first['replay']}", highlight=False
        )
