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
import hmac
import ipaddress
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
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

from cronlab.core import params
from cronlab.core.model import simulate
from cronlab.exceptions import ConfigError, ConflictError, NotFoundError
from cronlab.sim import lab as labsim
from cronlab.web import metrics, openapi, query
from cronlab.web.live import CHAOS, Live, LiveConfig

STATIC = Path(__file__).parent / "static"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
MAX_BODY = 64 * 1024
Handler = Callable[[Request], Awaitable[Response]]
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
API_CSP = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")


REALSIM_CACHE = 64  # answers of /api/realsim kept


@dataclass(frozen=True, kw_only=True)
class LabConfig:
    """Where the lab listens and the token that unlocks live endpoints off loopback."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None

    def __post_init__(self) -> None:
        if not self.loopback and not self.token:
            raise ConfigError(f"--host {self.host} is not loopback: give --token to expose the lab")

    @property
    def loopback(self) -> bool:
        """True when only this machine can connect."""
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def create_app(config: LabConfig | None = None, live: Live | None = None) -> Starlette:
    """The lab app; ``live`` is injectable so tests can point it at another engine command."""
    cfg = config or LabConfig()
    lab = _Lab(cfg, live or Live())

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(lab.live.close)

    middleware = []
    if cfg.loopback:
        hosts = [*LOOPBACK_NAMES, cfg.host, f"[{cfg.host}]"]  # 127.0.0.2 is loopback too
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    middleware.append(Middleware(SecurityHeaders))
    app = Starlette(routes=lab.routes(), middleware=middleware, lifespan=lifespan)
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
        return FileResponse(STATIC / "index.html", headers=_PAGE_HEADERS)

    async def simulate(self, request: Request) -> Response:
        try:
            parsed = query.parse(list(request.query_params.multi_items()))
        except query.ParamError as exc:
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
        except query.ParamError as exc:
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
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def live_snapshot(self, _: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(self.live.snapshot))

    async def live_start(self, request: Request) -> Response:
        body = await _body(request)
        try:
            cfg = live_config(body)
        except query.ParamError as exc:
            return problem(422, str(exc), exc.field)
        return JSONResponse(await asyncio.to_thread(self.live.start, cfg), status_code=201)

    async def live_stop(self, request: Request) -> Response:
        _known(await _body(request), set())
        return JSONResponse(await asyncio.to_thread(self.live.stop))

    async def live_chaos(self, request: Request) -> Response:
        action, seconds, mid = chaos_request(await _body(request))
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
        """Wrap a live handler: the token rule, and engine errors as 404/409/422 JSON."""

        async def wrapped(request: Request) -> Response:
            if (refused := cross_site(request)) is not None:
                return problem(403, refused, "origin")
            if not self.allowed(request):
                why = "live endpoints need the lab's token: open the page as /#token=… "
                return problem(403, why + "or send X-Cronlab-Token", "token")
            if (bad := json_request(request)) is not None:
                return problem(bad[0], bad[1], "body")
            try:
                return await handler(request)
            except ConflictError as exc:
                return problem(409, str(exc), "live")
            except NotFoundError as exc:
                return problem(404, str(exc), "live")
            except ConfigError as exc:
                return problem(422, str(exc), getattr(exc, "field", "live"))

        return wrapped

    def allowed(self, request: Request) -> bool:
        """Loopback with no token configured, or the right token on the request."""
        if self.cfg.token is None:
            return self.cfg.loopback
        given = request.headers.get("x-cronlab-token", "")
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            given = given or bearer[7:]
        return hmac.compare_digest(given.encode(), self.cfg.token.encode())


_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
    "style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "Cache-Control": "no-store",
}


def cross_site(request: Request) -> str | None:
    """Why a state-changing request is refused as coming from another site, or None. A browser
    says where a request comes from (``Sec-Fetch-Site``, ``Origin``); a client that says
    nothing (curl, a script) is not a browser page and passes on to the token rule."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"cross-site request refused (Sec-Fetch-Site: {site[:40]})"
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin != own:
        return f"cross-site request refused (Origin {origin[:80]!r} is not this lab)"
    return None


def json_request(request: Request) -> tuple[int, str] | None:
    """(status, why) when a state-changing request is not JSON or is too large, or None."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return 415, "send Content-Type: application/json"
    length = request.headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_BODY:
        return 413, f"request body larger than {MAX_BODY} bytes"
    return None


class SecurityHeaders:
    """ASGI middleware: the security headers on every response (the page sets its own CSP;
    everything else gets one that allows nothing to load or frame it)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [h for h in SECURITY_HEADERS if h[0] not in names]
                if b"content-security-policy" not in names:
                    headers.append(API_CSP)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


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
LIVE_FIELDS |= {"fencing"}
LIVE_WORDS = ("election", "timers", "fencing")  # the fields that are strings


def live_config(body: dict[str, Any]) -> LiveConfig:
    """LiveConfig from the page's JSON body; ParamError names a bad or unknown field."""
    _known(body, LIVE_FIELDS)
    knobs: dict[str, Any] = {}
    for name, value in body.items():
        key = "lease_ttl" if name == "ttl" else name
        if name in LIVE_WORDS:
            if not isinstance(value, str):
                raise query.ParamError(name, f"{name} must be a string, got {str(value)[:40]}")
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
        raise query.ParamError(
            "mid_dispatch", f"mid_dispatch must be true or false, got {str(mid)[:40]}"
        )
    seconds = whole("for", body.get("for", 15))
    if not 1 <= seconds <= 600:
        raise query.ParamError("for", f"for must be 1..600 seconds, got {seconds}")
    action = body.get("action")
    if action not in CHAOS:
        why = f"unknown action {str(action)[:40]!r} ({', '.join(CHAOS)})"
        raise query.ParamError("action", why)
    return action, seconds, mid


def whole(name: str, value: object) -> int:
    """A JSON number that is a whole number (``215`` or ``215.0``) as an int; ParamError for
    anything else, ``true`` included."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise query.ParamError(name, f"{name} must be a whole number, got {str(value)[:40]}")
    return value


def _known(body: dict[str, Any], fields: set[str]) -> None:
    for name in body:
        if name not in fields:
            raise query.ParamError(name[:40], f"unknown field {name[:40]!r}")


def problem(status: int, message: str, field: str) -> JSONResponse:
    """The API's error body: ``{"error": message, "field": name}`` (text from the request may
    hold lone surrogates, which UTF-8 cannot encode: they become U+FFFD)."""
    body = {"error": _utf8(message), "field": _utf8(field)}
    return JSONResponse(body, status_code=status)


def _utf8(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object a request carries; reads at most ``MAX_BODY`` bytes (a lying
    Content-Length is cut off), and anything but a JSON object is a ParamError (422)."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise query.ParamError("body", f"request body larger than {MAX_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, too deep, too many digits
        raise query.ParamError("body", "request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise query.ParamError("body", "request body must be a JSON object")
    return data
