"""Measured against the model: every mode and fault the lab's live panel offers, run on the real
engine through the lab's own API (real processes, SQLite in a temporary folder), several runs
each, next to the model's numbers for the same live scenario (issue 15).

For each case and run it prints the measured dispatched, duplicates, missed, fenced writes and
redelivered counts, the model's, and whether the counts the lesson is about agree exactly
(duplicates, missed, fenced writes); then a markdown table for docs/lab.md.

    .venv/bin/python bench/lab_agreement.py [--runs 2] [--count 6000] [--cases zombie,worker]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.testclient import TestClient

from cronlab.lab.web.app import LabConfig, create_app
from cronlab.lab.web.live import Live

KEYS = ("dispatched", "duplicates", "missed", "fenced_writes", "redelivered")
LESSON = ("duplicates", "missed", "fenced_writes")  # what must agree exactly
EVERY_COPY = ("dispatched", *LESSON)  # where nothing re-dispatches, every copy counts too


@dataclass(frozen=True)
class Case:
    name: str
    start: dict[str, Any]
    chaos: dict[str, Any] | None = None
    when: str = "before"  # before the trigger, or once work is under way ("during")
    lesson: tuple[str, ...] = LESSON


CASES = [
    Case("midnight, lease", {}, lesson=EVERY_COPY),
    Case("election off", {"election": "off"}, lesson=EVERY_COPY),
    Case("crash the leader", {}, {"action": "crash-leader"}, "during"),
    Case("pause the leader 15 s", {}, {"action": "pause-leader", "for": 15}, "during"),
    Case("crash the leader, in-memory timers", {"timers": "in-memory"}, {"action": "crash-leader"}),
    Case(
        "zombie leader, fencing on",
        {"lead_s": 8},
        {"action": "pause-leader", "for": 15, "mid_dispatch": True},
    ),
    Case(
        "zombie leader, fencing off",
        {"lead_s": 8, "fencing": "off"},
        {"action": "pause-leader", "for": 15, "mid_dispatch": True},
    ),
    Case("kill a worker mid-batch", {}, {"action": "kill-worker"}, "during"),
]


def wait(what: str, check: Callable[[], Any], deadline_s: float = 180) -> Any:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if value := check():
            return value
        time.sleep(0.3)
    raise SystemExit(f"timed out waiting for {what}")


def one(client: TestClient, case: Case, count: int) -> tuple[dict[str, int], dict[str, int]]:
    body = {"count": count, "drain_s": 20, "lead_s": 5, **case.start}
    started = client.post("/api/live/start", json=body)
    assert started.status_code == 201, started.text
    snap = lambda: client.get("/api/live").json()  # noqa: E731
    if case.start.get("election") == "off":
        wait("the replicas", lambda: _schedulers(snap()) >= 3)
    else:
        wait("a leader", lambda: (snap().get("status") or {}).get("leader"))
    if case.chaos is not None:
        if case.when == "during":
            wait(
                "work under way", lambda: ((snap().get("report") or {}).get("executed") or 0) > 200
            )
        sent = client.post("/api/live/chaos", json=case.chaos)
        assert sent.status_code == 200, sent.text
    wait("every invoice settled", lambda: _settled(snap(), count))
    time.sleep(2)  # a last poll of the report and the prediction
    last = snap()
    client.post("/api/live/stop", json={})
    measured = {k: int(last["report"].get(k, 0)) for k in KEYS}
    model = {k: int(last["prediction"]["totals"].get(k, 0)) for k in KEYS}
    return measured, model


def _schedulers(snap: dict[str, Any]) -> int:
    procs = (snap.get("status") or {}).get("processes") or []
    return sum(1 for p in procs if p.get("role") == "scheduler" and p.get("alive"))


def _settled(snap: dict[str, Any], count: int) -> bool:
    tasks = (snap.get("report") or {}).get("tasks") or {}
    done = sum(int(tasks.get(s, 0)) for s in ("DONE", "FAILED", "MISSED"))
    return done >= count and (snap.get("status") or {}).get("queue_depth") == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--count", type=int, default=6_000)
    ap.add_argument("--cases", help="only cases whose name holds one of these (comma-separated)")
    args = ap.parse_args()
    wanted = [w.strip() for w in args.cases.split(",")] if args.cases else None
    cases = [c for c in CASES if wanted is None or any(w in c.name for w in wanted)]
    rows = []
    live = Live(poll_s=0.5)
    with TestClient(create_app(LabConfig(), live), base_url="http://127.0.0.1") as client:
        for case in cases:
            for run in range(1, args.runs + 1):
                measured, model = one(client, case, args.count)
                agree = all(measured[k] == model[k] for k in case.lesson)
                rows.append((case.name, run, measured, model, agree))
                print(f"{case.name} #{run}: measured {measured} model {model} agree={agree}")
    live.close()
    print(f"\n{args.count:,} invoices, 3 replicas, 5 pods, drained in about 20 s\n")
    head = ["case", "run", "dispatched (measured / model)", "duplicates", "missed"]
    head += ["fenced writes", "redelivered", "lesson agrees"]
    print("(lesson: duplicates, missed and fenced writes must be equal; for the midnight run")
    print("and election off, dispatched too)\n")
    print("| " + " | ".join(head) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, run, m, p, agree in rows:
        cells = " | ".join(f"{m[k]:,} / {p[k]:,}" for k in KEYS)
        print(f"| {name} | {run} | {cells} | {'yes' if agree else 'NO'} |")


if __name__ == "__main__":
    main()
