"""How fast the lab model computes, against the same midnight run written task by task in SimPy.

Prints: the model's time for 1,000,000 midnight invoices, for a 24-hour steady run of
1,000,000 tasks a minute (1.44 billion tasks), the SimPy baseline for the midnight run, and the
ratio. Run: .venv/bin/python bench/sim.py [--tasks N]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
from collections.abc import Callable

import simpy

from cronlab.lab.model import Scenario, simulate
from cronlab.lab.series import per_minute


def best_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def simpy_midnight(tasks: int, pods: int = 5, rate: int = 200) -> float:
    """Leader dispatches ``tasks`` at t=0; each pod executes one task every 1/rate s. Returns
    the drain time in seconds (the model's answer is tasks / (pods × rate))."""
    env = simpy.Environment()
    queue = collections.deque(range(tasks))  # the leader's dispatch at t=0, O(1) pops
    done = [0.0]

    def pod() -> simpy.events.Event:
        while queue:
            queue.popleft()
            yield env.timeout(1 / rate)
            done[0] = env.now

    for _ in range(pods):
        env.process(pod())
    env.run()
    return done[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1_000_000)
    args = parser.parse_args()
    midnight = Scenario(buckets=((0, args.tasks),))
    steady = Scenario(buckets=tuple((m, args.tasks) for m in range(1440)))

    def day() -> object:
        return per_minute(simulate(steady).timeline)

    t_mid = best_of(lambda: simulate(midnight), 50)
    t_day = best_of(day, 5)
    start = time.perf_counter()
    drain = simpy_midnight(args.tasks)
    t_simpy = time.perf_counter() - start
    model_drain = simulate(midnight).totals.drain_time_s
    print(f"model, midnight {args.tasks:,} tasks:          {t_mid * 1e3:8.3f} ms (median of 50)")
    print(
        f"model, 24 h steady {1440 * args.tasks:,} tasks: {t_day * 1e3:8.3f} ms "
        "(median of 5, incl. per-minute series)"
    )
    print(
        f"SimPy task by task, midnight {args.tasks:,}:   {t_simpy * 1e3:8.1f} ms "
        f"(drain {drain:.0f} s; model says {model_drain} s)"
    )
    print(f"ratio SimPy / model (midnight): {t_simpy / t_mid:,.0f}x")


if __name__ == "__main__":
    main()
