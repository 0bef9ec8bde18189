"""The ``cronlab`` command. User mistakes end as one line on stderr and exit code 2."""

from __future__ import annotations

import importlib
import sys

import click

from cronlab.exceptions import BackendUnavailable, ConfigError, CronlabError
from cronlab.runtime import proc, reports
from cronlab.urls import redact, redact_text

# command → "module:attribute"; a module is imported only when its command runs, so a SQLite
# user's ``cronlab worker`` loads no web server and no numpy.
COMMANDS = {
    "simulate": "simulate:simulate_cmd",
    "lab": "lab:lab_cmd",
    "cluster": "processes:cluster_cmd",
    "scheduler": "processes:scheduler_cmd",
    "worker": "processes:worker_cmd",
    "run": "processes:run_cmd",
    "invoices": "invoices:invoices",
    "status": "observe:status_cmd",
    "report": "observe:report_cmd",
    "check": "check:check_cmd",
    "chaos": "chaos:chaos_cmd",
    "schedule": "schedule:schedule_group",
    "enqueue": "enqueue:enqueue_cmd",
    "verify": "verify:verify_cmd",
    "runs": "runs:runs_cmd",
    "console": "console:console_cmd",
    "task": "task:task_group",
}
# A library a command needs → the extra that installs it.
EXTRAS = {
    "numpy": "lab",
    "starlette": "lab",
    "uvicorn": "lab",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "redis": "redis",
    "etcd3gw": "etcd",
    "requests": "etcd",
    "prometheus_client": "metrics",
}
# A command whose web server is its own extra's (the console runs without the lab's numpy).
COMMAND_EXTRAS = {"console": {"starlette": "console", "uvicorn": "console"}}


class LazyGroup(click.Group):
    """A group whose commands import their module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module, _, attr = spec.partition(":")
        try:
            found = getattr(importlib.import_module(f"cronlab.cli.{module}"), attr)
        except ModuleNotFoundError as exc:
            top = (exc.name or "").partition(".")[0]
            if top not in EXTRAS:
                raise
            extra = COMMAND_EXTRAS.get(cmd_name, {}).get(top, EXTRAS[top])
            raise ConfigError(
                f"cronlab {cmd_name} needs {top}: pip install 'cronlab[{extra}]'"
            ) from None
        assert isinstance(found, click.Command)
        return found

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``: one whose extra is not installed is listed with
        the line that installs it, instead of failing the whole help."""
        rows = []
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        for name in self.list_commands(ctx):
            try:
                cmd = self.get_command(ctx, name)
            except ConfigError as missing:
                rows.append((name, str(missing).removeprefix(f"cronlab {name} ")))
                continue
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="cronlab")
def cli() -> None:
    """cronlab: distributed cron without duplicated or lost triggers, and the lab that shows why."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn every user mistake into one line and exit 2."""
    args = sys.argv[1:] if argv is None else argv
    if argv is None:
        proc.die_with_parent()  # (a cluster's child: before anything else)
    if bad := next((a for a in args if not _utf8(a)), None):
        return _fail(f"argument {bad[:40]!r} is not UTF-8 text (names, keys and URLs must be)")
    try:
        cli.main(args=args, prog_name="cronlab", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.UsageError as exc:
        return _fail(exc.format_message())
    except click.ClickException as exc:
        return _fail(exc.format_message())
    except BackendUnavailable as exc:
        return _fail(str(exc), "unavailable")
    except CronlabError as exc:
        return _fail(str(exc))
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except ModuleNotFoundError as exc:  # an extra a command imports as it runs
        if (missing := _extra(args, exc)) is None:
            raise
        return _fail(missing)
    except (click.Abort, KeyboardInterrupt):
        click.echo("cronlab: interrupted", err=True)
        return 130
    except Exception as exc:
        if not _from_the_store(exc):
            raise
        from cronlab.stores import errors

        return _fail(redact(errors.explain(exc)))
    return 0


def _extra(args: list[str], exc: ModuleNotFoundError) -> str | None:
    """The line naming the extra that installs what ``exc`` found missing, or None."""
    top = (exc.name or "").partition(".")[0]
    if top not in EXTRAS:
        return None
    command = next((a for a in args if not a.startswith("-")), "")
    extra = COMMAND_EXTRAS.get(command, {}).get(top, EXTRAS[top])
    return f"cronlab {command} needs {top}: pip install 'cronlab[{extra}]'"


def _from_the_store(exc: Exception) -> bool:
    """An error the database raised (a table missing, a page corrupted): the store's state,
    not a bug to show a traceback for."""
    return type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg")


def _utf8(text: str) -> bool:
    """False for an argument holding bytes that are not UTF-8 (Python keeps them as lone
    surrogates, which no store, log or terminal can take)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fail(message: str, kind: reports.Kind = "config") -> int:
    """The one error line and exit 2 (a cluster's child: the line goes to its cluster)."""
    line = redact_text(" ".join(message.split()))  # (click's messages quote what was typed)
    if not reports.send(kind, line):
        click.echo(f"cronlab: error: {line}", err=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
