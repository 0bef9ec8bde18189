"""The metrics port: ``GET /metrics`` under the rules of cronlab's other servers.

Bound to loopback, it answers only a loopback ``Host`` header (a page that rebinds its own name
to 127.0.0.1 cannot read it); bound anywhere else it needs a token, ``CRONLAB_METRICS_TOKEN``
(refused at start without one), which each scrape sends as ``Authorization: Bearer TOKEN``
(Prometheus's ``authorization`` setting) or ``X-Cronlab-Token``. A token set on loopback is
needed there too. Any other path is 404, any other method 405, and every answer carries the
security headers. A WSGI app over Prometheus's own exposition, served from a daemon thread.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from cronlab import http_rules
from cronlab.exceptions import ConfigError

if TYPE_CHECKING:  # (prometheus_client is imported by what serves, not by check())
    from prometheus_client import CollectorRegistry

TOKEN_ENV = "CRONLAB_METRICS_TOKEN"
PATH = "/metrics"
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
HEADERS = [(k.decode(), v.decode()) for k, v in [*http_rules.SECURITY_HEADERS, http_rules.API_CSP]]


def token_from_env() -> str | None:
    """``CRONLAB_METRICS_TOKEN`` (None when unset or empty)."""
    return os.environ.get(TOKEN_ENV) or None


def check(host: str, token: str | None) -> None:
    """ConfigError for a metrics port bound off loopback with no token."""
    if not token and not http_rules.is_loopback(host):
        raise ConfigError(
            f"--metrics-host {host[:80]!r} is not loopback: set {TOKEN_ENV} to expose the "
            "metrics (each scrape then sends it as a bearer token)"
        )


def guarded(registry: CollectorRegistry, host: str, token: str | None) -> App:
    """The WSGI app serving ``registry`` at ``/metrics`` for a server bound to ``host``."""
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app(registry)
    hosts = (
        {h.lower() for h in http_rules.loopback_hosts(host)}
        if http_rules.is_loopback(host)
        else None
    )

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        refused = _refusal(environ, hosts, token)
        if refused is not None:
            status, message, field, extra = refused
            body = json.dumps({"error": message, "field": field}).encode()
            kind = [("Content-Type", "application/json"), *extra]
            start_response(status, [*kind, *HEADERS])
            return [body]

        def with_headers(status: str, headers: list[tuple[str, str]]) -> Any:
            return start_response(status, [*headers, *HEADERS])

        return metrics(environ, with_headers)  # type: ignore[no-any-return]

    return app


def _refusal(
    environ: dict[str, Any], hosts: set[str] | None, token: str | None
) -> tuple[str, str, str, list[tuple[str, str]]] | None:
    """(status, why, field, headers) for a request the rules refuse, or None."""
    if hosts is not None and http_rules.host_name(environ.get("HTTP_HOST", "")) not in hosts:
        return "400 Bad Request", "Host header is not this machine's", "host", []
    if environ.get("PATH_INFO") != PATH:  # (what is not there is no secret: as the lab's)
        return "404 Not Found", f"not found: the metrics are at {PATH}", "path", []
    if environ.get("REQUEST_METHOD") != "GET":
        return "405 Method Not Allowed", "only GET", "method", [("Allow", "GET")]
    if token is not None:
        given = environ.get("HTTP_X_CRONLAB_TOKEN", "") or http_rules.bearer(
            environ.get("HTTP_AUTHORIZATION", "")
        )
        if not http_rules.token_matches(given, token):
            why = f"the metrics need their token ({TOKEN_ENV}) as Authorization: Bearer"
            return "403 Forbidden", why, "token", []
    return None


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # a scrape is not news
        return None


def serve(port: int, host: str, registry: CollectorRegistry, token: str | None) -> None:
    """Serve ``registry`` at http://HOST:PORT/metrics from a daemon thread; a port that is
    taken, or a host off loopback with no token, is a one-line ConfigError."""
    check(host, token)
    app = guarded(registry, host, token)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, address = found[0][0], str(found[0][4][0])
        kind = _Server6 if family == socket.AF_INET6 else _Server
        httpd = make_server(address, port, app, kind, handler_class=_Quiet)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port} on {host}: {exc.strerror or exc}") from None
    threading.Thread(target=httpd.serve_forever, name="cronlab-metrics", daemon=True).start()


def document() -> dict[str, Any]:
    """The metrics port as an OpenAPI document (what the API tests check it against)."""
    error = {
        "description": "refused: {error, field}",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "cronlab metrics", "version": "1"},
        "paths": {
            PATH: {
                "get": {
                    "summary": "Prometheus exposition of the engine's metrics",
                    "parameters": [
                        {
                            "name": "name[]",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "the metrics",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        "400": error,
                        "403": error,
                    },
                }
            }
        },
    }
