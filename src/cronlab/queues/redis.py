"""The queue on Redis Streams (``--queue redis://host:6379[/db][?prefix=NAME]``).

* One stream ``<prefix>:tasks`` and one consumer group ``workers``; a worker reads new entries
  with XREADGROUP and first takes over entries another consumer left pending longer than the
  visibility timeout with XAUTOCLAIM (a dead worker's messages come back: at-least-once).
* Transactional outbox: a dispatch still writes DISPATCHED and one queue row per task in the
  store's ONE transaction (fenced as before); ``relay()`` then publishes those rows to the
  stream and deletes them. A leader that dies between the two leaves rows that the next
  leader's relay publishes; a row published twice runs twice and the idempotency key keeps
  the effect single.
* An ack is XACK + XDEL of the exact delivery that was claimed last (a Lua script checks
  the consumer and delivery count), so a stale delivery cannot ack a reclaimed message.

``RelayStore`` wraps a store for the processes: the scheduler's dispatch relays, and the
worker's batch is acked on the stream after the store committed it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis

from cronlab.exceptions import BackendUnavailable, ConfigError
from cronlab.ports import (
    Clock,
    Event,
    Message,
    NewTask,
    ProcessInfo,
    QueueTable,
    Retry,
    Run,
    Store,
    Task,
)

GROUP = "workers"
RELAY = "relay"
RELAY_BATCH = 10_000
RELAY_VISIBILITY_MS = 10_000
# One field per entry: a JSON array [row, task_id, key, handler, payload, trigger_ms, attempt].
FIELD = "m"

# KEYS[1] stream; ARGV: group, then (entry id, consumer, deliveries).
ACK_SCRIPT = """
local n = 0
for i = 2, #ARGV, 3 do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[i + 1] and tostring(p[1][4]) == ARGV[i + 2] then
    n = n + redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
    redis.call('XDEL', KEYS[1], ARGV[i])
  end
end
return n
"""

# KEYS[1] stream; ARGV: entries' field values. One call appends a whole relay batch: far
# cheaper for the relaying leader than one XADD command per message.
PUBLISH_SCRIPT = """
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'm', ARGV[i])
end
return #ARGV
"""
PUBLISH_CHUNK = 5_000


@dataclass(frozen=True, kw_only=True)
class RedisUrl:
    """``redis://host:port[/db][?prefix=NAME]``; keys start with ``prefix`` (default cronlab)."""

    client_url: str
    prefix: str
    text: str


def parse_url(text: str) -> RedisUrl:
    """Parse ``--queue redis://…``; ConfigError names a malformed URL."""
    parts = urlsplit(text)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ConfigError(f"malformed Redis URL {text!r}: expected redis://host:6379")
    query = dict(parse_qsl(parts.query))
    prefix = query.pop("prefix", "cronlab")
    client = urlunsplit(parts._replace(query=urlencode(query)))
    return RedisUrl(client_url=client, prefix=prefix, text=text)


