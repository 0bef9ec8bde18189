"""The checker: what was due against what took effect, in Jepsen's words.

* **lost** — due, and it never took effect (and no policy recorded it as skipped): a job with
  no effect, a DONE task without one, a due PENDING row deleted;
* **duplicated** — took effect twice: two committed effects of one key, or a handler run again
  after the engine itself undid a run that had completed (its outside effect — an e-mail —
  happened twice with no fault to blame);
* **unexpected** — took effect though never due (an occurrence of a definition not in force);
* **late** — took effect later than the scenario's faults can explain (``scenario.late_bound_ms``);
* **stuck** — PENDING or DISPATCHED at the end with nothing left to move it;
* **split_brain** — two processes dispatched under one fencing epoch.

A backfilled occurrence that also ran on time is **duplicated** (a backfill refuses to reach
history the retention deleted, so no exception is made for it), and so is a condition
alerted twice. A finished row the retention deleted is judged as it was.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from cronlab.core import policy
from cronlab.sim import scenario as sc
from cronlab.sim.run import Outcome
from cronlab.sim.tasks import POISON

KINDS = ("lost", "duplicated", "unexpected", "late", "stuck", "split_brain")
SETTLED = ("DONE", "SKIPPED", "FAILED", "MISSED")
MAX_ATTEMPTS = sc.MAX_ATTEMPTS
# Faults that lose runs (each lost run counts as a failed attempt: execution.LostRun)
LOSING = {"kill", "pause", "outage", "terminate", "server_error", "slow", "jump", "lose"}
POISON_ROWS = tuple(k for k, _, _ in POISON)
POISON_KEYS = "poison:"
API_KEYS = "api:"


@dataclass(frozen=True, kw_only=True)
class Violation:
    kind: str
    key: str
    detail: str


def check(o: Outcome) -> list[Violation]:
    """Every violation the run shows, in a stable order."""
    found = [*_tasks(o), *_external(o), *_dropped(o), *_split_brain(o)]
    found += [*_pruned_open(o), *_backfilled_twice(o), *_alerted_twice(o), *_keys_held_twice(o)]
    found += [*_follow_ups(o), *_poison(o), *_wrong_task(o), *_overlapped(o), *_crashed(o)]
    if o.deadlock:
        found.append(Violation(kind="stuck", key="*", detail=f"the world froze: {o.deadlock}"))
    return sorted(set(found), key=lambda v: (KINDS.index(v.kind), v.key))


def _tasks(o: Outcome) -> list[Violation]:
    """Each row — still there, or pruned once finished — judged by its effects. A row is its
    key and due time: a key the App API deferred again after the retention deleted its
    finished task has a row per defer, each of which runs once (docs/api.md)."""
    effects = Counter((e[0], e[6]) for e in o.effects)
    by_key = Counter(e[0] for e in o.effects)
    by_task = Counter((e[0], e[5], e[6]) for e in o.effects)
    tasks_of: dict[tuple[str, int], set[int]] = {}
    for e in o.effects:
        tasks_of.setdefault((e[0], e[6]), set()).add(e[5])
    newest_first = sorted(o.effects, key=lambda e: e[3], reverse=True)
    first = {(e[0], e[6]): e[2] for e in newest_first}  # each row's first effect, by each clock
    first_true = {(e[0], e[6]): e[3] for e in newest_first}
    bound = sc.late_bound_ms(o.scenario)
    out = []
    rows = {(t[0], t[2]): t for t in o.tasks}
    for key, status, trigger_ms, _, _ in o.pruned:
        rows.setdefault((key, trigger_ms), (key, status, trigger_ms, None))
    for key, status, trigger_ms, error in rows.values():
        row = (key, trigger_ms)
        if not _expected(o, key, trigger_ms, o.dispatched.get(key)):
            if effects[row]:
                out.append(Violation(kind="unexpected", key=key, detail="never due, yet ran"))
            continue
        n = effects[row] if key.startswith(API_KEYS) else by_key[key]
        # An API key's rows are its tasks: one deferred again after the retention deleted the
        # last may share its due time (a clock set back; SQLite seed 963 with rekey), its id
        # (SQLite gives a deleted row's id to the next insert; seed 517), or both (seed 5126):
        # a task is its row, as the simulator numbered its insert (``Outcome.effects``).
        api = key.startswith(API_KEYS) and n
        once = max(by_task[key, t, trigger_ms] for t in tasks_of[row]) if api else n
        if once > 1:
            out.append(Violation(kind="duplicated", key=key, detail=f"{once} committed effects"))
        waiting = status == "PENDING" and trigger_ms > _clock_at_end(o)
        if status not in SETTLED and not waiting:  # (a clock set back delays what is due)
            out.append(Violation(kind="stuck", key=key, detail=f"{status} at the end"))
        elif (status == "DONE" and n == 0) or (
            status == "FAILED" and n == 0 and not _spent(o, key)
        ):
            out.append(Violation(kind="lost", key=key, detail=f"{status} without effect ({error})"))
        if n and row in first and first[row] - trigger_ms > bound:
            late = first[row] - trigger_ms
            out.append(Violation(kind="late", key=key, detail=f"{late} ms late (bound {bound})"))
        if n and row in first and (reached := _high_water(o, first_true[row])) < trigger_ms:
            ahead = trigger_ms - reached
            out.append(Violation(kind="unexpected", key=key, detail=f"ran {ahead} ms early"))
    seen = _seen(o)
    for job in o.scenario.jobs:
        if job.key not in seen:
            out.append(Violation(kind="lost", key=job.key, detail="its row is gone"))
    return out


def _seen(o: Outcome) -> set[str]:
    """Every key that had a row: still there, deleted while due, or pruned once finished."""
    return {t[0] for t in o.tasks} | {d[0] for d in o.dropped} | {p[0] for p in o.pruned}


def _spent(o: Outcome, key: str) -> bool:
    """A task FAILED without effect is not lost when it could not run (a poison row) or
    used every attempt failing — the failures its handler was made to have, or runs lost to
    the scenario's faults (a killed or stopped worker, a session ended)."""
    if key.startswith(POISON_KEYS):
        return True
    if o.failures.get(key, 0) < MAX_ATTEMPTS:
        return False
    job = next((j for j in o.scenario.jobs if j.key == key), None)
    scripted = 0 if job is None else max(job.fail_first, job.timeout_first)
    if job is not None and job.timeout_first and job.work_ms >= sc.TIMEOUT_MS:
        scripted = MAX_ATTEMPTS  # its work outlasts its timeout: every attempt fails
    crash = any(j.raises == "crash" for j in o.scenario.jobs)
    idle = o.scenario.idle_ms
    # A session ended past the idle limit loses every attempt of a job whose work outlasts
    # it; its batch-mates lose their first attempt beside it at most (a retry runs alone).
    doomed = idle is not None and job is not None and job.work_ms > idle
    losing = {f.kind for f in o.scenario.faults} & LOSING or crash or doomed
    scripted += idle is not None
    return scripted >= MAX_ATTEMPTS or bool(losing)


