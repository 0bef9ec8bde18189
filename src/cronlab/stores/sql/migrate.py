"""Numbered migrations, the same numbers on every dialect, recorded in ``cronlab_schema``.

A store is refused, with nothing written, when it is a database that is not ours (it has
tables and no ``cronlab_schema``), or was migrated by a newer cronlab. A store of cronlab 0.1
is taken over: the baseline ``001`` squashes its migrations. It is one only if it says so
unambiguously (``is_old_store``): a ``schema_version(version, name)`` table alone is what
many programs keep. A read-only opening never migrates (nor takes over) a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cronlab.exceptions import ConfigError
from cronlab.stores.sql.dialect import Conn, Dialect, sql_files

TABLE = "cronlab_schema"
OLD_TABLE = "schema_version"


@dataclass(frozen=True, kw_only=True)
class Migration:
    """A numbered migration file; ``replaces`` names the older files it squashes."""

    version: int
    name: str
    script: str
    replaces: tuple[str, ...] = ()


def migrations(files: Mapping[str, str], shared: Mapping[str, str]) -> list[Migration]:
    """The numbered files in order: each its part in ``shared/`` (the SQL both dialects take
    as it is), then the dialect's own, either of which may be absent."""
    found = []
    for name in sorted(files.keys() | shared.keys()):
        if name[:3].isdigit():
            script = files.get(name, "")
            first = script.splitlines()[0] if script else ""
            old = tuple(first.removeprefix("-- replaces:").split()) if "replaces:" in first else ()
            full = shared.get(name, "") + "\n" + script
            found.append(Migration(version=int(name[:3]), name=name, script=full, replaces=old))
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
        raise ConfigError(_not_migrated(d, applied, missing))
    d.transaction(lambda c: _apply(d, c, steps, create))


def _not_migrated(d: Dialect, applied: set[int], missing: set[int]) -> str:
    numbers = ", ".join(f"{v:03d}" for v in sorted(missing))
    was = f"lacks migration {numbers}" if applied else "is a cronlab 0.1 store"
    return (
        f"store {d.describe()} {was}, older than this cronlab: a read-only command does not "
        "migrate it; run a writing one on it first (cronlab schedule sync, scheduler or "
        "cluster): nothing was written"
    )


def _applied(d: Dialect, c: Conn, steps: Sequence[Migration], create: bool) -> set[int]:
    tables = {r[0] for r in c.execute(d.queries["tables"]).fetchall()}
    if TABLE not in tables:
        if OLD_TABLE in tables and is_old_store(c, tables, steps[0]):
            return set()  # cronlab 0.1: _apply takes it over
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


OLD_TABLES = frozenset({"tasks", "lease", "fence", "queue"})  # 0.1's 001_init.sql created them
OLD_ROWS = 100  # more rows than 0.1 ever had migrations: not its table


def is_old_store(c: Conn, tables: set[str], base: Migration) -> bool:
    """True for a store cronlab 0.1 left: its ``schema_version`` has exactly the columns
    ``(version, name)``, and every row is one of 0.1's migration files under its own number,
    ``001_init.sql`` among them; and 0.1's first tables are there. Anything else is another
    program's table of the same name."""
    if not tables >= OLD_TABLES or not base.replaces:
        return False
    cursor = c.execute(f"SELECT * FROM {OLD_TABLE} LIMIT {OLD_ROWS + 1}")
    columns = [str(col[0]).lower() for col in cursor.description or ()]
    rows = cursor.fetchall()
    if columns != ["version", "name"] or not 0 < len(rows) <= OLD_ROWS:
        return False
    files = {(int(name[:3]), name) for name in base.replaces}
    seen = {(v, n) for v, n in rows if isinstance(v, int) and isinstance(n, str)}
    return len(seen) == len(rows) and seen <= files and (1, base.replaces[0]) in seen


def _apply(d: Dialect, c: Conn, steps: Sequence[Migration], create: bool) -> None:
    c.execute(d.queries["migrate_lock"])
    applied = _applied(d, c, steps, create)
    tables = {r[0] for r in c.execute(d.queries["tables"]).fetchall()}
    if TABLE not in tables:
        c.execute(f"CREATE TABLE {TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        if OLD_TABLE in tables:  # (_applied said it is 0.1's; an app's own one stays)
            applied = _take_over(d, c, steps[0])
    for m in steps:
        if m.version not in applied:
            d.run_script(c, m.script)
            _record(c, m)


def _take_over(d: Dialect, c: Conn, base: Migration) -> set[int]:
    """A cronlab 0.1 store: the baseline squashes its migrations; a store that had not applied
    all of them must finish them under 0.1 first."""
    old = {r[0] for r in c.execute(f"SELECT name FROM {OLD_TABLE}").fetchall()}
    missing = sorted(set(base.replaces) - old)
    if missing:
        raise ConfigError(
            f"store {d.describe()} is at an older cronlab schema (missing {', '.join(missing)}): "
            "start cronlab 0.1 on it once to finish its migrations, then this release"
        )
    _record(c, base)
    c.execute(f"DROP TABLE {OLD_TABLE}")
    return {base.version}


def _record(c: Conn, m: Migration) -> None:
    # The version and file name come from the package's own files, never from input.
    c.execute(f"INSERT INTO {TABLE} (version, name) VALUES ({m.version}, '{m.name}')")
