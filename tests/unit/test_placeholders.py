"""``?`` and ``:name`` for psycopg (issue 31, item 2): only real placeholders change; quoted
parts, comments, casts and psycopg's own style are left as they are."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronlab.stores.sql.placeholders import for_psycopg, tokens


@pytest.mark.parametrize(
    ("sql", "params", "want"),
    [
        ("INSERT INTO t VALUES (?, ?)", (1, 2), "INSERT INTO t VALUES (%s, %s)"),
        ("UPDATE t SET a = :a WHERE id = :id", {"a": 1, "id": 2},
         "UPDATE t SET a = %(a)s WHERE id = %(id)s"),
        ("SELECT '?' , ? FROM t", (1,), "SELECT '?' , %s FROM t"),
        ("SELECT 'it''s ?', ?", (1,), "SELECT 'it''s ?', %s"),
        ("SELECT E'\\' ?', ?", (1,), "SELECT E'\\' ?', %s"),
        ('SELECT "odd?col", ? FROM t', (1,), 'SELECT "odd?col", %s FROM t'),
        ("SELECT $$ ? :a $$, ?", (1,), "SELECT $$ ? :a $$, %s"),
        ("SELECT $fn$ ? $$ ? $fn$, ?", (1,), "SELECT $fn$ ? $$ ? $fn$, %s"),
        ("SELECT ? -- is it? :a\n, 1", (1,), "SELECT %s -- is it? :a\n, 1"),
        ("SELECT /* a /* nested ? */ ? */ ?", (1,), "SELECT /* a /* nested ? */ ? */ %s"),
        ("SELECT :a::int, x::text", {"a": "1"}, "SELECT %(a)s::int, x::text"),
        ("SELECT ? LIKE 'a%'", ("ab",), "SELECT %s LIKE 'a%%'"),
        ("SELECT 5 % ?", (3,), "SELECT 5 %% %s"),
        ("SELECT a[1:n] FROM t WHERE i = :i", {"i": 1}, "SELECT a[1:n] FROM t WHERE i = %(i)s"),
        ("SELECT price$1 FROM t WHERE a = ?", (1,), "SELECT price$1 FROM t WHERE a = %s"),
    ],
)  # fmt: skip
def test_sqlite_style_becomes_psycopg_style(sql: str, params: Any, want: str) -> None:
    assert for_psycopg(sql, params) == want


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("INSERT INTO t VALUES (%s, 'a?')", (1,)),  # psycopg's own: as it is
        ("UPDATE t SET a = %(a)s WHERE b = ':b'", {"a": 1}),
        ("SELECT data ? 'key' FROM t", ()),  # jsonb's ? operator, no values: as it is
        ("SELECT :a", ()),  # no values at all
        ("SELECT ? FROM t", {"a": 1}),  # ? with a mapping: not a named placeholder
        ("SELECT :a FROM t", (1,)),  # :a with a sequence: not a positional one
    ],
)
def test_what_is_not_sqlite_style_for_its_values_is_left_alone(sql: str, params: Any) -> None:
    assert for_psycopg(sql, params) == sql


PIECES = st.sampled_from(
    ["?", ":a", "::int", "'x?y'", "'it''s'", '"c?"', "$$ ? $$", "-- ?\n", "/* ? */", " ", "5 % 2",
     "SELECT", ",", "E'\\'?'", "a[1:2]", "%%"]
)  # fmt: skip


@given(st.lists(PIECES, max_size=12))
def test_tokens_join_back_to_the_statement(parts: list[str]) -> None:
    sql = " ".join(parts)
    assert "".join(text for _, text in tokens(sql)) == sql


@given(st.lists(PIECES, max_size=12))
def test_a_converted_statement_has_one_psycopg_placeholder_per_question_mark(
    parts: list[str],
) -> None:
    sql = " ".join(parts)
    marks = sum(kind == "?" for kind, _ in tokens(sql))
    natives = any(kind == "native" for kind, _ in tokens(sql))
    out = for_psycopg(sql, (1,))
    if natives or not marks:
        assert out == sql
    else:
        assert out.replace("%%", "").count("%s") == marks
        assert "%" not in out.replace("%%", "").replace("%s", "")