def _follow_ups(o: Outcome) -> list[Violation]:
    """A run that committed deferred its follow-up: the follow-up's row exists (its own
    checks are the generic ones: once, not lost, not stuck)."""
    committed = {e[1] for e in o.effects}
    seen = _seen(o)
    return [
        Violation(kind="lost", key=inv.follow_up, detail=f"deferred by run {inv.id}, never written")
        for inv in o.ledger.invocations
        if inv.follow_up is not None and inv.id in committed and inv.follow_up not in seen
    ]


def _poison(o: Outcome) -> list[Violation]:
    """A row the engine cannot run ends FAILED with its reason; it never stops the engine."""
    if not o.scenario.poison:
        return []
    status = {t[0]: (t[1], t[3]) for t in o.tasks} | {p[0]: (p[1], None) for p in o.pruned}
    out = []
    for key in POISON_ROWS:
        found, _ = status.get(key, (None, None))
        if found != "FAILED":
            detail = f"a row the engine cannot run ended {found}, not FAILED"
            out.append(Violation(kind="stuck", key=key, detail=detail))
    return out


def _wrong_task(o: Outcome) -> list[Violation]:
    """An occurrence runs the task of the definition in force when it was dispatched."""
    out = []
    for key, _, _, _, task, *_ in o.effects:
        if _occurrence(key) is None:
            continue
        found = _definition(o, key, o.dispatched.get(key))
        if found is not None and found.task != task:
            detail = f"ran task {task}; the definition in force runs {found.task}"
            out.append(Violation(kind="unexpected", key=key, detail=detail))
    return out


