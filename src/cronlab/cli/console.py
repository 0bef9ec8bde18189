"""``cronlab console``: the operator's page on a store (schedules, runs, processes, alerts,
and pause / resume / trigger / backfill), at http://HOST:PORT/."""

from __future__ import annotations

import click

from cronlab import distributed
from cronlab.cli.options import STORE
from cronlab.cli.serving import serve, server_options


@click.command("console")
@STORE
@server_options(
    8100,
    "CRONLAB_CONSOLE_TOKEN",
    "Required off loopback: every API request needs it (header X-Cronlab-Token); or "
    "CRONLAB_CONSOLE_TOKEN.",
)
def console_cmd(store_url: str, host: str, port: int, token: str | None, no_open: bool) -> None:
    """The console of the store at --store, at http://HOST:PORT/."""
    from cronlab.web.console import ConsoleConfig, create_console  # (--help needs no extra)

    config = ConsoleConfig(store_url=store_url, host=host, port=port, token=token)
    distributed.store_for(
        store_url, create=False
    ).close()  # a missing or foreign store: one line, now
    serve("console", lambda: create_console(config), host, port, no_open)
