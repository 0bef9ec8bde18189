"""The process registry: schedulers and workers register, beat and exit; the console, the
lab's chaos and ``cronlab ps`` read it."""

from __future__ import annotations

import dataclasses

from cronlab.ports import ProcessInfo
from cronlab.stores.rows import by_column
from cronlab.stores.sql.dialect import Conn
from cronlab.stores.sql.part import Part

# processes_beat's columns: ProcessInfo's fields
PROCESS = tuple(f.name for f in dataclasses.fields(ProcessInfo))


class SqlProcesses(Part):
    """One row per (role, index) slot: the process in it now, or the one that exited last."""

    def register(self, info: ProcessInfo) -> None:
        args = dataclasses.asdict(info)

        def register(c: Conn) -> None:
            c.execute(self.queries["forget_exited_process"], args)
            c.execute(self.queries["register_process"], args)

        self.db.transaction(register)

    def exited(self, owner: str, now_ms: int) -> None:
        args = {"now": now_ms, "owner": owner}
        self.db.transaction(lambda c: c.execute(self.queries["process_exited"], args))

    def all(self) -> list[ProcessInfo]:
        return [ProcessInfo(**by_column(PROCESS, r)) for r in self.named("processes_beat")]

    def heartbeat(self, info: ProcessInfo, now_ms: int) -> None:
        """Note that the process ``info`` names is alive at ``now_ms``; one nobody registered
        (a scheduler started by hand or by Kubernetes, not by ``cronlab cluster``) registers
        itself in its role and index slot first."""

        def beat(c: Conn) -> None:
            args = {"now": now_ms, "owner": info.owner}
            if c.execute(self.queries["heartbeat"], args).rowcount == 0:
                c.execute(self.queries["register_process"], dataclasses.asdict(info))
                c.execute(self.queries["heartbeat"], args)

        self.db.transaction(beat)
