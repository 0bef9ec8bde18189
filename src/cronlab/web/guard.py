"""What every cronlab web server does to be safe to run (the lab's and the console's rules).

Bound to loopback with no token configured, state-changing endpoints are open to this machine
only, and the Host header must be a loopback name (no DNS rebinding); otherwise they need the
token (``X-Cronlab-Token`` header or ``Authorization: Bearer``). Token or not, a
state-changing request must be ``application/json`` (which a page elsewhere cannot send
without CORS, which cronlab never grants), must not say it comes from another site
(``Origin``, ``Sec-Fetch-Site``), and its body is at most ``MAX_BODY`` bytes. Every response
carries the security headers; pages get a CSP of ``'self'``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cronlab.exceptions import ConfigError, ConflictError, NotFoundError, ParamError
from cronlab.http_rules import API_CSP, SECURITY_HEADERS, bearer, loopback_hosts, token_matches
from cronlab.http_rules import is_loopback as is_loopback  # (the lab's and console's configs)

MAX_BODY = 64 * 1024
Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """Where a server listens and the token that unlocks it off loopback (the lab's and the
    console's configurations add their own fields and name themselves)."""

    NAME: ClassVar[str] = "server"  # in messages: "this lab", "to expose the console"
    LOCKED: ClassVar[str] = "this server's API needs its token"  # why a request is refused

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None

    def __post_init__(self) -> None:
        if not self.loopback and not self.token:
            raise ConfigError(
                f"--host {self.host} is not loopback: give --token to expose the {self.NAME}"
            )

    @property
    def loopback(self) -> bool:
        """True when only this machine can connect."""
        return is_loopback(self.host)


def host_guard(host: str) -> list[Middleware]:
    """The middleware of a server bound to ``host``: on loopback, only loopback Host headers
    (127.0.0.2 is loopback too); then the security headers."""
    middleware = []
    if is_loopback(host):
        hosts = loopback_hosts(host)
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    middleware.append(Middleware(SecurityHeaders))
    return middleware


def token_ok(token: str | None, loopback: bool, request: Request) -> bool:
    """Loopback with no token configured, or the right token on the request."""
    if token is None:
        return loopback
    given = request.headers.get("x-cronlab-token", "")
    given = given or bearer(request.headers.get("authorization", ""))
    return token_matches(given, token)


PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
    "style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "Cache-Control": "no-store",
}


def cross_site(request: Request, server: str = "this lab") -> str | None:
    """Why a state-changing request is refused as coming from another site, or None (the
    message names the ``server``). A browser says where a request comes from
    (``Sec-Fetch-Site``, ``Origin``); a client that says nothing (curl, a script) is not a
    browser page and passes on to the token rule."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"cross-site request refused (Sec-Fetch-Site: {site[:40]})"
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin != own:
        return f"cross-site request refused (Origin {origin[:80]!r} is not {server})"
    return None


def guarded(
    cfg: ServerConfig, handler: Handler, *, write: bool, field: str, fallback: str
) -> Handler:
    """``handler`` behind the rules: the token rule for every request; for a ``write`` also
    the cross-site rule (first) and the JSON rule; the engine's errors as 404 / 409 JSON about
    ``field``, and 422 about the error's own field (``fallback`` when it names none)."""

    async def wrapped(request: Request) -> Response:
        if write and (refused := cross_site(request, f"this {cfg.NAME}")) is not None:
            return problem(403, refused, "origin")
        if not token_ok(cfg.token, cfg.loopback, request):
            why = f"{cfg.LOCKED}: open the page as /#token=… or send X-Cronlab-Token"
            return problem(403, why, "token")
        if write and (bad := json_request(request)) is not None:
            return problem(bad[0], bad[1], "body")
        try:
            return await handler(request)
        except NotFoundError as exc:
            return problem(404, str(exc), field)
        except ConflictError as exc:
            return problem(409, str(exc), field)
        except ConfigError as exc:
            return problem(422, str(exc), getattr(exc, "field", fallback))

    return wrapped


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


def problem(status: int, message: str, field: str) -> JSONResponse:
    """The API's error body: ``{"error": message, "field": name}`` (text from the request may
    hold lone surrogates, which UTF-8 cannot encode: they become U+FFFD)."""
    body = {"error": _utf8(message), "field": _utf8(field)}
    return JSONResponse(body, status_code=status)


def _utf8(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


async def read_body(request: Request) -> dict[str, Any]:
    """The JSON object a request carries; reads at most ``MAX_BODY`` bytes (a lying
    Content-Length is cut off), and anything but a JSON object is a ParamError (422)."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise ParamError("body", f"request body larger than {MAX_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, too deep, too many digits
        raise ParamError("body", "request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise ParamError("body", "request body must be a JSON object")
    return data
