"""``cronlab simulate``: the lab's model on the command line."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from cronlab.cli.knobs import knob, repeatable
from cronlab.lab import model, params, workload
from cronlab.lab.model import Result, Scenario, Totals, simulate

TICKER_HEAD, TICKER_TAIL = 12, 6


TTL_S = click.IntRange(min=1, max=model.MAX_TTL_S)


@click.command("simulate")
@knob("--preset", click.Choice(workload.PRESETS), "midnight", "Workload shape.")
@knob(
    "--tasks",
    click.IntRange(min=0, max=model.MAX_TASKS),
    workload.DEFAULT_TASKS,
    "Tasks (midnight, spread) or tasks per minute (steady).",
)
@knob(
    "--minutes",
    click.IntRange(min=1, max=model.MAX_BUCKETS),
    workload.DEFAULT_MINUTES,
    "Minutes for steady and spread.",
)
@repeatable("--bucket", "buckets", "MINUTE=COUNT", "Due tasks at a minute; overrides the preset.")
@knob("--replicas", click.IntRange(min=1, max=model.MAX_REPLICAS), 3)
@knob("--workers", click.IntRange(min=1, max=model.MAX_WORKERS), 5, "Worker pods.")
@knob("--rate", click.IntRange(min=1, max=model.MAX_RATE), 200, "Tasks per second per pod.")
@knob("--election", click.Choice(["lease", "off"]), "lease")
@knob("--lease-ttl", TTL_S, 10, "Seconds.")
@click.option(
    "--durable/--in-memory",
    default=True,
    show_default=True,
    help="PENDING rows in a store, or timers in the dispatching process.",
)
@repeatable("--crash", "crashes", "leader@T|replica:I@T", "Crash at second T.")
@knob(
    "--restart-after",
    click.STRING,
    "300",
    "A crashed replica restarts after S seconds.",
    metavar="S|never",
)
@repeatable(
    "--pause",
    "pauses",
    "leader@T:D|replica:I@T:D",
    "Stop for D s at second T (a GC pause, SIGSTOP) and resume.",
)
@knob(
    "--fencing",
    click.Choice(["on", "off"]),
    "on",
    "Off: a paused leader that lost its lease still writes the batch it held.",
)
@knob("--batch", click.IntRange(min=1, max=model.MAX_TASKS), 10_000, "Dispatch batch.")
@repeatable(
    "--worker-crash", "worker_crashes", "POD@T", "Worker pod POD dies at second T, before its ack."
)
@knob("--visibility", TTL_S, 30, "Seconds.")
@knob(
    "--pod-restart", click.STRING, "30", "A crashed pod is back after S seconds.", metavar="S|never"
)
@knob(
    "--effects",
    click.Choice(["transactional", "external"]),
    "transactional",
    "Transactional: the effect commits with the ack; external: sent before it.",
)
@repeatable("--lose", "losses", "N@T", "N queued messages lost at second T (a queue failover).")
@knob(
    "--reconcile",
    click.STRING,
    "60",
    "The leader re-enqueues lost messages every S seconds.",
    metavar="S|off",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option(
    "--compare",
    "changes",
    multiple=True,
    metavar="KEY=VALUE",
    help=f"Run again with a knob changed and show both ({', '.join(params.COMPARE_KEYS)}).",
)
def simulate_cmd(as_json: bool, changes: tuple[str, ...], **fields: Any) -> None:
    """Run the model of distributed cron: duplicates, missed triggers, backlog, drain time."""
    a = params.build_scenario(**fields)  # every other option is one of its parameters
    b = _changed(a, changes)
    ra, rb = simulate(a), (simulate(b) if b is not None else None)
    if as_json:
        click.echo(json.dumps(_json(ra, rb)))
    elif rb is None:
        _print_one(Console(soft_wrap=True), ra)
    else:
        _print_compare(Console(soft_wrap=True), ra, rb, changes)


def _changed(a: Scenario, changes: tuple[str, ...]) -> Scenario | None:
    if not changes:
        return None
    b = a
    for text in changes:
        b = params.change(b, *params.parse_change(text))
    return b


def _json(a: Result, b: Result | None) -> dict[str, Any]:
    if b is None:
        return params.result_dict(a)
    return {
        "a": params.result_dict(a),
        "b": params.result_dict(b),
        "diff": params.diff(a.totals, b.totals),
    }


def describe(s: Scenario) -> str:
    election = f"lease (TTL {s.lease_ttl} s)" if s.election == "lease" else "no election"
    faults = [("crash", [f.label() for f in s.faults]), ("pause", [p.label() for p in s.pauses])]
    faults += [("worker crash", [w.label() for w in s.worker_crashes])]
    faults += [("lose", [x.label() for x in s.losses])]
    extra = "".join(f", {kind} {', '.join(labels)}" for kind, labels in faults if labels)
    if s.pauses and not s.fencing:
        extra += ", no fencing"
    if s.worker_crashes:
        extra += f", {s.effects} effects"
    return (
        f"{s.due:,} due in {len(s.buckets)} bucket(s) · {s.replicas} replicas · {election} · "
        f"{'durable' if s.durable else 'in-memory'} timers · {s.workers} pods × {s.rate}/s"
        f"{extra}"
    )


def lead_metrics(t: Totals) -> list[tuple[str, str]]:
    return [
        ("Duplicate executions", f"{t.duplicates:,}"),
        ("Missed triggers", f"{t.missed:,}"),
        ("Queue backlog peak", f"{t.backlog_peak:,}"),
        ("Drain time", f"{t.drain_time_s / 60:.1f} min"),
    ]


def ticker(r: Result) -> list[str]:
    """``min 00 · dispatched … · executed … · dup ×… · missed … · backlog …`` per minute."""
    from cronlab.lab.series import per_minute  # numpy: the lab extra (--help needs none)

    pm = per_minute(r.timeline)
    rows = zip(
        pm.minute, pm.dispatched, pm.executed, pm.duplicates, pm.missed, pm.backlog, strict=True
    )
    return [
        f"min {m:02d} · dispatched {d:,} · executed {e:,} · dup ×{x:,} · missed {mi:,} · "
        f"backlog {b:,}"
        for m, d, e, x, mi, b in rows
    ]


def _print_one(out: Console, r: Result) -> None:
    lines = _elide(ticker(r))  # first: a run too long to chart prints nothing
    out.print(
        f"[bold]Cron at Scale[/bold] — {describe(r.scenario)}", highlight=False, soft_wrap=True
    )
    table = Table(show_header=True, header_style="bold")
    for name, _ in lead_metrics(r.totals):
        table.add_column(name, justify="right")
    table.add_row(*(value for _, value in lead_metrics(r.totals)))
    out.print(table)
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(params.sentence(r.scenario), highlight=False)
    for line in params.fault_sentences(r):
        out.print(line, highlight=False)
    _print_extras(out, r.totals)


def _print_extras(out: Console, t: Totals) -> None:
    delays = ", ".join(f"{d} s" for d in t.takeover_delays_s) or "none"
    out.print(
        f"due {t.due:,} · dispatched {t.dispatched:,} · executed {t.executed:,} · "
        f"takeovers: {delays} · fenced writes {t.fenced_writes:,} · redelivered "
        f"{t.redelivered:,} · stuck {t.stuck:,} · late {t.late:,}",
        highlight=False,
    )
    v = params.verdict(t)
    found = ", ".join(f"{k} {n:,}" for k, n in v["counts"].items() if n)
    out.print(f"verdict: {'ok' if v['ok'] else found}", highlight=False)


def _elide(lines: list[str]) -> list[str]:
    if len(lines) <= TICKER_HEAD + TICKER_TAIL + 1:
        return lines
    hidden = len(lines) - TICKER_HEAD - TICKER_TAIL
    return [*lines[:TICKER_HEAD], f"… {hidden:,} more minutes …", *lines[-TICKER_TAIL:]]


def _print_compare(out: Console, a: Result, b: Result, changes: tuple[str, ...]) -> None:
    out.print(f"[bold]A[/bold]: {describe(a.scenario)}", highlight=False)
    out.print(f"[bold]B[/bold]: A with {', '.join(changes)}", highlight=False)
    table = Table(show_header=True, header_style="bold")
    for col in ("metric", "A", "B", "B − A"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    delta = params.diff(a.totals, b.totals)
    rows = [
        ("duplicates", "Duplicate executions"),
        ("missed", "Missed triggers"),
        ("backlog_peak", "Queue backlog peak"),
        ("drain_time_s", "Drain time (s)"),
        ("dispatched", "Dispatched"),
        ("executed", "Executed"),
        ("fenced_writes", "Fenced writes"),
        ("redelivered", "Redelivered"),
        ("stuck", "Stuck"),
        ("late", "Late"),
    ]
    for key, label in rows:
        va, vb = getattr(a.totals, key), getattr(b.totals, key)
        table.add_row(label, f"{va:,}", f"{vb:,}", f"{delta[key]:+,}")
    out.print(table)
    out.print(f"A: {params.sentence(a.scenario)}", highlight=False)
    out.print(f"B: {params.sentence(b.scenario)}", highlight=False)
