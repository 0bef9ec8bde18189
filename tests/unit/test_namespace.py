"""The qualifier of cronlab's own SQL (``stores/sql/namespace.py``): only cronlab's names,
only where they stand as names."""

from __future__ import annotations

import re

import pytest

from cronlab.stores.sql import namespace
from cronlab.stores.sql.dialect import queries
from cronlab.stores.sqlite import SqliteStore

PG = namespace.postgres_schema(None)
SQ = namespace.SQLITE


@pytest.mark.parametrize(
    ("sql", "postgres", "sqlite"),
    [
        ("SELECT id FROM tasks", "SELECT id FROM cronlab.tasks", "SELECT id FROM cronlab_tasks"),
        ("SELECT 'tasks' FROM t", "SELECT 'tasks' FROM t", "SELECT 'tasks' FROM t"),
        ('SELECT "tasks" FROM t', 'SELECT "tasks" FROM t', 'SELECT "tasks" FROM t'),
        ("SELECT 1 -- FROM tasks\n", "SELECT 1 -- FROM tasks\n", "SELECT 1 -- FROM tasks\n"),
        ("SELECT 1 /* queue */", "SELECT 1 /* queue */", "SELECT 1 /* queue */"),
        ("SELECT t.queue FROM x t", "SELECT t.queue FROM x t", "SELECT t.queue FROM x t"),
        ("WHERE a = :tasks", "WHERE a = :tasks", "WHERE a = :tasks"),
        ("WHERE a = %(pending)s", "WHERE a = %(pending)s", "WHERE a = %(pending)s"),
        ("SELECT mytasks, tasks_x FROM y", "SELECT mytasks, tasks_x FROM y", None),
        (
            "json_each(queue.task_ids)",
            "json_each(cronlab.queue.task_ids)",
            "json_each(cronlab_queue.task_ids)",
        ),
        (
            "CREATE INDEX tasks_trigger ON tasks (trigger_ms)",
            "CREATE INDEX tasks_trigger ON cronlab.tasks (trigger_ms)",  # in the table's schema
            "CREATE INDEX cronlab_tasks_trigger ON cronlab_tasks (trigger_ms)",
        ),
        (
            "ALTER TABLE processes_by_owner RENAME TO processes",
            "ALTER TABLE cronlab.processes_by_owner RENAME TO processes",  # a bare name there
            "ALTER TABLE cronlab_processes_by_owner RENAME TO cronlab_processes",
        ),
        (
            "SELECT version FROM cronlab_schema",
            "SELECT version FROM cronlab.cronlab_schema",
            "SELECT version FROM cronlab_schema",
        ),
        (
            "AS $$ BEGIN INSERT INTO pending SELECT 'queue' FROM new_tasks; END $$",
            "AS $$ BEGIN INSERT INTO cronlab.pending SELECT 'queue' FROM new_tasks; END $$",
            "AS $$ BEGIN INSERT INTO cronlab_pending SELECT 'queue' FROM new_tasks; END $$",
        ),
        ("SELECT 1::bigint FROM lease", "SELECT 1::bigint FROM cronlab.lease", None),
    ],
)
def test_only_cronlabs_names_are_qualified_and_only_as_names(
    sql: str, postgres: str, sqlite: str | None
) -> None:
    assert PG.sql(sql) == postgres
    assert SQ.sql(sql) == (sqlite if sqlite is not None else sql.replace("lease", "cronlab_lease"))


def test_a_schema_named_in_the_url_qualifies_to_it() -> None:
    assert namespace.postgres_schema("billing_jobs").sql("DELETE FROM queue") == (
        "DELETE FROM billing_jobs.queue"
    )


TABLE_PLACE = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE|ON)\s+([a-z_]+)\b(?!\s*\()")


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_no_named_query_names_one_of_cronlabs_tables_bare_once_qualified(dialect: str) -> None:
    """A query that reached the database with a bare ``tasks`` would read the application's."""
    space = SQ if dialect == "sqlite" else PG
    tables = set(namespace.tables())
    for name, text in space.queries(queries(dialect)).items():
        bare = {t for t in TABLE_PLACE.findall(text) if t in tables and t != namespace.VERSIONS}
        assert not bare, (name, bare)


def test_no_column_of_cronlabs_shares_a_name_of_its_objects() -> None:
    """What lets the qualifier rewrite every bare occurrence: a column named ``queue`` would be
    rewritten where it stands alone."""
    store = SqliteStore(":memory:")
    names = set(namespace.objects())
    for table in namespace.tables():
        if table in ("processes_by_owner", "pending", "copied"):
            continue  # (renamed by 005; PostgreSQL's own two: trigger_ms, dispatched_ms, task_id)
        columns = {r[1] for r in store.query(f"PRAGMA table_info({SQ.qualified(table)})")}
        assert columns and not columns & names, (table, columns & names)
    store.close()