def _overlapped(o: Outcome) -> list[Violation]:
    """``overlap="skip"``: an occurrence that fell due while an earlier one of its schedule
    ran — dispatched before it, its effect committed after it — does not run. (Not judged
    when the authority's clock was stepped during the run: a clock set back shows a fire time
    twice, before and after a run's end.)"""
    if len(o.ledger.offsets) > 1:
        return []
    effect_at: dict[str, int] = {}
    for key, _, at_ms, *_ in o.effects:
        effect_at[key] = min(effect_at.get(key, at_ms), at_ms)
    by_schedule: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key in effect_at:
        target = _occurrence(key)
        if target is not None:
            by_schedule[target[0]].append((target[1], key))
    pruned_at = {p[0]: p[3] for p in o.pruned}  # (the retention's turn)
    out = []
    for runs in by_schedule.values():
        runs.sort()
        for (_, k1), (f2, k2) in itertools.combinations(runs, 2):
            found = _definition(o, k2, o.dispatched.get(k2))
            began = o.dispatched_at.get(k1)
            if found is None or found.overlap != "skip" or began is None:
                continue
            if pruned_at.get(k1, 1 << 62) < o.dispatched.get(k2, 0):
                continue  # the history no longer held it (the keep bounds what overlap sees)
            if began < f2 < effect_at[k1]:
                detail = f"ran though {k1} still ran at its fire time (overlap=skip)"
                out.append(Violation(kind="unexpected", key=k2, detail=detail))
    return out


def _external(o: Outcome) -> list[Violation]:
    runs = defaultdict(list)
    for inv in o.ledger.invocations:
        runs[inv.key].append(inv)
    out = []
    for key, invs in runs.items():
        undone = [i for i in invs if i.undone_by_engine]
        if any(later.id > i.id for i in undone for later in invs):
            detail = f"the handler ran {len(invs)} times; a completed run was undone with no fault"
            out.append(Violation(kind="duplicated", key=key, detail=detail))
    return out


def _dropped(o: Outcome) -> list[Violation]:
    """Rows deleted while due; one planned again under the same key is judged as a task,
    whether its row is still there or the retention deleted it once it ran (seed 7240)."""
    out, kept = [], {t[0] for t in o.tasks} | {p[0] for p in o.pruned}
    for key, trigger_ms, at_ms in o.dropped:
        if key not in kept and trigger_ms <= at_ms and _expected(o, key, trigger_ms):
            t0 = o.scenario.t0_ms
            detail = f"due at {trigger_ms - t0} ms, deleted at {at_ms - t0} ms, never run"
            out.append(Violation(kind="lost", key=key, detail=detail))
    return out


def _keys_held_twice(o: Outcome) -> list[Violation]:
    """An API key that had tasks of its own twice: each but the newest must have been deleted
    by the retention (only then is the key free again; docs/api.md)."""
    first: dict[str, dict[tuple[int, int], int]] = {}  # key → (row, due) → first effect
    for e in sorted(o.effects, key=lambda e: e[3]):
        if e[0].startswith(API_KEYS):
            first.setdefault(e[0], {}).setdefault((e[5], e[6]), e[3])
    pruned = {(p[0], p[4], p[2]) for p in o.pruned}
    return [
        Violation(kind="duplicated", key=key, detail=f"row {t} ran while its key's task was kept")
        for key, tasks in first.items()
        for t, due in sorted(tasks, key=tasks.__getitem__)[:-1]
        if (key, t, due) not in pruned
    ]


def _pruned_open(o: Outcome) -> list[Violation]:
    """The retention deletes finished rows only: one still DISPATCHED was work in flight."""
    return [
        Violation(kind="lost", key=key, detail=f"deleted by the retention while {status}")
        for key, status, _, _, _ in o.pruned
        if status not in SETTLED
    ]


def _backfilled_twice(o: Outcome) -> list[Violation]:
    """A backfill runs only occurrences that never ran, whatever came first: the occurrence
    on time, the backfill, or the retention's delete of the occurrence's row (a backfill
    never reaches what the retention deleted: seeds 5285, 6957)."""
    ran = {e[0] for e in o.effects}
    out = []
    for key in sorted(ran):
        target = _backfill(key)
        if target is None:
            continue  # not a backfill, or a backfilled occurrence's follow-up
        twin = f"schedule:{target[0]}:{target[1]}"
        if twin in ran:
            detail = f"ran on time as {twin} and again by a backfill"
            out.append(Violation(kind="duplicated", key=key, detail=detail))
    return out


