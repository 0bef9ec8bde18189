"""``cronlab lab``: serve *Cron at Scale: Leader Election & Worker Dispatch* in the browser."""

from __future__ import annotations

import click

from cronlab.cli.serving import serve, server_options


@click.command("lab")
@server_options(
    8000,
    "CRONLAB_LAB_TOKEN",
    "Required off loopback: unlocks live mode and chaos (header X-Cronlab-Token); or "
    "CRONLAB_LAB_TOKEN (keeps it out of ps).",
)
def lab_cmd(host: str, port: int, token: str | None, no_open: bool) -> None:
    """Cron at Scale: Leader Election & Worker Dispatch, at http://HOST:PORT/."""
    from cronlab.web.app import LabConfig, create_app  # (the lab extra: --help needs none)

    config = LabConfig(host=host, port=port, token=token)
    serve("lab", lambda: create_app(config), host, port, no_open)