def connect(url: RedisUrl, timeout_s: float = 5.0) -> redis.Redis:
    """A client that answered PING, or a one-line ``BackendUnavailable`` naming the server."""
    client = redis.Redis.from_url(
        url.client_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise BackendUnavailable(f"redis {url.text} unreachable: {exc}") from exc
    return client


class RedisQueue:
    """``ports.Queue`` on a Redis stream, fed from the store's outbox (``QueueTable``)."""

    def __init__(
        self, url: RedisUrl, outbox: QueueTable, clock: Clock, retry_s: float = 60.0
    ) -> None:
        self.url, self._outbox, self._clock, self.retry_s = url, outbox, clock, retry_s
        self._redis = connect(url)
        self.stream = f"{url.prefix}:tasks"
        # (outbox envelope, task, receives) → (stream entry id, consumer) of each delivery
        # this process holds
        self._entries: dict[tuple[int, int, int], tuple[bytes, str]] = {}
        self._ack = self._redis.register_script(ACK_SCRIPT)
        self._append = self._redis.register_script(PUBLISH_SCRIPT)
        self._call(self._ensure_group)

    def close(self) -> None:
        self._redis.close()

    # -- ports.Queue ------------------------------------------------------------------------

    def claim(self, worker: str, limit: int, visibility_ms: int) -> list[Message]:
        """Entries pending longer than ``visibility_ms`` first (XAUTOCLAIM), then new ones."""
        entries = self._call(self._reclaim, worker, limit, visibility_ms)
        if len(entries) < limit:
            entries += self._call(self._read_new, worker, limit - len(entries))
        return [self._message(worker, *entry) for entry in entries]

    def ack(self, messages: Sequence[Message]) -> int:
        """XACK + XDEL the deliveries given, only where they are still the latest."""
        if not messages:
            return 0
        args: list[Any] = [GROUP]
        for m in messages:
            entry, consumer = self._entries.pop(_delivery(m), (b"0-0", ""))
            args += [entry, consumer, m.receives]
        return int(self._call(self._ack, [self.stream], args))

    def depth(self) -> int:
        """Entries not yet acked, plus outbox rows not yet published."""
        return int(self._call(self._redis.xlen, self.stream)) + self._outbox.queue_depth()

    # -- the outbox relay -------------------------------------------------------------------

    def relay(self) -> int:
        """Publish every visible outbox row to the stream, then delete it. Returns published.

        A store that can take rows in one statement (``outbox_take``: delete … returning, the
        publish before its commit) does so; otherwise claim, publish, delete.
        """
        take = getattr(self._outbox, "outbox_take", None)
        now = self._clock.now_ms()
        if take is not None:
            total = 0
            while (n := int(take(RELAY_BATCH, now, self._publish_or_raise))) > 0:
                total += n
                if n < RELAY_BATCH:
                    break
            return total
        total = 0
        while rows := self._outbox.queue_claim(
            RELAY, RELAY_BATCH, RELAY_VISIBILITY_MS, self._clock.now_ms()
        ):
            self._call(self._publish, rows)
            self._outbox.queue_ack(rows)
            total += len(rows)
            if len(rows) < RELAY_BATCH:
                break
        return total

    # -- Redis requests ---------------------------------------------------------------------

    def _ensure_group(self) -> None:
        try:
            self._redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _publish_or_raise(self, rows: Sequence[Message]) -> None:
        self._call(self._publish, rows)

    def _publish(self, rows: Sequence[Message]) -> None:
        entries = [
            json.dumps(
                [m.id, m.task_id, m.idempotency_key, m.handler, m.payload, m.trigger_ms, m.attempt]
            )
            for m in rows
        ]
        for i in range(0, len(entries), PUBLISH_CHUNK):
            self._append([self.stream], entries[i : i + PUBLISH_CHUNK])

    def _reclaim(self, worker: str, limit: int, visibility_ms: int) -> list[Any]:
        got: Any = self._redis.xautoclaim(self.stream, GROUP, worker, visibility_ms, "0-0", limit)
        claimed = [(i, f) for i, f in got[1] if f]  # entries deleted meanwhile come back empty
        if not claimed:
            return []
        counts = self._deliveries(worker, [i for i, _ in claimed])
        return [(i, f, counts.get(i, 2)) for i, f in claimed]

    def _deliveries(self, worker: str, ids: list[bytes]) -> dict[bytes, int]:
        rows = self._redis.xpending_range(
            self.stream,
            GROUP,
            min=ids[0],
            max=ids[-1],
            count=len(ids) + RELAY_BATCH,
            consumername=worker,
        )
        return {_bytes(r["message_id"]): int(r["times_delivered"]) for r in rows}

    def _read_new(self, worker: str, limit: int) -> list[Any]:
        got: Any = self._redis.xreadgroup(GROUP, worker, {self.stream: ">"}, count=limit)
        return [(i, f, 1) for _, entries in got for i, f in entries]

    def _message(
        self, worker: str, entry_id: bytes, fields: dict[bytes, bytes], receives: int
    ) -> Message:
        row, task_id, key, handler, payload, trigger_ms, attempt = json.loads(fields[b"m"])
        self._entries[(row, task_id, receives)] = (entry_id, worker)
        return Message(
            id=row,
            task_id=task_id,
            idempotency_key=key,
            handler=handler,
            payload=payload,
            trigger_ms=trigger_ms,
            receives=receives,
            attempt=attempt,
        )

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One Redis request; a lost connection is retried with backoff (0.1 s doubling to 2 s)
        for up to ``retry_s``, then ``BackendUnavailable``. Every request here is safe to
        repeat: a lost reply at worst leaves a delivery pending until the visibility timeout
        or publishes an entry twice (the idempotency key keeps the effect single)."""
        deadline, delay = time.monotonic() + self.retry_s, 0.1
        while True:
            try:
                return fn(*args)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if time.monotonic() + delay > deadline:
                    raise BackendUnavailable(f"redis {self.url.text} unreachable: {exc}") from exc
                time.sleep(delay)
                delay = min(2.0, delay * 2)


def _delivery(m: Message) -> tuple[int, int, int]:
    """One delivery of one message: messages of an outbox envelope share its id."""
    return (m.id, m.task_id, m.receives)


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class OutboxStore(Store, Protocol):
    """A store whose queue table can serve as the outbox (the SQL stores)."""

    def execute(
        self,
        worker: str,
        messages: Sequence[Message],
        run: Run,
        retry: Retry,
        now: Callable[[], int],
        *,
        relayed: bool = False,
    ) -> dict[str, int]:
        """``Store.execute``; ``relayed``: the messages came through the relay, so there is
        nothing to settle in the outbox, and a retry goes into it, due after its backoff."""
        ...


class RelayStore:
    """A store whose dispatches are relayed to a ``RedisQueue`` and whose worker batches are
    acked on the stream once the store has committed them (``ports.Store``)."""

    def __init__(self, inner: OutboxStore, queue: RedisQueue) -> None:
        self.inner, self.queue = inner, queue

    def dispatch_due(self, now_ms: int, limit: int, epoch: int) -> int:
        n = self.inner.dispatch_due(now_ms, limit, epoch)
        self.queue.relay()  # also re-publishes what a dead leader committed but never sent
        return n

    def enqueue_copies(self, tasks: Sequence[Task], now_ms: int) -> int:
        n = self.inner.enqueue_copies(tasks, now_ms)
        self.queue.relay()
        return n

    def execute(
        self,
        worker: str,
        messages: Sequence[Message],
        run: Run,
        retry: Retry,
        now: Callable[[], int],
    ) -> dict[str, int]:
        """Run the batch in the store, which puts a message to retry back in the outbox, due
        after its backoff, in the same transaction; then ack every delivery on the stream. A
        worker that dies between the two leaves its deliveries pending: they come back after
        the visibility timeout (a duplicate run, whose effect the idempotency key keeps single)."""
        counts = self.inner.execute(worker, messages, run, retry, now, relayed=True)
        self.queue.ack(messages)
        return counts

    # -- everything else as the store does it -----------------------------------------------

    def add_tasks(self, tasks: Iterable[NewTask]) -> int:
        return self.inner.add_tasks(tasks)

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[Task]:
        return self.inner.read_due(now_ms, limit, copied_since_ms)

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        return self.inner.mark_missed(before_ms, now_ms)

    def counts(self) -> dict[str, int]:
        return self.inner.counts()

    def register_process(self, info: ProcessInfo) -> None:
        self.inner.register_process(info)

    def process_exited(self, role: str, index: int, pid: int, now_ms: int) -> None:
        self.inner.process_exited(role, index, pid, now_ms)

    def processes(self) -> list[ProcessInfo]:
        return self.inner.processes()

    def record_event(self, event: Event) -> None:
        self.inner.record_event(event)

    def events(self) -> list[Event]:
        return self.inner.events()

    def record_sample(self, now_ms: int, depth: int) -> None:
        self.inner.record_sample(now_ms, depth)
