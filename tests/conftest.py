"""The suite's long searches start once the tests are chosen and run beside the rest
(``beside.py``)."""

from __future__ import annotations

import faulthandler
from collections.abc import Iterator

import pytest

import beside


def _name(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("beside")
    return None if mark is None else str(mark.args[0])


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect have chosen
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``beside`` tests go last, in the order their commands run."""
    order = list(beside.COMMANDS)
    marked = [i for i in items if _name(i) is not None]
    marked.sort(key=lambda i: order.index(str(_name(i))))
    for item in marked:  # they wait for their commands, which end within BUDGET_S
        item.add_marker(pytest.mark.timeout(beside.BUDGET_S + 2 * beside.GRACE_S))
    items[:] = [i for i in items if _name(i) is None] + marked


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the commands of the ``beside`` tests that will run."""
    if not session.config.option.collectonly:
        beside.start([n for i in session.items if (n := _name(i)) is not None])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    beside.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A beside test's long wait is not a hang: no stack dump at ``faulthandler_timeout``
    (its ``timeout`` mark, BUDGET_S, still ends it)."""
    if _name(item) is not None:
        faulthandler.cancel_dump_traceback_later()
    return (yield)
