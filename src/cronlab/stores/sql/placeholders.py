"""One SQL style for an app's own statements on both stores: ``?`` (with a sequence of values)
and ``:name`` (with a mapping), SQLite's own, are turned into psycopg's ``%s`` and
``%(name)s`` for PostgreSQL. psycopg's own style keeps working: a statement that holds one of
its placeholders is passed as it is.

The statement is read as PostgreSQL reads it, so that only real placeholders change: nothing
inside a string literal (``'…'``, ``E'…'`` with its backslash escapes), a quoted identifier
(``"…"``), a dollar-quoted string (``$$…$$``, ``$tag$…$tag$``) or a comment (``-- …``,
``/* … */``, nested) is touched; ``::`` is a cast, not a name. Every ``%`` of a converted
statement is doubled, as psycopg reads ``%`` in the whole text. A ``?`` with no values given
is left alone (PostgreSQL's ``jsonb ? key`` operator); with values, use ``jsonb_exists``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
NATIVE = ("%s", "%b", "%t", "%(")
IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$")


def for_psycopg(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> str:
    """``sql`` as psycopg takes it with ``params``: converted when it uses ``?`` (and
    ``params`` is a sequence) or ``:name`` (a mapping); unchanged otherwise."""
    if isinstance(params, Mapping):
        return _converted(sql, "named") if params else sql
    return _converted(sql, "positional") if len(params) else sql


@functools.lru_cache(maxsize=512)
def _converted(sql: str, style: str) -> str:
    pieces: list[str] = []
    changed = False
    for kind, text in tokens(sql):
        if kind == "native":
            return sql  # psycopg's own style: as it is
        if kind == "?" and style == "positional":
            pieces.append("%s")
            changed = True
        elif kind == ":name" and style == "named":
            pieces.append(f"%({text[1:]})s")
            changed = True
        else:
            pieces.append(text.replace("%", "%%"))
    return "".join(pieces) if changed else sql


def tokens(sql: str) -> list[tuple[str, str]]:
    """``sql`` cut into ``(kind, text)`` pieces that join back to it: ``?``, ``:name``,
    ``native`` (a psycopg placeholder), and ``text`` (the rest, quoted parts and comments
    included)."""
    out: list[tuple[str, str]] = []
    i, start, n = 0, 0, len(sql)

    def flush(upto: int) -> None:
        if upto > start:
            out.append(("text", sql[start:upto]))

    while i < n:
        ch = sql[i]
        skip = _quoted_end(sql, i)
        if skip is not None:
            i = skip
            continue
        if ch == ":" and sql.startswith("::", i):
            i += 2
            continue
        if ch == ":" and (m := NAME.match(sql, i + 1)) and not _after_ident(sql, i):
            flush(i)
            out.append((":name", sql[i : m.end()]))
            i = start = m.end()
            continue
        if ch == "?":
            flush(i)
            out.append(("?", "?"))
            i = start = i + 1
            continue
        if ch == "%" and sql.startswith(NATIVE, i):
            flush(i)
            out.append(("native", sql[i : i + 2]))
            i = start = i + 2
            continue
        i += 1
    flush(n)
    return out


def _after_ident(sql: str, i: int) -> bool:
    """True when the ``:`` at ``i`` follows a name or a number with no space between
    (``a[1:n]``, ``x:y``): not a placeholder."""
    return i > 0 and sql[i - 1] in IDENT_CHARS


def _quoted_end(sql: str, i: int) -> int | None:
    """Where the quoted part or comment starting at ``i`` ends (just past it), or None."""
    ch = sql[i]
    if ch == "'":
        backslash = i > 0 and sql[i - 1] in "eE" and (i < 2 or sql[i - 2] not in IDENT_CHARS)
        return _string_end(sql, i + 1, "'", backslash)
    if ch == '"':
        return _string_end(sql, i + 1, '"', False)
    if ch == "-" and sql.startswith("--", i):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end + 1
    if ch == "/" and sql.startswith("/*", i):
        return _comment_end(sql, i)
    if ch == "$" and (i == 0 or sql[i - 1] not in IDENT_CHARS) and (m := TAG.match(sql, i)):
        end = sql.find(m.group(0), m.end())
        return len(sql) if end < 0 else end + len(m.group(0))
    return None


def _string_end(sql: str, i: int, quote: str, backslash: bool) -> int:
    while i < len(sql):
        ch = sql[i]
        if backslash and ch == "\\":
            i += 2
            continue
        if ch == quote:
            if sql.startswith(quote * 2, i):
                i += 2
                continue
            return i + 1
        i += 1
    return len(sql)


def _comment_end(sql: str, i: int) -> int:
    depth = 0
    while i < len(sql):
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(sql)
