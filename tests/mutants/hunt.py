"""Run seeds of the (mutated) engine on ``sys.path`` until one shows an expected violation.

``python tests/mutants/hunt.py '{"first": 1, "count": 2000, "expect": [...], "store": null,
"jobs": 2}'`` (or ``"seeds": [...]``)
prints one JSON line: the first seed, in order, whose run shows a violation of an expected
kind (``seed``, ``kind``, ``key``, ``detail``), and how many seeds ran; ``seed`` null if none.
Run by ``scripts/mutants.py`` with ``PYTHONPATH`` at a mutated copy of ``cronlab``.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import sys
from typing import Any

os.environ["PYTHONHASHSEED"] = "0"


def _one(args: tuple[int, str | None]) -> tuple[int, list[tuple[str, str, str]]]:
    from cronlab.sim import verify

    seed, store = args
    try:
        r = verify.run_seed(seed, store=store)
    except Exception as exc:  # the simulator itself failed: said, never taken for a catch
        return seed, [("crashed", "*", f"{type(exc).__name__}: {exc}")]
    return seed, [(v.kind, v.key, v.detail) for v in r.violations]


def main(spec: dict[str, Any]) -> dict[str, Any]:
    import cronlab

    origin = os.path.dirname(cronlab.__file__)
    store, expect = spec["store"], set(spec["expect"])
    scratch: Any = contextlib.nullcontext()
    if store is not None:
        from cronlab.sim import postgres

        scratch = postgres.scratch_run(store)
    ran, found = 0, None
    with scratch, multiprocessing.get_context("spawn").Pool(spec["jobs"]) as pool:
        seeds = spec.get("seeds") or range(spec["first"], spec["first"] + spec["count"])
        for seed, violations in pool.imap(_one, [(s, store) for s in seeds]):
            if violations and violations[0][0] == "crashed":
                crashed = {"seed": seed, "kind": "crashed", "key": "*", "detail": violations[0][2]}
                return {"code": origin, "ran": ran + 1, "seed": None, "crashed": crashed}
            ran += 1
            hits = [v for v in violations if v[0] in expect]
            if hits:
                kind, key, detail = hits[0]
                found = {"seed": seed, "kind": kind, "key": key, "detail": detail}
                pool.terminate()
                break
    return {"code": origin, "ran": ran, **(found or {"seed": None})}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
