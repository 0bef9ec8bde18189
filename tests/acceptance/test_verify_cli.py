"""``cronlab verify`` as CI and a user run it: the deterministic simulator of the real code.

2,000 seeds of every fault kind together run here (``make verify``: 100,000); the issue-12 bug
seeds and the combined-fault seeds that failed before their fixes run alone; and a sabotaged
fence is caught (the checker can fail).
"""

from __future__ import annotations

import json

import pytest
from shell import PG, cronlab, need_pg

import beside
from cronlab.sim import scenario as sc

pytestmark = pytest.mark.acceptance


@pytest.mark.beside("verify-sqlite-500")
def test_five_hundred_sqlite_seeds_of_every_fault_kind_find_no_violation() -> None:
    """``cronlab verify --seeds 500 --jobs 2 --json``, run beside the suite (tests/beside.py);
    ``make verify`` runs 100,000."""
    done = beside.result("verify-sqlite-500")
    out = json.loads(done.stdout)
    assert (out["seeds"], out["violations"], done.returncode) == (500, [], 0)
    assert set(out["by_fault"]) == set(sc.KINDS)
    assert all(row["seeds"] > 0 and row["failing"] == 0 for row in out["by_fault"].values())


@pytest.mark.parametrize(
    ("seed", "kind"),
    [(86, "pause"), (1, "error"), (82, "skew"), (2, "identity"), (45, "redeploy"), (2, "switch")],
)
def test_each_bug_seed_of_issue_12_passes_now(seed: int, kind: str) -> None:
    """Each failed at a0b0dff (bugs 1-6; the table in docs/history/bugs.md names the fix)."""
    done = cronlab("verify", "--seed", str(seed), "--faults", kind, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.parametrize("seed", [35, 48, 82, 140, 442, 1103, 13560])
def test_each_combined_fault_seed_that_failed_at_bf1f8b8_passes_now(seed: int) -> None:
    """Each failed at bf1f8b8 with every fault kind; fixed in 64f8ff8 (a clock set back
    stopped the scan, a kept occurrence caught up under its new definition) or by making the
    simulator honest (a process that dies on its way up is restarted; the run lasts until
    the late bound). 13560, found in a 40,000-seed run: a savepoint's RELEASE failed after a
    handler's effect, the message was recorded as failed and retried, and the effect stayed
    (two committed effects); now the whole batch rolls back."""
    classic = ",".join(sc.CLASSIC)  # every kind there was then: the run they failed
    done = cronlab("verify", "--seed", str(seed), "--faults", classic, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.parametrize("seed", [5285, 6957, 7240, 43603, 24328, 92277])
def test_each_seed_that_failed_at_e80873e_or_49e5425_passes_now(seed: int) -> None:
    """Each failed at e80873e with every fault kind, a backfilled occurrence run twice.
    5285: a backfill ran minutes the retention then deleted, and a second backfill over them
    found no rows and ran them again (now a backfill never reaches deleted history). 6957: a
    backfill from an operator whose clock ran ahead, then a resume on a clock behind it
    planned the same occurrence again (now it is skipped as "backfilled"). Found by the
    100,000-seed run at 49e5425: 43603, a resume on a clock jumped back planned a fire that
    had run and whose row the retention had deleted (now a plan never goes back before the
    schedule's last fire); 7240, the checker's own mistake (an occurrence dropped by a
    redeploy, planned again under its key, run, then pruned, was called lost); 24328 and
    92277 (of seven), a late alert raised twice about a schedule just removed."""
    earlier = ",".join(sc.EARLIER)  # the kinds there were then: the run they failed
    done = cronlab("verify", "--seed", str(seed), "--faults", earlier, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.parametrize("seed", [265, 286, 953, 1271, 1576, 2890, 5733])
def test_each_seed_that_failed_during_issue_27_passes_now(seed: int) -> None:
    """Each failed with every fault kind once issue 27's were in (docs/history/bugs.md, "Every
    bug"): 265 and 953, a worker whose clock jumped ahead hid its retries (written on its own
    clock); 1271, the retention deleted an occurrence that had just finished, so the next one's
    overlap no longer saw it; 2890, an occurrence's end written on a clock stepped mid-batch;
    286, 1576 and 5733, the checker's own mistakes (overlap past the retention's keep, a task
    whose work outlasts its timeout, a key deferred again after the retention). Run with the
    kinds there were then (``sc.BEFORE_REKEY``)."""
    then = ",".join(sc.BEFORE_REKEY)
    done = cronlab("verify", "--seed", str(seed), "--faults", then, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.parametrize("seed", [517, 521, 963])
def test_each_seed_that_failed_once_rekey_was_in_passes_now(seed: int) -> None:
    """The checker's own mistakes, found as the rekey kind went in (every kind, SQLite): it
    told an API key's tasks apart by due time, but a key deferred again after the retention
    deleted its task can share it (963: the machine's clock set back) — and by id, but SQLite
    gives a deleted row's id to the next insert (517, 521). A task is now its id and its due
    time, and a key may hold a second task only once the first was deleted. Run with the
    kinds there were then (``sc.BEFORE_STALE``)."""
    then = ",".join(sc.BEFORE_STALE)
    done = cronlab("verify", "--seed", str(seed), "--faults", then, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.parametrize("seed", [5126, 10987])
def test_each_seed_the_search_at_0f99ee6_found_passes_now(seed: int) -> None:
    """The checker's own mistakes, found by the SQLite search at 0f99ee6 (docs/history/
    verify-0f99ee6/): 5126, an API key deferred three times, its task deleted by the retention
    between, SQLite giving the same id to all three and the machine's clock set back giving
    two of them the same due time — the checker, telling tasks apart by id and due time, saw
    one task run twice (now the simulator numbers each insert of a task row); 10987, a
    redeploy that waited for the write lock found the definition already deployed and changed
    nothing, yet the ledger noted a change as of when it asked, so the occurrence the
    definition before it made due was judged never due (now only a change is noted). Run with
    the kinds there were then (``sc.BEFORE_STALE``)."""
    then = ",".join(sc.BEFORE_STALE)
    done = cronlab("verify", "--seed", str(seed), "--faults", then, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


def test_the_seed_the_search_at_7cd0f4b_found_passes_now() -> None:
    """Seed 22794 (the SQLite search at 7cd0f4b, docs/history/verify-7cd0f4b/) lost a
    follow-up and ran a task twice: a worker paused holding a delivery; another ran its
    tasks, the retention deleted them, and SQLite gave a deleted task's id to the follow-up
    deferred next. The paused worker's message matched it (DISPATCHED, attempt 0) and ran
    the old task's handler as it. A task's id is now never given again (SQLite migration 016;
    ``tests/contract/test_exactly_once.py`` failed first). The ``stale`` kind, added then,
    reaches this within a dozen seeds (mutation ``ids-reused``). Run with the kinds there
    were then."""
    then = ",".join(sc.BEFORE_STALE)
    done = cronlab("verify", "--seed", "22794", "--faults", then, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


def test_the_seed_the_search_at_223b890_found_passes_now() -> None:
    """Seed 60941 (the SQLite search at 223b890, docs/history/verify-223b890/) lost two
    occurrences: a redeploy asked at a machine time of 79.9 s, waited 1.2 s for the write lock
    while the machine's clock jumped 60 s, and meanwhile the leader, on the new time, planned
    occurrences due at 138 s and 140 s. The redeploy then judged due-ness by the instant it
    was asked and dropped both as still to come, at 141 s. A schedule change now judges by the
    caller's clock read once it holds the lock (``clock=``; mutation
    ``change-judged-before-locks`` on SQLite too)."""
    done = cronlab("verify", "--seed", "60941", timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.postgres
@pytest.mark.parametrize("seed", [510, 654, 1017, 1507, 1529, 2601, 2974, 11587, 12941])
def test_each_postgresql_seed_that_failed_passes_now(seed: int) -> None:
    """Each failed in a search on PostgreSQL (docs/history/verify-ffb1f53/). At 09de925: 1507,
    a redeploy waited for a paused leader's fence locks and judged due-ness by the instant it
    asked, dropping an occurrence that fell due meanwhile (lost; now judged once it holds the
    locks); 1529, a handler outlasting the server's idle-in-transaction timeout took its
    batch-mates down at every attempt (now a retry runs in a transaction of its own). At
    ffb1f53: 2601, a keyed ``defer`` read back a task the retention had deleted after its
    insert ran into it (``NotFoundError``; now read in the insert's transaction, inserted
    again if gone); 2974 and 11587, the checker's own bound: one worker, jobs outlasting the
    idle limit at every attempt, all five attempts each take longer than it allowed. At
    438121c: 510, 654, 1017 and 12941, a retry claimed behind a handler that outlasted the
    visibility timeout was received again by another worker and charged attempts it never
    started, until it FAILED (now a claim gives back the groups it cannot hold). Run with the
    kinds there were then (``sc.BEFORE_REKEY``)."""
    need_pg()
    then = ",".join(sc.BEFORE_REKEY)
    done = cronlab("verify", "--seed", str(seed), "--faults", then, "--store", PG, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.postgres
def test_the_postgresql_seed_the_search_at_223b890_found_passes_now() -> None:
    """Seed 1974 (docs/history/verify-223b890/): four occurrences open at the end. The
    simulator's own mistake: an outage ended every session, and an App-API ``defer`` blocked
    in a lock wait was never answered — a terminated session left the list the simulator
    settles — so it waited for ever, the schedules' removal waited for it, and they fired up
    to the horizon. A real client's blocked statement fails at once when its session ends."""
    need_pg()
    done = cronlab("verify", "--seed", "1974", "--store", PG, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


@pytest.mark.postgres
@pytest.mark.beside("verify-postgresql-500")
def test_five_hundred_postgresql_seeds_of_every_fault_kind_find_no_violation() -> None:
    """The simulator on a real PostgreSQL server (a scratch database per process, made and
    dropped): every process a session of its own, statements interleaved by the seed.
    ``cronlab verify --seeds 500 --jobs 2 --json --store PG``, run beside the suite."""
    need_pg()
    done = beside.result("verify-postgresql-500")
    out = json.loads(done.stdout)
    assert (out["seeds"], out["violations"], done.returncode) == (500, [], 0)
    assert set(out["by_fault"]) == set(sc.KINDS)


@pytest.mark.parametrize(
    "store",
    [
        pytest.param("sqlite", marks=pytest.mark.beside("mutants-sqlite")),
        pytest.param(
            "postgresql", marks=[pytest.mark.postgres, pytest.mark.beside("mutants-postgresql")]
        ),
    ],
)
def test_the_mutation_gate_catches_every_deliberate_bug_at_its_recorded_seed(store: str) -> None:
    """A proof that can fail: each bug of tests/mutants/mutations.py, applied to a copy of the
    package alone, is caught at the seed ``make mutants`` recorded, as the violation it causes
    (``scripts/mutants.py --quick``, run beside the suite; the full search: ``make mutants``)."""
    if store == "postgresql":
        need_pg()
    done = beside.result(f"mutants-{store}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["not_caught"], done.returncode) == ([], 0), done.stderr[-3000:]
    assert len(out["rows"]) >= 12


def test_bad_flags_are_one_line_and_exit_2() -> None:
    done = cronlab("verify", "--seeds", "10", "--faults", "kill,teleport", timeout=60)
    assert done.returncode == 2 and "teleport" in done.stderr
    assert "Traceback" not in done.stderr
