"""The simulator's PostgreSQL side (sim/postgres.py) on a real server: the harness itself,
where a fault in it would read as a violation of the code under test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from contract.dist_servers import pg_database
from cronlab.sim.postgres import Link, PgSim
from cronlab.sim.world import Proc, World

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

T0 = 1_767_225_600_000


class _NoFaults:
    """The run's side PgSim asks (``sim.run._PgRun``): no server faults drawn."""

    def server_fault(self, proc: Proc) -> None:
        return None

    def _turn(self) -> int:
        return 0


@pytest.fixture
def sim() -> Iterator[PgSim]:
    with pg_database() as url:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
            c.execute("INSERT INTO t VALUES (1, 0)")
        admin = psycopg.connect(url, autocommit=True)
        pg = PgSim(world=World(seed=1, start_ms=T0, switch_p=0.0), run=_NoFaults(), url=url,
                   admin=admin)  # fmt: skip
        yield pg
        pg.terminate_all()
        admin.close()


def test_a_process_killed_in_a_lock_wait_after_the_server_ended_its_session(sim: PgSim) -> None:
    """CI, 2026-12-06, seed 205 on PostgreSQL: an operator's command still waiting for a lock
    when the run ended had its session ended by the server (``terminate_all``) and was then
    killed (``World.shutdown``); its unwinding ended the session again and the simulator
    raised ``ValueError: list.remove(x)`` — read as the command stuck. Ending a session the
    server already ended is nothing."""
    world = sim.world
    links: dict[str, Link] = {}

    def holder(proc: Proc) -> None:
        link = links["holder"] = sim.connect(proc, None)
        with link.conn.transaction():
            link.conn.execute("UPDATE t SET v = 1 WHERE id = 1")
            world.sleep(60_000)  # holds the row's lock past the end of the run

    def waiter(proc: Proc) -> None:
        world.sleep(10)
        link = links["waiter"] = sim.connect(proc, None)
        link.conn.execute("UPDATE t SET v = 2 WHERE id = 1")  # waits for the holder

    world.spawn("holder", holder)
    blocked = world.spawn("waiter", waiter)
    world.run_until(T0 + 1_000)
    assert blocked.waiting_db, "the waiter should be waiting for the holder's lock"

    sim.terminate_all()  # the run's end: the server ends every session
    world.shutdown()  # and every process still alive is killed

    exited: list[Any] = [text for _, text in world.trace if "exited" in text]
    assert exited == []
    assert blocked.dead and sim.links == []
    for link in links.values():
        link.conn.close()  # the client's side of the ended sessions
