"""The operator's console: a page on a store, and the JSON API behind it.

``create_console(ConsoleConfig(...))`` returns a Starlette app; ``cronlab console`` serves it.
The lab's rules (``web/guard.py``): 127.0.0.1 by default, a token required off loopback —
there for every ``/api/`` request, reads included, since the history is the operator's —
loopback Host headers only on loopback, state-changing requests JSON only, not cross-site,
bodies bounded. It reads only the store and writes only through the store's operator methods
(pause, resume, trigger, backfill; a task's cancel and retry), so it runs next to a cluster on
PostgreSQL or SQLite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cronlab import views
from cronlab.clock import SystemClock
from cronlab.core import delays
from cronlab.ports import TaskInfo
from cronlab.stores.sql import SqlStore
from cronlab.web import board, console_api, guard
from cronlab.web.guard import PAGE_HEADERS, read_body

STATIC = Path(__file__).parent / "static"
CLOCK = SystemClock()
ACTIONS = ("pause", "resume", "trigger", "backfill")


@dataclass(frozen=True, kw_only=True)
class ConsoleConfig(guard.ServerConfig):
    """Where the console listens, the token off loopback, and the store it shows."""

    NAME = "console"
    LOCKED = "the console's API needs its token"

    store_url: str
    port: int = 8100


def create_console(cfg: ConsoleConfig, opener: Callable[[], SqlStore] | None = None) -> Starlette:
    """The console app; ``opener`` (a thread's store) is injectable for tests."""
    from cronlab import stores

    opener = opener or (lambda: stores.open_store(cfg.store_url, create=False))
    shared = not cfg.store_url.startswith("sqlite:")
    console = _Console(cfg, board.reader(opener, shared))
    return Starlette(routes=console.routes(), middleware=guard.host_guard(cfg.host))


class _Console:
    def __init__(self, cfg: ConsoleConfig, store: Callable[[], SqlStore]) -> None:
        self.cfg, self.store, self.fires = cfg, store, board.Fires()

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.page),
            Route("/api/console", self.guarded(self.snapshot)),
            Route("/api/runs", self.guarded(self.runs)),
            *[
                Route(
                    f"/api/schedules/{{name}}/{a}",
                    self.guarded(self.act, write=True),
                    methods=["POST"],
                )
                for a in ACTIONS
            ],
            Route("/api/tasks/{id}", self.guarded(self.task, field="id")),
            *[
                Route(
                    f"/api/tasks/{{id}}/{a}",
                    self.guarded(self.act_on_task, write=True, field="id"),
                    methods=["POST"],
                )
                for a in console_api.TASK_ACTIONS
            ],
            Route("/openapi.json", self.openapi),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    async def page(self, _: Request) -> Response:
        return FileResponse(STATIC / "console" / "index.html", headers=PAGE_HEADERS)

    async def openapi(self, _: Request) -> Response:
        return JSONResponse(console_api.document())

    def guarded(
        self, endpoint: guard.Handler, *, write: bool = False, field: str = "name"
    ) -> guard.Handler:
        """An API endpoint behind the rules (``guard.guarded``; its errors are about ``field``:
        the schedule's ``name``, the task's ``id``)."""
        return guard.guarded(self.cfg, endpoint, write=write, field=field, fallback="body")

    async def snapshot(self, request: Request) -> Response:
        page = console_api.page(dict(request.query_params))
        data = await asyncio.to_thread(
            lambda: board.snapshot(self.store(), CLOCK.now_ms(), self.fires, page)
        )
        return JSONResponse(data, headers={"Cache-Control": "no-store"})

    async def runs(self, request: Request) -> Response:
        query = console_api.run_query(dict(request.query_params))
        now = CLOCK.now_ms()
        rows = await asyncio.to_thread(lambda: self.store().runs(query, now))
        return JSONResponse({"runs": [views.run_json(r) for r in rows]})

    async def act(self, request: Request) -> Response:
        action = request.url.path.rsplit("/", 1)[-1]
        name = console_api.storable("name", str(request.path_params["name"]))
        body = await read_body(request)
        result = await asyncio.to_thread(self._act, action, name, body)
        return JSONResponse(result)

    async def task(self, request: Request) -> Response:
        task_id = console_api.task_id(str(request.path_params["id"]))
        info = await asyncio.to_thread(lambda: self.store().task_info(task_id))
        return JSONResponse(views.task_json(info), headers={"Cache-Control": "no-store"})

    async def act_on_task(self, request: Request) -> Response:
        """``cancel`` or ``retry`` one task (``ports.TaskControl``), recorded as done by the
        console for the address that asked."""
        action = request.url.path.rsplit("/", 1)[-1]
        task_id = console_api.task_id(str(request.path_params["id"]))
        console_api.check_task_body(action, await read_body(request))
        by = f"console {request.client.host if request.client else '?'}"
        info = await asyncio.to_thread(self._act_on_task, action, task_id, by)
        return JSONResponse(views.task_json(info))

    def _act_on_task(self, action: str, task_id: int, by: str) -> TaskInfo:
        store, now = self.store(), CLOCK.now_ms()
        if action == "cancel":
            return store.cancel_task(task_id, now, by=by)
        return store.retry_task(task_id, now, by=by)

    def _act(self, action: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        store, now = self.store(), CLOCK.now_ms()
        console_api.check_fields(action, body)
        if action == "pause":
            note = console_api.text(body, "note")
            changed = store.pause_schedule(name, now, note=note, clock=CLOCK.now_ms)
            return {"schedule": name, "paused": True, "changed": changed}
        if action == "resume":
            changed = store.resume_schedule(name, now, clock=CLOCK.now_ms)
            return {"schedule": name, "paused": False, "changed": changed}
        if action == "trigger":
            return {"schedule": name, "key": store.trigger_schedule(name, now)}
        start, end = (delays.parse_at(console_api.text(body, k) or "") for k in ("from", "to"))
        done = store.backfill_schedule(name, start, end, now)
        return {"schedule": name, "added": done.added, "existing": done.existing}
