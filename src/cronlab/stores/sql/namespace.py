"""Where cronlab keeps its tables in a database it shares with an application.

The store's SQL (its migrations and named queries, and the few statements written in Python)
names cronlab's objects bare — ``tasks``, ``queue``, ``cronlab_list_pending`` — and is
qualified once, when a store is opened, to where this store keeps them:

* PostgreSQL: a schema of cronlab's own (``cronlab`` unless the URL says ``?schema=NAME``):
  ``tasks`` → ``cronlab.tasks``. The application's search path is left as it was, so a
  handler's SQL in ``ctx.tx`` sees the application's tables (one may be named ``tasks``) as
  before; index and trigger names live in the schema or on the table and stay as they are.
* SQLite: a prefix in the application's file: ``tasks`` → ``cronlab_tasks``, indexes too (an
  index's name is the whole file's). A prefix rather than an attached database because a
  transaction over an attached database is not atomic across files in WAL mode, and a task's
  writes must commit with its ack.

Only cronlab's own names change (those the migrations create, listed in ``OBJECTS``), and
only where they stand as names: never inside a string literal, a quoted identifier or a
comment, after a ``.`` or a ``:`` (a column or a parameter of that name), or after
``RENAME TO`` on PostgreSQL (which takes a bare name). Dollar-quoted bodies (a trigger
function's) are qualified too: they are cronlab's own SQL.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cronlab.exceptions import ConfigError
from cronlab.stores.sql import placeholders
from cronlab.stores.sql.dialect import sql_files

SCHEMA_DEFAULT = "cronlab"
PREFIX = "cronlab_"
VERSIONS = "cronlab_schema"
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_CREATED = re.compile(
    r"\bCREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX|FUNCTION|TRIGGER)\s+(?:IF NOT EXISTS\s+)?(\w+)",
    re.IGNORECASE,
)
_RENAME_TO = re.compile(r"RENAME\s+TO\s+$", re.IGNORECASE)


@functools.cache
def objects() -> dict[str, str]:
    """cronlab's own objects, by bare name → kind (``table``, ``index``, ``function``,
    ``trigger``): every one a migration of either dialect creates, and ``cronlab_schema``."""
    found = {VERSIONS: "table"}
    for folder in ("shared", "sqlite", "postgresql"):
        for name, text in sql_files(folder).items():
            if name[:3].isdigit():
                for kind, bare in _CREATED.findall(text):
                    found.setdefault(bare, kind.lower())
    return found


def tables() -> list[str]:
    """cronlab's own tables, bare, in name order."""
    return sorted(n for n, kind in objects().items() if kind == "table")


@dataclass(frozen=True)
class Namespace:
    """Where one store keeps cronlab's objects: a PostgreSQL ``schema`` or a SQLite
    ``prefix``."""

    kind: Literal["schema", "prefix"]
    name: str

    def qualified(self, bare: str) -> str:
        """One of cronlab's object names as this store's SQL must write it."""
        if self.kind == "schema":
            return f"{self.name}.{bare}"
        return bare if bare.startswith(PREFIX) else PREFIX + bare

    def sql(self, text: str) -> str:
        """``text`` with each of cronlab's own names (``OBJECTS``) qualified (the module's
        docstring says where a name is left alone)."""
        return _qualified(self, text)

    def queries(self, named: Mapping[str, str]) -> dict[str, str]:
        """Each named query qualified."""
        return {name: self.sql(text) for name, text in named.items()}

    def where(self) -> str:
        """Where the objects are, for messages: ``schema cronlab`` or ``tables cronlab_*``."""
        return f"schema {self.name}" if self.kind == "schema" else f"tables {PREFIX}*"


def postgres_schema(name: str | None) -> Namespace:
    """The PostgreSQL namespace of a URL's ``schema`` parameter (None: the default); a name
    that is not a plain lower-case identifier is a ConfigError naming it."""
    name = SCHEMA_DEFAULT if name is None else name
    if not SCHEMA_NAME.fullmatch(name) or name.startswith("pg_"):
        raise ConfigError(
            f"schema={name[:80]!r} in the store URL is not a plain schema name: lower-case "
            "letters, digits and _, not starting with a digit or pg_, at most 63 characters"
        )
    return Namespace("schema", name)


SQLITE = Namespace("prefix", PREFIX)


@functools.lru_cache(maxsize=4096)
def _qualified(space: Namespace, text: str) -> str:
    kinds = objects()
    out: list[str] = []
    i = start = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "$" and (m := placeholders.TAG.match(text, i)) and _starts_token(text, i):
            end = text.find(m.group(0), m.end())
            end = n if end < 0 else end
            out.append(text[start : m.end()] + _qualified(space, text[m.end() : end]))
            i = start = end
            continue
        skip = placeholders._quoted_end(text, i)
        if skip is not None:
            i = skip
            continue
        m = _NAME.match(text, i) if _starts_token(text, i) else None
        if m is None:
            i += 1
            continue
        bare = m.group(0)
        if bare in kinds and _stands_as_name(space, text, i, kinds[bare]):
            out.append(text[start:i] + space.qualified(bare))
            start = m.end()
        i = m.end()
    out.append(text[start:])
    return "".join(out)


def _starts_token(text: str, i: int) -> bool:
    return i == 0 or text[i - 1] not in placeholders.IDENT_CHARS


def _stands_as_name(space: Namespace, text: str, i: int, kind: str) -> bool:
    """False for a column or parameter of the same name, for what PostgreSQL never
    qualifies (an index's or trigger's name: they live in the table's schema), and for
    ``RENAME TO``'s bare new name on PostgreSQL."""
    if i > 0 and (text[i - 1] in ".:" or text[i - 2 : i] == "%("):
        return False
    if space.kind == "schema":
        return kind in ("table", "function") and not _RENAME_TO.search(text, 0, i)
    return True
