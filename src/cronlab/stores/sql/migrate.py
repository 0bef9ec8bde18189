"""Numbered migrations, the same numbers on every dialect, recorded in ``cronlab_schema``.

A store is refused, with nothing written, when it is a database that is not ours (it has
tables and no ``cronlab_schema``: a store of cronlab 0.1, whose takeover is retired, is one),
or was migrated by a newer cronlab. A read-only opening never migrates a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cronlab.exceptions import ConfigError
from cronlab.stores.sql.dialect import Conn, Dialect, sql_files

TABLE = "cronlab_schema"


@dataclass(frozen=True, kw_only=True)
class Migration:
    """A numbered migration file."""

    version: int
    name: str
    script: str


def migrations(files: Mapping[str, str], shared: Mapping[str, str]) -> list[Migration]:
    """The numbered files in order: each its part in ``shared/`` (the SQL both dialects take
    as it is), then the dialect's own, either of which may be absent."""
    found = []
    for name in sorted(files.keys() | shared.keys()):
        if name[:3].isdigit():
            script = files.get(name, "")
            full = shared.get(name, "") + "\n" + script
            found.append(Migration(version=int(name[:3]), name=name, script=full))
    return sorted(found, key=lambda m: m.version)


def migrate(d: Dialect, create: bool, *, read_only: bool = False) -> None:
    """Apply what is missing in one transaction (checked first without the write lock, so a
    reader — ``status``, ``report`` — never waits for it). ``read_only``: ConfigError if
    anything is missing (nothing written)."""
    steps = migrations(sql_files(d.name), sql_files("shared"))
    applied = d.read(lambda c: _applied(d, c, steps, create and not read_only))
    missing = {m.version for m in steps} - applied
    if not missing:
        return
    if read_only:
        raise ConfigError(_not_migrated(d, missing))
    d.transaction(lambda c: _apply(d, c, steps, create))


def _not_migrated(d: Dialect, missing: set[int]) -> str:
    numbers = ", ".join(f"{v:03d}" for v in sorted(missing))
    return (
        f"store {d.describe()} lacks migration {numbers}, older than this cronlab: a "
        "read-only command does not migrate it; run a writing one on it first (cronlab "
        "schedule sync, scheduler or cluster): nothing was written"
    )


def _applied(d: Dialect, c: Conn, steps: Sequence[Migration], create: bool) -> set[int]:
    tables = {r[0] for r in c.execute(d.queries["tables"]).fetchall()}
    if TABLE not in tables:
        if tables:
            shown = ", ".join(sorted(tables)[:3])
            raise ConfigError(
                f"{d.describe()} is not a cronlab store: it has other tables ({shown}) "
                f"and no {TABLE}; nothing was written"
            )
        if not create:
            raise ConfigError(f"no cronlab store in {d.describe()} (nothing was written)")
        return set()
    versions = {int(r[0]) for r in c.execute(f"SELECT version FROM {TABLE}").fetchall()}
    newest = max(m.version for m in steps)
    if versions and max(versions) > newest:
        raise ConfigError(
            f"store {d.describe()} is at schema version {max(versions)}, newer than this "
            f"cronlab's {newest}: upgrade cronlab (nothing was written)"
        )
    return versions


def _apply(d: Dialect, c: Conn, steps: Sequence[Migration], create: bool) -> None:
    c.execute(d.queries["migrate_lock"])
    applied = _applied(d, c, steps, create)
    if TABLE not in {r[0] for r in c.execute(d.queries["tables"]).fetchall()}:
        c.execute(f"CREATE TABLE {TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    for m in steps:
        if m.version not in applied:
            d.run_script(c, m.script)
            _record(c, m)


def _record(c: Conn, m: Migration) -> None:
    # The version and file name come from the package's own files, never from input.
    c.execute(f"INSERT INTO {TABLE} (version, name) VALUES ({m.version}, '{m.name}')")