def _alerted_twice(o: Outcome) -> list[Violation]:
    """An alert's condition (schedule, kind, subject) is raised once, whoever leads."""
    raised = Counter((schedule, kind, subject) for schedule, kind, subject, _ in o.alerts)
    return [
        Violation(kind="duplicated", key=f"alert {' '.join(c)}", detail=f"raised {n} times")
        for c, n in raised.items()
        if n > 1
    ]


def _crashed(o: Outcome) -> list[Violation]:
    """An operator's command or an App API call that raised what no caller is told to expect
    (only a refusal — ``ConfigError``, ``ConflictError`` — or ``BackendUnavailable``): the
    command never finished (PostgreSQL seed 2601: a keyed ``defer`` raised ``NotFoundError``)."""
    return [
        Violation(kind="stuck", key=line.split(" exited: ")[0], detail=line.split(" exited: ")[1])
        for _, line in o.trace
        if line.startswith("operator-") and " exited: " in line
    ]


def _split_brain(o: Outcome) -> list[Violation]:
    """Two processes dispatched under one epoch, or a superseded epoch dispatched after a
    newer one had (the fence's promise: epochs only move forward)."""
    leaders, newest, out = defaultdict(set), 0, []
    for proc, epoch, _, _ in o.ledger.dispatches:
        leaders[epoch].add(proc)
        if epoch < newest:
            detail = f"{proc} dispatched at epoch {epoch} after epoch {newest} had"
            out.append(Violation(kind="split_brain", key=f"epoch {epoch}", detail=detail))
        newest = max(newest, epoch)
    out += [
        Violation(kind="split_brain", key=f"epoch {e}", detail=f"{sorted(p)} all dispatched")
        for e, p in leaders.items()
        if len(p) > 1
    ]
    return out


# The checker reads keys on its own, not with the engine's parsing (which a bug, or the
# mutation gate, may break): an occurrence's and a backfill's keys are exactly these.
_OCCURRENCE = re.compile(r"schedule:([A-Za-z0-9][A-Za-z0-9._-]{0,99}):(-?[0-9]{1,19})")
_BACKFILL = re.compile(r"backfill:([A-Za-z0-9][A-Za-z0-9._-]{0,99}):(-?[0-9]{1,19})")


def _occurrence(key: str) -> tuple[str, int] | None:
    """(schedule, fire ms) of a schedule's occurrence key; None for any other key."""
    found = _OCCURRENCE.fullmatch(key)
    return None if found is None else (found[1], int(found[2]))


def _backfill(key: str) -> tuple[str, int] | None:
    found = _BACKFILL.fullmatch(key)
    return None if found is None else (found[1], int(found[2]))


def _clock_at_end(o: Outcome) -> int:
    """What the authority's clock shows as the run ends: a row it does not yet call due is
    waiting, not stuck (a clock set back by X delays what was due by up to X — ``late``)."""
    return o.end_ms + (o.ledger.offsets[-1][1] if o.ledger.offsets else 0)


def _high_water(o: Outcome, true_ms: int) -> int:
    """The latest time the authority's clock had shown by ``true_ms`` (a clock set back does
    not make an earlier run early: it was due when that clock said so)."""
    segments = [*o.ledger.offsets, (true_ms, 0)]
    return max(
        min(end, true_ms) + offset
        for (start, offset), (end, _) in itertools.pairwise(segments)
        if start <= true_ms
    )


def _expected(o: Outcome, key: str, trigger_ms: int, dispatched: int | None = None) -> bool:
    """Was this task due? Jobs are; an occurrence is when its definition was in force. One that
    was dispatched is judged by the definitions committed before its dispatch (a change that
    committed later — it waited for the write lock, or came at a clock set back — cannot undo
    what was due when it was dispatched)."""
    target = _occurrence(key)
    if target is None:
        return True
    found = _definition(o, key, dispatched)
    return found is not None and policy.next_fire(found, target[1] - 1) == target[1]


def _definition(o: Outcome, key: str, dispatched: int | None) -> policy.Schedule | None:
    """The definition of occurrence ``key``'s schedule in force at its fire time, among those
    committed before its dispatch (None: none was, or the schedule was paused or removed)."""
    target = _occurrence(key)
    assert target is not None
    name, fire_ms = target
    defs = o.ledger.definitions.get(name, [])
    changes = [(a, d) for a, turn, d in defs if dispatched is None or turn < dispatched]
    in_force = [d for since, d in changes if since < fire_ms]
    return in_force[-1] if in_force else None
