"""What ``cronlab lab`` and ``cronlab console`` share: the options of a page server
(``--host``, ``--port``, ``--token``, ``--no-open``) and serving it with uvicorn."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import webbrowser
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cronlab.exceptions import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def server_options(port: int, token_env: str, token_help: str) -> Callable[[F], F]:
    """The page server's options: its default ``port``, and ``--token`` (also read from
    ``token_env``) explained by ``token_help``."""
    options = [
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind."),
        click.option("--port", type=click.IntRange(1, 65535), default=port, show_default=True),
        click.option("--token", envvar=token_env, help=token_help),
        click.option("--no-open", is_flag=True, help="Do not open a browser."),
    ]

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def serve(name: str, create: Callable[[], Any], host: str, port: int, no_open: bool) -> None:
    """Serve the app ``create`` makes at ``host:port`` until Ctrl-C, saying where (and opening
    a browser there unless ``no_open`` or headless); a port taken is a one-line error first."""
    import uvicorn

    _check_port(host, port)
    url = f"http://{_url_host(host)}:{port}/"
    click.echo(f"cronlab {name}: {url}  (Ctrl-C to stop)")
    if not no_open and _has_display():
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(create(), host=host, port=port, log_level="warning")


def _check_port(host: str, port: int) -> None:
    """Fail with one line before uvicorn would, when the port is taken or the host unknown."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc})"
            raise ConfigError(f"port {port} on {host} {why}") from None
        except (UnicodeError, TypeError, ValueError) as exc:  # a name IDNA cannot encode
            raise ConfigError(f"--host {host[:80]!r} is not a host name ({exc})") from None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _has_display() -> bool:
    # A headless server has no browser to open; webbrowser would fall back to a text browser.
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
