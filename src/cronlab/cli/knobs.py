"""How the commands declare their options and print their listings (no imports beyond click
and the standard library: ``cronlab simulate`` uses these without loading the engine)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def optional(name: str, metavar: str, help: str) -> Callable[[F], F]:
    """A text option with no default (None when not given)."""
    return click.option(name, default=None, metavar=metavar, help=help)


def knob(
    flag: str,
    kind: click.ParamType[Any],
    default: object,
    help: str | None = None,
    *,
    metavar: str | None = None,
    dest: str | None = None,
) -> Callable[[F], F]:
    """An option shown with its default: the numeric, choice and delay knobs (``dest``: the
    parameter's name, when it is not the flag's)."""
    names = [flag] if dest is None else [flag, dest]
    return click.option(
        *names, type=kind, default=default, show_default=True, help=help, metavar=metavar
    )


def repeatable(flag: str, dest: str, metavar: str, help: str) -> Callable[[F], F]:
    """An option given any number of times, collected as a tuple in ``dest``."""
    return click.option(flag, dest, multiple=True, metavar=metavar, help=f"{help} Repeatable.")


class Finite(click.FloatRange):
    """A float within [min, max] that is a number: click's range lets ``nan`` through (every
    comparison with it is false) and ``inf`` when there is no max."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def untyped_secret(value: str | None, ctx: click.Context, param: click.Parameter) -> None:
    """ConfigError for a URL holding a password typed on the command line: every user of the
    host reads a process's argv (``ps``), and whatever records each exec keeps it, so a
    title rewritten after start-up would still have shown it. Its variable carries it
    instead (``CRONLAB_STORE``...), readable by this user alone."""
    from cronlab import urls
    from cronlab.exceptions import ConfigError

    source = ctx.get_parameter_source(param.name or "")
    if not value or source is not ParameterSource.COMMANDLINE or urls.redact(value) == value:
        return
    variable = param.envvar if isinstance(param.envvar, str) else "CRONLAB_STORE"
    raise ConfigError(
        f"{param.opts[0]} {urls.redact(value)!r}: a password typed on the command line is "
        f"readable by every user of this host (ps); set {variable} instead"
    )


def no_typed_secret(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback for a URL option: no password typed on the command line."""
    untyped_secret(value, ctx, param)
    return value


def echo_list(
    items: Sequence[T],
    what: str,
    as_json: bool,
    to_json: Callable[[T], Any],
    line: Callable[[T], str],
) -> None:
    """A listing: ``{what: [...]}`` with ``--json``, else a line an item ("no WHAT" for none)."""
    if as_json:
        click.echo(json.dumps({what: [to_json(i) for i in items]}))
    else:
        click.echo("\n".join(map(line, items)) if items else f"no {what}")


def echo_fields(data: dict[str, Any], as_json: bool) -> None:
    """One record: its JSON with ``--json``, else a ``key: value`` line a field (the ``*_ms``
    ones, which the ISO fields beside them say, left out)."""
    if as_json:
        click.echo(json.dumps(data))
    else:
        click.echo("\n".join(f"{k}: {v}" for k, v in data.items() if not k.endswith("_ms")))


def tz_option(help: str) -> Callable[[F], F]:
    """``--tz``, an IANA zone checked at once (``core/zones.check``)."""
    from cronlab.core import zones

    return click.option(
        "--tz",
        default="UTC",
        show_default=True,
        callback=lambda ctx, param, value: zones.check(value),
        help=help,
    )
