"""Numbered migrations, the same numbers on every dialect, recorded in ``cronlab_schema``.

cronlab's tables stand beside the application's (``namespace``): a database with other tables
is a place for a store, and only a real clash is refused, with nothing written — tables named
as cronlab's where it keeps them (``cronlab.tasks``, ``cronlab_tasks``) with no
``cronlab_schema`` beside them. A store written when cronlab's tables stood alone in their
database (bare names, schema version 13 and older) is moved beside, in the same transaction
as its missing migrations (014 records the move). A store migrated by a newer cronlab is
refused. A read-only opening never migrates or moves a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cronlab.exceptions import ConfigError
from cronlab.stores.sql import namespace
from cronlab.stores.sql.dialect import Conn, Dialect, sql_files

TABLE = namespace.VERSIONS
# Bare names that together mark a store no cronlab of today can read (cronlab 0.1's, kept with
# its own ``schema_version``, or a copy of cronlab's tables): refused, never built beside.
LOOKALIKE = frozenset({"tasks", "queue", "lease", "fence"})


@dataclass(frozen=True, kw_only=True)
class Migration:
    """A numbered migration file."""

    version: int
    name: str
    script: str


@dataclass(frozen=True)
class Layout:
    """cronlab's tables found in a database, by bare name: ``ours`` where this store keeps
    them, ``alone`` under their bare names where the connection looks first (a store that
    stood alone kept them there)."""

    ours: frozenset[str]
    alone: frozenset[str]

    @property
    def moving(self) -> bool:
        """A store whose tables stand alone, to move beside."""
        return TABLE in self.alone and "tasks" in self.alone and "tasks" not in self.ours

    @property
    def store(self) -> bool:
        """A store is here (beside, or alone to move)."""
        return self.moving or TABLE in self.ours


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


def layout(d: Dialect, c: Conn) -> Layout:
    """Where cronlab's tables are in ``c``'s database."""
    rows = c.execute(d.queries["tables"], {"schema": d.space.name}).fetchall()
    here = {str(name) for place, name in rows if place == "here"}
    found = here if d.space.kind == "prefix" else {str(n) for p, n in rows if p == "ours"}
    bare = namespace.tables()
    ours = frozenset(b for b in bare if d.space.qualified(b).rpartition(".")[2] in found)
    return Layout(ours=ours, alone=frozenset(b for b in bare if b in here))


def _applied(d: Dialect, c: Conn, steps: Sequence[Migration], create: bool) -> set[int]:
    found = layout(d, c)
    if not found.store:
        if found.ours:
            shown = ", ".join(d.space.qualified(b) for b in sorted(found.ours)[:3])
            raise ConfigError(
                f"{d.describe()} is not a cronlab store: it has tables named as cronlab's "
                f"({shown}) and no {TABLE} beside them; nothing was written"
            )
        if found.alone.issuperset(LOOKALIKE):
            raise ConfigError(
                f"{d.describe()} is not a cronlab store: it has cronlab's table names "
                f"({', '.join(sorted(LOOKALIKE))}) and no {TABLE} (cronlab 0.1's store, or "
                "another program's); nothing was written"
            )
        if not create:
            raise ConfigError(f"no cronlab store in {d.describe()} (nothing was written)")
        return set()
    table = TABLE if found.moving else d.space.qualified(TABLE)
    versions = {int(r[0]) for r in c.execute(f"SELECT version FROM {table}").fetchall()}
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
    found = layout(d, c)
    if found.moving:
        d.move_beside(c, sorted(found.alone))
    elif TABLE not in found.ours:
        d.create_namespace(c)
        c.execute(
            f"CREATE TABLE {d.space.qualified(TABLE)} "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
        )
    for m in steps:
        if m.version not in applied:
            d.run_script(c, d.space.sql(m.script))
            _record(d, c, m)


def _record(d: Dialect, c: Conn, m: Migration) -> None:
    # The version and file name come from the package's own files, never from input.
    table = d.space.qualified(TABLE)
    c.execute(f"INSERT INTO {table} (version, name) VALUES ({m.version}, '{m.name}')")
