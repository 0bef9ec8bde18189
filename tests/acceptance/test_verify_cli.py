"""``cronlab verify`` as CI and a user run it: the deterministic simulator of the real code.

The fault kinds whose search is clean today run 2,000 seeds here; the issue-12 bug seeds run
alone; and a sabotaged fence is caught (the checker can fail). Combined faults of every kind
still show violations (docs/engine.md, "Guarantees", says which): ``make verify`` runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cronlab.sim import verify
from cronlab.stores.sql import store as sql_store

pytestmark = pytest.mark.acceptance
CLEAN = "kill,lose,duplicate,error,identity,switch"


def cronlab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_two_thousand_seeds_of_the_clean_fault_kinds_find_no_violation() -> None:
    done = cronlab("verify", "--seeds", "2000", "--faults", CLEAN, "--jobs", "2", "--json")
    out = json.loads(done.stdout)
    assert (out["seeds"], out["violations"], done.returncode) == (2000, [], 0)
    assert set(out["by_fault"]) == set(CLEAN.split(","))
    assert all(row["seeds"] > 0 and row["failing"] == 0 for row in out["by_fault"].values())


@pytest.mark.parametrize(
    ("seed", "kind"),
    [(86, "pause"), (1, "error"), (82, "skew"), (2, "identity"), (45, "redeploy"), (2, "switch")],
)
def test_each_bug_seed_of_issue_12_passes_now(seed: int, kind: str) -> None:
    """Each failed at a0b0dff (bugs 1-6; the table in docs/engine.md names the fix)."""
    done = cronlab("verify", "--seed", str(seed), "--faults", kind, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "no violation" in done.stdout


def test_the_checker_catches_a_store_without_its_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search can fail: with ``SqlStore._fence`` checking nothing, a leader stopped just
    before it took the write lock dispatches at its old epoch after its successor did."""
    monkeypatch.setattr(sql_store.SqlStore, "_fence", lambda self, c, epoch, now_ms: None)
    kinds = ("pause", "kill", "skew", "jump")
    found = next((r for s in range(1, 401) if (r := verify.run_seed(s, kinds)).violations), None)
    assert found is not None, "400 seeds and no violation without the fence"
    assert "split_brain" in {v.kind for v in found.violations}  # a superseded epoch wrote


def test_bad_flags_are_one_line_and_exit_2() -> None:
    done = cronlab("verify", "--seeds", "10", "--faults", "kill,teleport", timeout=60)
    assert done.returncode == 2 and "teleport" in done.stderr
    assert "Traceback" not in done.stderr
