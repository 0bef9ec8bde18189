"""How the commands declare their options and print their listings (no imports beyond click
and the standard library: ``cronlab simulate`` uses these without loading the engine)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

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
