"""Input a hostile user typed (issue 13's probes): one line naming the problem, exit 2, and
nothing written — each case printed a traceback, wrote a row before failing, ran out of memory
or was accepted as nonsense before."""

from __future__ import annotations

from pathlib import Path

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance
DEEP = '{"a":' * 5_000 + "1" + "}" * 5_000


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["enqueue", "fail", "--in", "10000000d"], "at most 36600d"),  # a row, then OverflowError
        (["enqueue", "fail", "--in", "99999999999999999999s"], "at most 36600d"),
        (["enqueue", "fail", "--in", "1s", "--payload", '{"a": NaN}'], "is not JSON"),
        (["enqueue", "fail", "--in", "1s", "--payload", DEEP], "nests too deep"),
        (["cluster", "--lease-ttl", "nan"], "not a finite number"),  # crashed the children
        (["cluster", "--visibility", "nan"], "not a finite number"),
        (["cluster", "--scan-interval", "nan"], "not a finite number"),
        (["cluster", "--worker-rate", "nan"], "not a finite number"),
        (["cluster", "--lease-ttl", "inf"], "--lease-ttl"),
        (["cluster", "--restart-after", "nan"], "--restart-after"),  # accepted
        (["cluster", "--workers", "100000000000000000000"], "--workers"),  # 24 GB, then OOM
        (["worker", "--rate", "nan"], "not a finite number"),
        (["scheduler", "--lease-ttl", "nan"], "not a finite number"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    args: list[str], words: str, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    done = cronlab(*args, "--store", f"sqlite:///{db}")
    assert done.returncode == 2, done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr[-500:]
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not db.exists()
