"""The store's own queue (``ports.QueueTable``): envelopes of task ids, claimed whole for a
visibility timeout, settled by the worker batch that ran them; and the outbox a queue
elsewhere (Redis Streams) is fed from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cronlab.core.settlement import Delivery, Settlement
from cronlab.ports import Message
from cronlab.stores.rows import Delivered, Envelope, MessageTask
from cronlab.stores.sql.dialect import Conn
from cronlab.stores.sql.part import Part

PAGE = 16  # envelopes a claim looks at per query while it fills its limit


class SqlQueue(Part):
    """A message is ``(envelope, task id, receives, attempt)``; an envelope is delivered
    whole, and a delivery that is no longer the envelope's latest settles nothing."""

    _found = False  # the last claim found work

    def enqueue(
        self, c: Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int = 0
    ) -> None:
        """Enqueue ``(task id, attempts so far)``; a dispatch (visible at once) counts them."""
        if not tasks:
            return
        if visible_ms:
            self.db.enqueue(c, tasks, now_ms, visible_ms)
        else:
            self.db.enqueue_dispatched(c, tasks, now_ms)

    def claim(self, worker: str, limit: int, visibility_ms: int, now_ms: int) -> list[Message]:
        """Whole envelopes in queue order while they fit ``limit``; the last one is split.
        Visibility is judged by the store's clock where it has one (a server's: a worker whose
        clock is behind would otherwise claim for less than ``visibility_ms``, and one ahead
        take what another still holds). A dialect with ``claim_at_once`` claims in one
        statement (the same envelopes: the whole ones that fit, the head of the next)."""
        at_once = "claim_at_once" in self.queries

        def any_visible(c: Conn) -> bool:
            now = self.db.given_now(now_ms)  # (None: the statement reads the server's clock)
            return bool(c.execute(self.queries["queue_any_visible"], {"now": now}).fetchall())

        # An idle worker polls without writing (SQLite: without taking the write lock); one
        # whose last claim found work claims at once where a claim is one statement.
        if not (at_once and self._found) and not self.db.read(any_visible):
            self._found = False
            return []
        if at_once:
            got = self._claim_at_once(worker, limit, visibility_ms, now_ms)
            self._found = bool(got)
            return got

        def claim(c: Conn) -> list[Any]:
            now = self.db.now(c, now_ms)
            ids = self._pick_envelopes(c, limit, now)
            if not ids:
                return []
            args = {"until": now + visibility_ms, "worker": worker, "ids": self.db.ints(ids)}
            got = c.execute(self.queries["queue_claim"], args).fetchall()
            return sorted((env, self.db.ids(t), rec, att) for env, t, rec, att in got)

        return self.messages(self.db.transaction(claim), self.ack)

    def _claim_at_once(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        """``claim_at_once``: one statement, its own transaction; an idle poll writes nothing."""
        args = {
            "now": self.db.given_now(now_ms),
            "limit": limit,
            "page": min(limit, PAGE * 16),
            "visibility": visibility_ms,
            "worker": worker,
        }
        rows = self.db.at_once(lambda c: c.execute(self.queries["claim_at_once"], args).fetchall())
        heads: dict[int, tuple[int, int]] = {}  # envelope → (receives, attempt)
        ids: dict[int, list[int]] = {}
        tasks: dict[int, MessageTask] = {}
        for env, receives, attempt, task_id, key, task, payload, trigger_ms in rows:
            heads[env] = (receives, attempt)
            ids.setdefault(env, []).append(task_id)
            if key is not None:  # (NULL: the task is gone)
                tasks[task_id] = MessageTask(task_id, key, task, payload, trigger_ms)
        delivered = [Delivered(env, ids[env], *heads[env]) for env in heads]
        return self._messages(delivered, tasks, self.ack)

    def _pick_envelopes(self, c: Conn, limit: int, now_ms: int) -> list[int]:
        """Visible envelopes holding ``limit`` messages at most, the last one split to fit."""
        picked: list[int] = []
        total, after = 0, 0
        while total < limit:
            args = {"now": now_ms, "after": after, "page": PAGE}
            rows = c.execute(self.queries["queue_visible"], args).fetchall()
            for env, size in rows:
                if total + size > limit:  # take the head of it; the rest keeps its place
                    keep = {"id": env, "keep": limit - total}
                    (env,) = c.execute(self.queries["queue_split"], keep).fetchone()
                    c.execute(self.queries["queue_keep"], keep)
                picked.append(env)
                total += size
                if total >= limit:
                    break
            if len(rows) < PAGE:
                break
            after = rows[-1][0]
        return picked

    def messages(
        self, envelopes: Sequence[Sequence[Any]], drop: Callable[[list[Message]], object]
    ) -> list[Message]:
        """Claimed ``(id, task ids, receives, attempt)`` envelopes → their messages (the
        tasks' columns never change, so they are read after the claim committed). A message
        whose task is gone — its finished row deleted by the retention, then delivered again
        (published twice, an ack lost) — has nothing left to run: it goes to ``drop`` (the
        queue's ack) instead."""
        if not envelopes:
            return []
        delivered = [Delivered._make(e) for e in envelopes]
        wanted = self.db.ints(sorted({t for e in delivered for t in e.task_ids}))
        tasks = {
            r.id: r for r in map(MessageTask._make, self.named("message_tasks", {"ids": wanted}))
        }
        return self._messages(delivered, tasks, drop)

    def _messages(
        self,
        delivered: Sequence[Delivered],
        tasks: dict[int, MessageTask],
        drop: Callable[[list[Message]], object],
    ) -> list[Message]:
        """``delivered`` envelopes' messages, of the ``tasks`` found (the others dropped)."""
        found = [
            r.message(e) for e in delivered for r in map(tasks.get, e.task_ids) if r is not None
        ]
        if len(found) < sum(len(e.task_ids) for e in delivered):
            gone = MessageTask(0, "", "", "{}", 0)
            drop(
                [
                    gone._replace(id=t).message(e)
                    for e in delivered
                    for t in e.task_ids
                    if t not in tasks
                ]
            )
        return found

    def outbox_take(
        self, limit: int, now_ms: int, publish: Callable[[list[Envelope]], None]
    ) -> int:
        """``publish`` up to ``limit`` visible envelopes, then delete them. The publish runs
        outside any transaction: a queue elsewhere that hangs (Redis down, retried for a
        minute) holds no write lock meanwhile. A crash between the two, or two relays at once,
        publish an envelope twice — a worker settles the second delivery as stale — and
        never lose one."""
        rows = self.named("outbox_visible", {"limit": limit, "now": now_ms})
        envelopes: list[Envelope] = sorted((env, self.db.ids(ids), att) for env, ids, att in rows)
        if not envelopes:
            return 0
        publish(envelopes)
        ids = {"ids": self.db.ints(e[0] for e in envelopes)}
        self.db.transaction(lambda c: c.execute(self.queries["outbox_delete"], ids))
        return sum(len(e[1]) for e in envelopes)

    def ack(self, messages: Sequence[Message]) -> int:
        return self.db.transaction(lambda c: self.settle(c, messages, [], 0))

    def release(self, messages: Sequence[Message]) -> int:
        deliveries = sorted({(m.id, m.receives) for m in messages})

        def release(c: Conn) -> int:
            return sum(
                int(c.execute(self.queries["queue_release"], {"id": i, "receives": r}).rowcount)
                for i, r in deliveries
            )

        return self.db.transaction(release)

    def depth(self) -> int:
        return int(self.named("queue_depth")[0][0])

    def settle(
        self,
        c: Conn,
        acks: Sequence[Message],
        retries: Sequence[tuple[Message, int]],
        now_ms: int,
        record: dict[str, str] | None = None,
    ) -> int:
        """Take acked and retried messages out of their envelopes, if the delivery given is
        still the envelope's latest (a stale one settles nothing); a retry goes into an
        envelope of its own, visible at the time given. Returns the messages acked.
        ``record``: a batch's execution records (``execution_insert``'s arguments), written by
        the same statement (``queue_ack_whole_recording``)."""
        plan = Settlement.of(acks, retries)
        keys = list(plan.removed)
        whole: dict[str, Any] = {
            "ids": self.db.ints(k[0] for k in keys),
            "receives": self.db.ints(k[1] for k in keys),
            "sizes": self.db.ints(plan.removed[k] for k in keys),
        }
        query = "queue_ack_whole" if record is None else "queue_ack_whole_recording"
        settled = {
            (r[0], r[1]) for r in c.execute(self.queries[query], whole | (record or {})).fetchall()
        }
        acked = 0
        for key in keys:
            if key not in settled and not self._shrink(c, key, plan):
                continue  # stale: the envelope was delivered again meanwhile
            acked += plan.acked[key]
            for m, at in plan.retried(key):
                self.enqueue(c, [(m.task_id, m.attempt)], now_ms, at)
        return acked

    def _shrink(self, c: Conn, key: Delivery, plan: Settlement) -> bool:
        """Take some messages out of a current envelope; False when it is not current."""
        row = c.execute(
            self.queries["queue_envelope"], {"id": key[0], "receives": key[1]}
        ).fetchone()
        if row is None:
            return False
        left = plan.left(key, self.db.ids(row[0]))
        if left:
            args = {"id": key[0], "ids": self.db.ints(left), "size": len(left)}
            c.execute(self.queries["queue_shrink"], args)
        else:
            c.execute(self.queries["queue_delete"], {"id": key[0]})
        return True
