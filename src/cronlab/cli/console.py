"""``cronlab console``: the operator's page on a store (schedules, runs, processes, alerts,
and pause / resume / trigger / backfill), at http://HOST:PORT/."""

from __future__ import annotations

import threading
import webbrowser

import click

from cronlab.cli.lab import _check_port, _has_display, _url_host
from cronlab.cli.options import STORE, open_store
from cronlab.web.console import ConsoleConfig, create_console


@click.command("console")
@STORE
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8100, show_default=True)
@click.option(
    "--token",
    envvar="CRONLAB_CONSOLE_TOKEN",
    help="Required off loopback: every API request needs it (header X-Cronlab-Token); or "
    "CRONLAB_CONSOLE_TOKEN.",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
def console_cmd(store_url: str, host: str, port: int, token: str | None, no_open: bool) -> None:
    """The console of the store at --store, at http://HOST:PORT/."""
    import uvicorn

    config = ConsoleConfig(store_url=store_url, host=host, port=port, token=token)
    open_store(store_url, create=False).close()  # a missing or foreign store: one line, now
    _check_port(host, port)
    url = f"http://{_url_host(host)}:{port}/"
    click.echo(f"cronlab console: {url}  (Ctrl-C to stop)")
    if not no_open and _has_display():
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(create_console(config), host=host, port=port, log_level="warning")
