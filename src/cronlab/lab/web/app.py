"""The lab's web app: the page, the model API, live mode, metrics and the OpenAPI document.

``create_app(LabConfig(...))`` returns a Starlette app; ``cronlab lab`` serves it with uvicorn.
Mutating live endpoints (start, stop, chaos) are guarded: allowed when the server is bound to
loopback with no token configured, otherwise only with the token (``X-Cronlab-Token`` header or
``Authorization: Bearer``). On loopback the Host header must be a loopback name, so a web page
elsewhere cannot reach the API through DNS rebinding. Token or not, a state-changing request
must be ``application/json`` (which a page elsewhere cannot send without CORS, which the lab
never grants), must not say it comes from another site (``Origin``, ``Sec-Fetch-Site``), and
its body is at most ``MAX_BODY`` bytes. Every response carries the security headers.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cronlab import web
from cronlab.exceptions import ConfigError, ParamError
from cronlab.lab import params
from cronlab.lab import simulated as labsim
from cronlab.lab.model import simulate
from cronlab.lab.web import metrics, openapi, query
from cronlab.lab.web.live import CHAOS, Live, LiveConfig
from cronlab.web import guard
from cronlab.web.guard import PAGE_HEADERS, Handler, problem, read_body

STATIC = Path(web.__file__).parent / "static"  # (the console's and the lab's assets, one folder)


REALSIM_CACHE = 64  # answers of /api/realsim kept


@dataclass(frozen=True, kw_only=True)
class LabConfig(guard.ServerConfig):
    """Where the lab listens and the token that unlocks live endpoints off loopback."""

    NAME = "lab"
    LOCKED = "live endpoints need the lab's token"


def create_app(config: LabConfig | None = None, live: Live | None = None) -> Starlette:
    """The lab app; ``live`` is injectable so tests can point it at another engine command."""
    cfg = config or LabConfig()
    lab = _Lab(cfg, live or Live())

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(lab.live.close)

    app = Starlette(routes=lab.routes(), middleware=guard.host_guard(cfg.host), lifespan=lifespan)
    app.state.lab = lab
    return app


class _Lab:
    """The handlers, bound to one configuration and one live run."""

    def __init__(self, cfg: LabConfig, live: Live) -> None:
        self.cfg = cfg
        self.live = live
        self.realsims: dict[str, dict[str, Any]] = {}  # (insertion order: the oldest first)
        self.realsim_gate = threading.Lock()

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.page),
            Route("/api/simulate", self.simulate),
            Route("/api/realsim", self.realsim),
            Route("/api/live", self.live_snapshot),
            Route("/api/live/start", self.guarded(self.live_start), methods=["POST"]),
            Route("/api/live/stop", self.guarded(self.live_stop), methods=["POST"]),
            Route("/api/live/chaos", self.guarded(self.live_chaos), methods=["POST"]),
            Route("/api/live/events", self.live_events),
            Route("/metrics", self.metrics),
            Route("/openapi.json", self.openapi),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    async def page(self, _: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    async def simulate(self, request: Request) -> Response:
        try:
            parsed = query.parse(list(request.query_params.multi_items()))
        except ParamError as exc:
            return problem(422, str(exc), exc.field)
        # A day of steady load takes tens of ms: keep the event loop (SSE, other tabs) free.
        try:
            return JSONResponse(await asyncio.to_thread(run_model, parsed))
        except ConfigError as exc:  # a run too long to chart
            return problem(422, str(exc), "scenario")

    async def realsim(self, request: Request) -> Response:
        """The scenario on the real code, simulated (seconds of CPU): one at a time (429 while
        another runs), answers cached."""
        try:
            parsed = query.parse(list(request.query_params.multi_items()))
        except ParamError as exc:
            return problem(422, str(exc), exc.field)
        key = json.dumps(params.scenario_dict(parsed.scenario), sort_keys=True)
        if (hit := self.realsims.get(key)) is not None:
            return JSONResponse(hit)
        if not self.realsim_gate.acquire(blocking=False):
            return problem(429, "another simulated run is going: try again in a few seconds", "")
        try:
            result = await asyncio.to_thread(labsim.run, parsed.scenario)
        finally:
            self.realsim_gate.release()
        self.realsims[key] = result
        while len(self.realsims) > REALSIM_CACHE:
            self.realsims.pop(next(iter(self.realsims)))
        return JSONResponse(result)

    async def openapi(self, _: Request) -> Response:
        return JSONResponse(openapi.document())

    async def metrics(self, _: Request) -> Response:
        text = metrics.render(self.live.snapshot())
        return PlainTextResponse(text, media_type=metrics.MEDIA_TYPE)

    async def live_snapshot(self, _: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(self.live.snapshot))

    async def live_start(self, request: Request) -> Response:
        body = await read_body(request)
        try:
            cfg = live_config(body)
        except ParamError as exc:
            return problem(422, str(exc), exc.field)
        return JSONResponse(await asyncio.to_thread(self.live.start, cfg), status_code=201)

    async def live_stop(self, request: Request) -> Response:
        _known(await read_body(request), set())
        return JSONResponse(await asyncio.to_thread(self.live.stop))

    async def live_chaos(self, request: Request) -> Response:
        action, seconds, mid = chaos_request(await read_body(request))
        return JSONResponse(await asyncio.to_thread(self.live.chaos, action, seconds, mid))

    async def live_events(self, request: Request) -> Response:
        return StreamingResponse(
            self._events(request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )

    async def _events(self, request: Request) -> AsyncIterator[str]:
        """A ``snapshot`` event whenever the run changes; ``end`` once no run is going."""
        seen = -1
        while not await request.is_disconnected():
            if self.live.version != seen:
                seen = self.live.version
                snap = await asyncio.to_thread(self.live.snapshot)
                yield f"event: snapshot\ndata: {json.dumps(snap)}\n\n"
                if not snap["running"]:
                    yield "event: end\ndata: {}\n\n"
                    return
            await asyncio.sleep(0.25)

    def guarded(self, handler: Handler) -> Handler:
        """A live handler behind the rules (``guard.guarded``; its errors are the run's)."""
        return guard.guarded(self.cfg, handler, write=True, field="live", fallback="live")


def run_model(parsed: query.Request) -> dict[str, Any]:
    """``result_dict`` for the scenario; with changes, ``compare`` holds B and the difference."""
    a = simulate(parsed.scenario)
    data = params.result_dict(a, minutes=True)
    if parsed.changes:
        scenario_b = parsed.scenario
        for key, value in parsed.changes:
            scenario_b = params.change(scenario_b, key, value)
        b = simulate(scenario_b)
        data["compare"] = {
            "changes": [f"{k}={v}" for k, v in parsed.changes],
            "b": {
                "scenario": params.scenario_dict(b.scenario),
                "totals": params.totals_dict(b.totals),
                "sentence": params.sentence(b.scenario),
            },
            "diff": params.diff(a.totals, b.totals),
        }
    return data


LIVE_FIELDS = {"replicas", "workers", "election", "timers", "ttl", "count", "drain_s", "lead_s"}
LIVE_FIELDS |= {"fencing", "visibility"}
LIVE_WORDS = ("election", "timers", "fencing")  # the fields that are strings


def live_config(body: dict[str, Any]) -> LiveConfig:
    """LiveConfig from the page's JSON body; ParamError names a bad or unknown field."""
    _known(body, LIVE_FIELDS)
    knobs: dict[str, Any] = {}
    for name, value in body.items():
        key = "lease_ttl" if name == "ttl" else name
        if name in LIVE_WORDS:
            if not isinstance(value, str):
                raise ParamError(name, f"{name} must be a string, got {str(value)[:40]}")
            knobs[key] = value
        else:
            knobs[key] = whole(name, value)
    return LiveConfig(**knobs)


def chaos_request(body: dict[str, Any]) -> tuple[str, int, bool]:
    """(action, seconds, mid_dispatch) from a chaos body; ParamError names a bad or unknown
    field."""
    _known(body, {"action", "for", "mid_dispatch"})
    mid = body.get("mid_dispatch", False)
    if not isinstance(mid, bool):
        raise ParamError("mid_dispatch", f"mid_dispatch must be true or false, got {str(mid)[:40]}")
    seconds = whole("for", body.get("for", 15))
    if not 1 <= seconds <= 600:
        raise ParamError("for", f"for must be 1..600 seconds, got {seconds}")
    action = body.get("action")
    if action not in CHAOS:
        why = f"unknown action {str(action)[:40]!r} ({', '.join(CHAOS)})"
        raise ParamError("action", why)
    return action, seconds, mid


def whole(name: str, value: object) -> int:
    """A JSON number that is a whole number (``215`` or ``215.0``) as an int; ParamError for
    anything else, ``true`` included."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParamError(name, f"{name} must be a whole number, got {str(value)[:40]}")
    return value


def _known(body: dict[str, Any], fields: set[str]) -> None:
    for name in body:
        if name not in fields:
            raise ParamError(name[:40], f"unknown field {name[:40]!r}")
