"""Which time zones a schedule may be in: one that means the same on every host.

``zoneinfo`` also finds names whose meaning is the machine's, not the IANA database's:
``localtime`` (the host's own zone), ``posixrules`` (the host's default DST rules), and
whatever else the host's zoneinfo directory holds (``right/…`` counts leap seconds,
``posix/…`` exists only where the OS ships it). A schedule stored in one of those fires at
another instant on each replica, so a zone must be one the ``tzdata`` package names (the
same list on every host running this cronlab), and not ``Factory`` (tzdata's "no zone set").
"""

from __future__ import annotations

import functools
from importlib import resources

from cronlab.core import cron
from cronlab.exceptions import ConfigError

HOST = frozenset({"localtime", "posixrules"})
UNSET = "Factory"
EXAMPLE = "name an IANA zone like 'Europe/Berlin' or 'UTC'"


@functools.cache
def iana() -> frozenset[str]:
    """The zone names of the ``tzdata`` package (a dependency of cronlab)."""
    return frozenset(resources.files("tzdata").joinpath("zones").read_text().split())


def check(name: str) -> str:
    """``name`` if it is a zone every host reads alike; ConfigError naming it otherwise."""
    cron.zone(name)  # unknown or malformed: its own message
    if name in HOST:
        raise ConfigError(
            f"time zone {name!r} depends on the host (it is what that machine is set to): {EXAMPLE}"
        )
    if name == UNSET:
        raise ConfigError(f"time zone {name!r} is tzdata's 'no zone set': {EXAMPLE}")
    if name not in iana():
        raise ConfigError(
            f"time zone {name!r} is not in the IANA database cronlab ships (tzdata): another "
            f"host may lack it or read it otherwise; {EXAMPLE}"
        )
    return name
