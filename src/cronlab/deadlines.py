"""A run's timeout: the alarm that interrupts a synchronous run in real time, the guard of the
statement its ``ctx.tx`` has on the server meanwhile, and the judgement of a run that
returned late. The executor arms it (``handlers``); the SQL store guards its statements
with it (``stores/sql/batch.py``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

from cronlab.exceptions import TaskTimeout


class _Alarms:
    """Whether a run's timeout may interrupt it in real time (``SIGALRM``). The deterministic
    simulator turns it off: its processes share the main thread, so a real alarm would strike
    whichever of them runs then, and its runs are judged on its own clock (``check_time``)."""

    real = True


ALARMS = _Alarms()


@contextlib.contextmanager
def deadline(timeout_ms: int | None) -> Iterator[None]:
    """Interrupt a synchronous run at its timeout (``SIGALRM``: in the main thread only;
    elsewhere the run is judged when it returns, by ``check_time``)."""
    main = threading.current_thread() is threading.main_thread()
    if timeout_ms is None or not main or not ALARMS.real:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.setitimer(signal.ITIMER_REAL, timeout_ms / 1000)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _InFlight:
    """The statement a run's ``ctx.tx`` has on the server now (main thread): how to cancel it,
    and whether the run's timeout did."""

    cancel: Callable[[], None] | None = None
    cancelled = False


_IN_FLIGHT = _InFlight()


@contextlib.contextmanager
def statement(cancel: Callable[[], None] | None) -> Iterator[None]:
    """A run's statement on the server: a timeout that strikes meanwhile cancels it there
    (``cancel``) instead of raising inside the driver, which would leave the connection in
    the middle of a query; the statement then fails, and this raises ``TaskTimeout``."""
    _IN_FLIGHT.cancel, _IN_FLIGHT.cancelled = cancel, False
    try:
        yield
    except Exception as exc:
        if _IN_FLIGHT.cancelled:
            raise TaskTimeout("ran past its timeout (its statement was cancelled)") from exc
        raise
    finally:
        _IN_FLIGHT.cancel = None
    if _IN_FLIGHT.cancelled:  # the statement ended before the cancel reached it
        raise TaskTimeout("ran past its timeout")


def _timed_out(signum: int, frame: object) -> None:
    if _IN_FLIGHT.cancel is not None:
        _IN_FLIGHT.cancelled = True
        _IN_FLIGHT.cancel()
        return
    raise TaskTimeout("ran past its timeout")


def check_time(timeout_ms: int | None, took_ms: int) -> None:
    if timeout_ms is not None and took_ms > timeout_ms:
        raise TaskTimeout(f"took {took_ms / 1000:g} s, past its timeout of {timeout_ms / 1000:g} s")
