"""``cronlab lab``: serve *Cron at Scale: Leader Election & Worker Dispatch* in the browser."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import webbrowser

import click

from cronlab.exceptions import ConfigError
from cronlab.web.app import LabConfig, create_app


@click.command("lab")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--token",
    envvar="CRONLAB_LAB_TOKEN",
    help="Required off loopback: unlocks live mode and chaos (header X-Cronlab-Token); or "
    "CRONLAB_LAB_TOKEN (keeps it out of ps).",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
def lab_cmd(host: str, port: int, token: str | None, no_open: bool) -> None:
    """Cron at Scale: Leader Election & Worker Dispatch, at http://HOST:PORT/."""
    import uvicorn

    config = LabConfig(host=host, port=port, token=token)
    _check_port(host, port)
    url = f"http://{_url_host(host)}:{port}/"
    click.echo(f"cronlab lab: {url}  (Ctrl-C to stop)")
    if not no_open and _has_display():
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning")


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


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _has_display() -> bool:
    # A headless server has no browser to open; webbrowser would fall back to a text browser.
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
