"""The ``cronlab`` command. User mistakes end as one line on stderr and exit code 2."""

from __future__ import annotations

import sys

import click

from cronlab.exceptions import CronlabError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="cronlab")
def cli() -> None:
    """cronlab: distributed cron without duplicated or lost triggers, and the lab that shows why."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn every user mistake into one line and exit 2."""
    try:
        cli.main(args=argv, prog_name="cronlab", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.UsageError as exc:
        return _fail(exc.format_message())
    except click.ClickException as exc:
        return _fail(exc.format_message())
    except CronlabError as exc:
        return _fail(str(exc))
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("cronlab: interrupted", err=True)
        return 130
    return 0


def _fail(message: str) -> int:
    line = " ".join(message.split())
    click.echo(f"cronlab: error: {line}", err=True)
    return 2


def _register() -> None:
    from cronlab.cli import chaos, enqueue, invoices, lab, observe, processes, schedule, simulate

    for module in (simulate, lab, processes, invoices, observe, chaos, schedule, enqueue):
        module.register(cli)


_register()

if __name__ == "__main__":
    sys.exit(main())
