"""The mutation gate's deliberate bugs (``make mutants``, ``scripts/mutants.py``).

Each is a line of the engine broken the way a real change could break it; the simulator
(``cronlab verify``, on SQLite and on PostgreSQL) must catch each one as the violation it
causes — a duplicated effect as ``duplicated``, a lost one as ``lost`` — within 2,000 seeds.
An edit names a file under ``src/cronlab`` and text that must occur in it exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

SQLITE_Q = "stores/sql/sqlite/queries.sql"
PG_Q = "stores/sql/postgresql/queries.sql"
SQLITE_OPS = "stores/sql/sqlite/queries_ops.sql"
PG_OPS = "stores/sql/postgresql/queries_ops.sql"
SQLITE_016 = "stores/sql/sqlite/016_ids_never_reused.sql"


@dataclass(frozen=True)
class Edit:
    path: str  # under src/cronlab
    old: str
    new: str


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str  # the bug, in a sentence
    edits: tuple[Edit, ...]
    expect: tuple[str, ...]  # the checker's kinds that catch it as what it causes
    stores: tuple[str, ...] = ("sqlite", "postgresql")  # where the broken line can matter
    # A test that must fail with the bug applied, instead of the simulator, for a line only a
    # server the simulator does not model reaches (Redis Streams): a pytest node id.
    test: str = ""


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "fence-check-removed",
        "a dispatch no longer checks that its epoch still holds the lease",
        (
            Edit(
                "stores/sql/lease.py",
                "            if epoch < max_epoch or not rules.holds(held, epoch, now_ms):\n"
                "                raise FencedError(epoch, held.epoch)",
                "            pass",
            ),
        ),
        ("duplicated", "split_brain", "unexpected"),
    ),
    Mutation(
        "savepoint-rollback-removed",
        "a failed run's savepoint is released, not rolled back: its writes stay",
        (
            Edit(
                "stores/sql/batch.py",
                '            c.execute("ROLLBACK TO SAVEPOINT run")\n',
                "",
            ),
        ),
        ("duplicated",),
    ),
    Mutation(
        "sole-run-not-rolled-back",
        "a batch's only run fails with no savepoint, and its failure is recorded in the same "
        "transaction instead of a second one: its writes stay",
        (
            Edit(
                "execution.py",
                "            if len(self.work.messages) == 1:\n"
                "                raise _Alone(undone, began) from undone.error\n",
                "",
            ),
        ),
        ("duplicated",),
    ),
    Mutation(
        "claim-predicate-dropped",
        "the due scan no longer requires a row to be PENDING: it dispatches finished rows again",
        (
            Edit(
                SQLITE_Q,
                "  SELECT id FROM tasks WHERE status = 'PENDING' AND trigger_ms <= :now\n"
                "  ORDER BY trigger_ms, id LIMIT :limit",
                "  SELECT id FROM tasks WHERE status != 'SKIPPED' AND trigger_ms <= :now\n"
                "  ORDER BY trigger_ms, id LIMIT :limit",
            ),
            Edit(
                PG_Q,
                "WHERE t.id = ANY(ARRAY(SELECT task_id FROM due))  -- by key: the CTE has no "
                "estimate\n  AND t.status = 'PENDING'",
                "WHERE (t.id = ANY(ARRAY(SELECT task_id FROM due)) OR (t.status = 'DONE' "
                "AND t.trigger_ms <= %(now)s))\n  AND t.status != 'SKIPPED'",
            ),
        ),
        ("duplicated",),
    ),
    Mutation(
        "lease-expiry-ignored",
        "a lease never expires: a dead leader's is never taken over",
        (
            Edit(
                SQLITE_Q,
                "WHERE name = 'scheduler' AND (holder IS NULL OR expires_ms <= :now OR "
                "holder = :owner)",
                "WHERE name = 'scheduler' AND (holder IS NULL OR holder = :owner)",
            ),
            Edit(
                PG_Q,
                "WHERE name = 'scheduler' AND (holder IS NULL OR expires_ms <= %(now)s OR "
                "holder = %(owner)s)",
                "WHERE name = 'scheduler' AND (holder IS NULL OR holder = %(owner)s)",
            ),
        ),
        ("stuck", "late"),
    ),
    Mutation(
        "attempt-not-counted",
        "a run no longer counts its attempt",
        (
            Edit(
                SQLITE_Q,
                "UPDATE tasks SET status = 'DONE', attempts = attempts + 1\n"
                "WHERE id IN (SELECT value FROM json_each(:ids)) AND attempts = :before",
                "UPDATE tasks SET status = 'DONE', attempts = attempts\n"
                "WHERE id IN (SELECT value FROM json_each(:ids)) AND attempts >= :before - 1",
            ),
            Edit(
                PG_Q,
                "UPDATE tasks SET status = 'DONE', attempts = attempts + 1\n"
                "WHERE id = ANY(%(ids)s::bigint[]) AND attempts = %(before)s",
                "UPDATE tasks SET status = 'DONE', attempts = attempts\n"
                "WHERE id = ANY(%(ids)s::bigint[]) AND attempts >= %(before)s - 1",
            ),
            Edit(
                PG_Q,
                "  UPDATE tasks SET status = 'DONE', attempts = attempts + 1\n"
                "  WHERE id = ANY(ARRAY(",
                "  UPDATE tasks SET status = 'DONE', attempts = attempts\n  WHERE id = ANY(ARRAY(",
            ),
            Edit(
                PG_Q,
                "    AND attempts = %(before)s AND status = 'DISPATCHED'",
                "    AND attempts >= %(before)s - 1 AND status = 'DISPATCHED'",
            ),
        ),
        ("stuck", "lost", "duplicated"),
    ),
    Mutation(
        "doubled-delivery-runs",
        "a batch holding two deliveries of one task runs both",
        (
            Edit(
                "stores/sql/batch.py",
                "or (started.get(m.task_id) == m.attempt and m.task_id not in seen)",
                "or started.get(m.task_id) == m.attempt",
            ),
        ),
        ("duplicated",),
    ),
    Mutation(
        "stale-delivery-runs",
        "a delivery no longer current (redelivered, or its task finished) runs anyway",
        (
            Edit(
                "execution.py",
                "        live, self.copies = self.b.live(messages, self.work.checked)\n",
                "        live, self.copies = self.b.live(messages, self.work.checked)\n"
                "        live = [True] * len(messages)\n",
            ),
        ),
        ("duplicated",),
    ),
    Mutation(
        "overlap-check-removed",
        "overlap=skip no longer skips an occurrence while an earlier run is going",
        (
            Edit(
                "core/planning.py",
                '    if s.overlap != "skip":\n        return False',
                "    return False",
            ),
        ),
        ("unexpected",),
    ),
    Mutation(
        "retention-forgets-its-horizon",
        "the retention no longer records how far back it deleted a schedule's history",
        (
            Edit(
                "stores/sql/history.py",
                "                self._note_gone(c, deleted)\n",
                "",
            ),
        ),
        ("duplicated",),
    ),
    Mutation(
        "attempts-never-exhausted",
        "a failing task is retried for ever: its last attempt no longer ends it FAILED",
        (
            Edit(
                "execution.py",
                "        final = m.attempt >= retry.max_attempts\n",
                "        final = False\n",
            ),
        ),
        ("stuck",),
    ),
    Mutation(
        "lost-run-not-counted",
        "a delivery that came back runs again instead of counting its lost attempt",
        (
            Edit(
                "execution.py",
                "        return m.receives > 1 and self.work.checked and m.task_id not in "
                "self.copies",
                "        return False",
            ),
        ),
        ("stuck", "duplicated"),
    ),
    Mutation(
        "follow-up-parsed-as-occurrence",
        "a key that starts 'schedule:' and does not parse stops the dispatch (the cron-fired "
        "ctx.defer bug)",
        (
            Edit(
                "core/occurrences.py",
                "    try:\n        return policy.parse_occurrence_key(key)\n"
                "    except ConfigError:\n        return None",
                "    return policy.parse_occurrence_key(key)",
            ),
        ),
        ("stuck", "lost"),
    ),
    Mutation(
        "operator-change-unserialised",
        "a deploy, pause or backfill no longer waits for a dispatch or retention under way (bugs "
        "3 and 4: a dispatch plans from a definition replaced under it)",
        (
            Edit(
                "stores/sql/schedules.py",
                '            c.execute(self.queries["fence_lock_all"])\n',
                "",
            ),
        ),
        ("unexpected", "duplicated"),
        ("postgresql",),  # SQLite's writer lock serialises every write: the line is idle there
    ),
    Mutation(
        "retry-on-worker-clock",
        "a retry's due instant is written on the worker's clock, not the store's",
        (
            Edit(
                "stores/sql/batch.py",
                "        mine = self.now()\n        return self.db.now(self.c, mine) - mine",
                "        return 0",
            ),
        ),
        ("stuck", "late"),
    ),
    Mutation(
        "run-end-not-recorded",
        "an occurrence's end is not recorded: the next one's overlap no longer sees it",
        (
            Edit(
                "stores/sql/batch.py",
                '            self.db.executemany(self.c, self.queries["task_finished"], rows)\n',
                "",
            ),
        ),
        ("unexpected",),
    ),
    Mutation(
        "base-exception-kills-batch",
        "only Exception is a run's failure: a CancelledError or SystemExit ends the batch",
        (
            Edit(
                "handlers.py",
                "    if isinstance(exc, (Exception, *STOPS)):\n        return True",
                "    if isinstance(exc, Exception):\n        return True",
            ),
            Edit(
                "handlers.py",
                "    return aio is not None and isinstance(exc, aio.CancelledError)",
                "    return False",
            ),
        ),
        ("stuck", "duplicated", "lost"),
    ),
    Mutation(
        "change-judged-before-locks",
        "a deploy, pause or resume judges due-ness by the instant it was asked, not once it "
        "holds the locks (seed 1507 on PostgreSQL, 60941 on SQLite: an occurrence due while it "
        "waited is dropped)",
        (
            Edit(
                "stores/sql/schedules.py",
                "            return fn(c, self.db.now(c, now_ms if clock is None else clock()))",
                "            return fn(c, now_ms)",
            ),
        ),
        ("lost", "unexpected"),
    ),
    Mutation(
        "retries-batched-together",
        "a retry runs in a batch with others: a handler that ends its session takes the same "
        "batch-mates down at every attempt (seed 1529)",
        (
            Edit(
                "runtime/worker.py",
                "    return groups",
                "    return [list(messages)]",
            ),
        ),
        ("stuck", "lost"),
        # On SQLite only a handler that crashes its worker takes batch-mates down, as often as
        # it is made to crash: a loss the checker allows it (not caught in 2,000 seeds there).
        ("postgresql",),
    ),
    Mutation(
        "later-groups-held",
        "a claim keeps every group it cannot hold: a retry queued behind a handler that outlasts "
        "the visibility timeout is received again and charged an attempt it never started "
        "(PostgreSQL seeds 510, 1017, 12941)",
        (
            Edit(
                "queues/store.py",
                "        if back:\n            self._table.queue_release(back)\n"
                "        yield kept\n",
                "        yield groups\n",
            ),
        ),
        ("lost",),
        ("postgresql",),  # a handler outlasting its session's idle limit: PostgreSQL's fault
    ),
    Mutation(
        "session-lost-stops-batch",
        "a group whose session the server ended stops the batch: the groups behind it never run "
        "and are charged a lost attempt at their redelivery (seed 1529, the stricter checker)",
        (
            Edit(
                "runtime/worker.py",
                "            except SessionLost as exc:\n                lost = lost or exc\n",
                "            except SessionLost as exc:\n                lost = lost or exc\n"
                "                break\n",
            ),
        ),
        ("test",),
        # Only PostgreSQL's sessions end under a batch (SessionLost), and only a queue that
        # holds several groups at once runs one after another: a store queue's claim now runs
        # its first group and gives the rest back (later-groups-held), so the simulator no
        # longer reaches this line; Redis's heartbeat holds every group, and the test does.
        ("postgresql",),
        "tests/integration/test_handler_faults_postgres.py"
        "::test_retries_behind_sessions_the_server_ended_still_run[redis]",
    ),
    Mutation(
        "key-holder-read-once",
        "a keyed defer reads the task holding its key once: when the retention deleted it after "
        "the insert ran into it, the defer raises (seed 2601)",
        (
            Edit(
                "stores/sql/tasks.py",
                "            for _ in range(KEY_TRIES):",
                "            for _ in range(1):",
            ),
        ),
        ("stuck",),
        # On SQLite the writer lock keeps the insert and its read together. On PostgreSQL the
        # race was rare (seed 2,601 at 438121c, none of seeds 1-2,000) until the rekey kind
        # (a key deferred every second while the retention deletes its finished task).
        ("postgresql",),
    ),
    Mutation(
        "ids-reused",
        "SQLite gives a deleted task's id, and an envelope's, to the next insert (no "
        "AUTOINCREMENT): a stale message runs the new task as the old (seed 22794)",
        (
            Edit(
                SQLITE_016,
                "id INTEGER PRIMARY KEY AUTOINCREMENT, idempotency_key",
                "id INTEGER PRIMARY KEY, idempotency_key",
            ),
            Edit(
                SQLITE_016,
                "id INTEGER PRIMARY KEY AUTOINCREMENT, task_ids",
                "id INTEGER PRIMARY KEY, task_ids",
            ),
        ),
        ("lost", "duplicated"),
        # PostgreSQL's ids come from sequences: no line of its to break.
        ("sqlite",),
    ),
    Mutation(
        "claim-split-reads-snapshot",
        "a PostgreSQL claim splits an envelope as its statement's snapshot saw it, not as it "
        "locked it: a concurrent claim's messages are handed out again (241aef9)",
        (
            Edit(
                PG_Q,
                "  SELECT h.task_ids[:h.take], h.take, h.attempt, h.enqueued_ms,\n"
                "    (SELECT now FROM clock) + %(visibility)s, h.receives + 1, %(worker)s\n"
                "  FROM head h\n",
                "  SELECT q.task_ids[:h.take], h.take, q.attempt, q.enqueued_ms,\n"
                "    (SELECT now FROM clock) + %(visibility)s, q.receives + 1, %(worker)s\n"
                "  FROM queue q JOIN head h ON q.id = h.id\n",
            ),
        ),
        ("test",),
        # Two statements of the simulator never run at once (each waits for the server's
        # answer before another goes), so the race inside one statement, between its
        # snapshot and its lock, is out of its reach: a contract test with four real
        # claimers splitting envelopes holds it.
        ("postgresql",),
        "tests/contract/test_store_distributed.py"
        "::test_concurrent_claims_that_split_envelopes_never_deliver_a_message_twice",
    ),
)
