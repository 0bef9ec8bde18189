"""The queue on Redis Streams (``--queue redis://host:6379[/db][?prefix=NAME]``).

* One stream ``<prefix>:tasks`` and one consumer group ``workers``. A stream entry is an
  outbox envelope: up to ``rows.ENVELOPE`` task ids with their attempt, so Redis does one
  append, one read and one ack per envelope, not per task. A worker reads the tasks' columns
  from the store (they never change once written).
* Claims (one Lua script, so atomic) first take over entries another consumer left pending
  longer than the visibility timeout (XAUTOCLAIM: a dead worker's messages come back, at
  least once), then read new ones (XREADGROUP), an entry at a time until the limit. An entry
  larger than what is left of the limit is split, as the store queue splits an envelope:
  its tail goes back on the stream as a new entry; the hash ``<prefix>:tasks:left`` notes
  what the claimed entry still holds, for whoever receives it again.
* Transactional outbox: a dispatch still writes DISPATCHED and the envelopes in the store's
  ONE transaction (fenced as before); ``relay()`` then publishes those rows to the stream,
  outside any store transaction, and deletes them. A leader that dies between the two leaves
  rows that the next leader's relay publishes; a row published twice is delivered twice, and
  the worker settles the second delivery as stale without running it.
* An ack settles the exact delivery that was claimed last (a Lua script checks consumer and
  delivery count, so a stale delivery cannot ack a reclaimed message): an entry with nothing
  left is XACKed and XDELed; a partial ack notes what is left, which comes back after the
  visibility timeout. ``<prefix>:tasks:depth`` counts the messages on the stream.

The leader relays after each dispatch (``Queue.relay``), and a worker's batch is acked on the
stream once the store committed it (``Queue.committed``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlunsplit

from cronlab import urls
from cronlab.exceptions import BackendUnavailable, ConfigError

try:
    import redis
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ConfigError("redis:// queues need the redis extra: pip install 'cronlab[redis]'") from exc
from cronlab.ports import Clock, Message, Waiter
from cronlab.stores.rows import Envelope
from cronlab.urls import Url, redact
from cronlab.wakeups import redis as wakeups

GROUP = "workers"
RELAY_BATCH = 10_000
RECONCILE_MAX_ENTRIES = 50_000  # stream entries a reconcile reads at most (up to 500 ids each)
RECONCILE_PAGE = 1_000

# KEYS: stream, left hash. ARGV: group, consumer, limit, visibility ms. Returns, per entry
# claimed: entry id, deliveries, envelope id, attempt, deliveries before the entry existed
# (a split keeps its envelope's count), task ids ("1,2,3"). Entries are flat field lists.
CLAIM_SCRIPT = """
local stream, left = KEYS[1], KEYS[2]
local group, consumer, room = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
local function field(e, name)
  for i = 1, #e, 2 do if e[i] == name then return e[i + 1] end end
end
local function take(id, e, deliveries)
  local ids = redis.call('HGET', left, id) or field(e, 'ids')
  if not ids then
    error({err = 'stream entry ' .. id .. ' holds no envelope (an older cronlab wrote it?):'
      .. ' drain the stream or use another ?prefix='})
  end
  local size = select(2, string.gsub(ids, ',', '')) + 1
  if size > room then
    local cut = 0
    for _ = 1, room do cut = string.find(ids, ',', cut + 1, true) end
    local before = tonumber(field(e, 'prior')) + deliveries - 1  -- the tail was not received
    redis.call('XADD', stream, '*', 'env', field(e, 'env'), 'attempt', field(e, 'attempt'),
      'prior', before, 'ids', string.sub(ids, cut + 1))
    ids = string.sub(ids, 1, cut - 1)
    redis.call('HSET', left, id, ids)
    size = room
  end
  room = room - size
  for _, v in ipairs({id, deliveries, field(e, 'env'), field(e, 'attempt'), field(e, 'prior'),
      ids}) do
    out[#out + 1] = v
  end
end
local cursor = '0-0'
repeat
  local got = redis.call('XAUTOCLAIM', stream, group, consumer, ARGV[4], cursor, 'COUNT', 1)
  cursor = got[1]
  for _, entry in ipairs(got[2]) do
    if entry and entry[2] then  -- an entry deleted meanwhile comes back empty (Redis 6.2)
      local p = redis.call('XPENDING', stream, group, entry[1], entry[1], 1)
      take(entry[1], entry[2], p[1][4])
    end
  end
until cursor == '0-0' or room <= 0
while room > 0 do
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', 1, 'STREAMS', stream, '>')
  if not got then break end
  local entry = got[1][2][1]
  take(entry[1], entry[2], 1)
end
return out
"""

# KEYS: stream, left hash, depth counter. ARGV: group, consumer, then per delivery: entry id,
# deliveries, messages acked, task ids left ("" when none). Returns the messages acked.
ACK_SCRIPT = """
local stream, left, depth = KEYS[1], KEYS[2], KEYS[3]
local n = 0
for i = 3, #ARGV, 4 do
  local id = ARGV[i]
  local p = redis.call('XPENDING', stream, ARGV[1], id, id, 1)
  if p[1] and p[1][2] == ARGV[2] and tostring(p[1][4]) == ARGV[i + 1] then
    if ARGV[i + 3] == '' then
      redis.call('XACK', stream, ARGV[1], id)
      redis.call('XDEL', stream, id)
      redis.call('HDEL', left, id)
    else
      redis.call('HSET', left, id, ARGV[i + 3])
    end
    n = n + tonumber(ARGV[i + 2])
  end
end
if n > 0 then redis.call('DECRBY', depth, n) end
return n
"""

# KEYS: stream. ARGV: group, consumer, then per delivery: entry id, deliveries. Resets the
# idle time of each entry still held by that delivery (XCLAIM JUSTID keeps the count).
TOUCH_SCRIPT = """
local n = 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  if p[1] and p[1][2] == ARGV[2] and tostring(p[1][4]) == ARGV[i + 1] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id, 'JUSTID')
    n = n + 1
  end
end
return n
"""

# KEYS: stream, depth counter. ARGV: (envelope id, attempt, task ids "1,2,3", size)...
PUBLISH_SCRIPT = """
local n = 0
for i = 1, #ARGV, 4 do
  redis.call('XADD', KEYS[1], '*', 'env', ARGV[i], 'attempt', ARGV[i + 1], 'prior', 0,
    'ids', ARGV[i + 2])
  n = n + tonumber(ARGV[i + 3])
end
redis.call('INCRBY', KEYS[2], n)
return n
"""


MAX_SECONDS_OPTION = 86_400  # a URL's socket_timeout, health_check_interval...


@dataclass(frozen=True, kw_only=True)
class RedisUrl(Url):
    """``redis://host:port[/db][?prefix=NAME]``; keys start with ``prefix`` (default cronlab)."""

    client_url: str
    prefix: str


def parse_url(text: str) -> RedisUrl:
    """Parse ``--queue redis://…``; ConfigError names a malformed URL."""
    parts, _ = urls.split(text, "Redis")
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ConfigError(f"malformed Redis URL {redact(text)!r}: expected redis://host:6379")
    query = dict(parse_qsl(parts.query))
    prefix = query.pop("prefix", "cronlab")
    client = urlunsplit(parts._replace(query=urlencode(query)))
    _check_options(client, text)
    return RedisUrl(client_url=client, prefix=prefix, text=text)


def _check_options(client: str, text: str) -> None:
    """The client's own reading of the URL's options (``db``, ``socket_timeout``...), now
    rather than at the first connection: a value it cannot read, or a time that is not a
    positive finite number of seconds, is a ConfigError naming the option."""
    from redis.connection import parse_url as client_options

    shown = redact(text)
    try:
        found = client_options(client)  # type: ignore[no-untyped-call]
    except ValueError as exc:  # "Invalid value for 'db' in connection URL."
        why = urls.scrub(str(exc), text).rstrip(".")
        raise ConfigError(f"malformed Redis URL {shown!r}: {why[:1].lower()}{why[1:]}") from None
    for name, value in found.items():
        if _bad_seconds(name, value):
            raise ConfigError(
                f"malformed Redis URL {shown!r}: {name} must be seconds, more than 0 "
                f"(0 too for an interval) and at most {MAX_SECONDS_OPTION:,}"
            )


def _bad_seconds(name: str, value: object) -> bool:
    """A ``*_timeout`` that is not in (0, MAX] or an ``*_interval`` not in [0, MAX]."""
    if not name.endswith(("_timeout", "_interval")) or not isinstance(value, float | int):
        return False
    low_ok = value >= 0 if name.endswith("_interval") else value > 0
    return not (low_ok and value <= MAX_SECONDS_OPTION)  # (nan fails both)


def connect(url: RedisUrl, timeout_s: float = 5.0) -> redis.Redis:
    """A client that answered PING, or a one-line ``BackendUnavailable`` naming the server."""
    client = redis.Redis.from_url(
        url.client_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise BackendUnavailable(f"redis {url.shown} unreachable: {exc}") from exc
    return client


def stream_keys(prefix: str) -> tuple[str, str, str]:
    """The keys a queue with ``prefix`` keeps: the stream, what split or partly acked entries
    have left, and the count of messages on the stream."""
    return (f"{prefix}:tasks", f"{prefix}:tasks:left", f"{prefix}:tasks:depth")


class OutboxTable(Protocol):
    """A store's queue table as the relay's outbox, and where claimed envelopes' task
    columns are read (``SqlQueue``)."""

    def outbox_take(
        self, limit: int, now_ms: int, publish: Callable[[list[Envelope]], None]
    ) -> int:
        """``publish`` up to ``limit`` visible envelopes, then delete them (a failed publish
        deletes nothing; no write lock is held while it runs). Returns the messages taken."""
        ...

    def messages(
        self,
        envelopes: Sequence[tuple[int, Sequence[int], int, int]],
        drop: Callable[[list[Message]], object],
    ) -> list[Message]:
        """``(envelope id, task ids, receives, attempt)`` deliveries → their messages; those
        whose task is gone go to ``drop``."""
        ...

    def depth(self) -> int:
        """Messages in the outbox."""
        ...


class Outbox(Protocol):
    """The SQL store the stream is fed from: its queue table, and the leader's reconcile."""

    @property
    def queue(self) -> OutboxTable:
        """The outbox table."""
        ...

    def reconcile(self, now_ms: int, epoch: int, *, queued_elsewhere: Collection[int] = ()) -> int:
        """``SqlDispatch.reconcile``: ``queued_elsewhere`` are the task ids on the stream."""
        ...


@dataclass
class _Held:
    """A delivery this process holds: stream entry, consumer, deliveries, task ids left."""

    entry: bytes
    consumer: str
    deliveries: int
    left: list[int]


class RedisQueue:
    """``ports.Queue`` on a Redis stream, fed from the store's outbox."""

    def __init__(self, url: RedisUrl, outbox: Outbox, clock: Clock, retry_s: float = 60.0) -> None:
        self.url, self._outbox, self._clock, self.retry_s = url, outbox, clock, retry_s
        self._redis = connect(url)
        self.keys = stream_keys(url.prefix)
        self.stream = self.keys[0]
        # (envelope, task, receives) of each message this process holds → its delivery
        self._held: dict[tuple[int, int, int], _Held] = {}
        self._claim = self._redis.register_script(CLAIM_SCRIPT)
        self._ack = self._redis.register_script(ACK_SCRIPT)
        self._append = self._redis.register_script(PUBLISH_SCRIPT)
        self._touch = self._redis.register_script(TOUCH_SCRIPT)
        self._call(self._ensure_group)

    def close(self) -> None:
        self._redis.close()

    def drop(self) -> None:
        """Delete the stream and its bookkeeping (tests and benchmarks clean up with it)."""
        self._call(self._redis.delete, *self.keys)

    # -- ports.Queue ------------------------------------------------------------------------

    @property
    def in_store(self) -> bool:
        return False  # the store's outbox feeds the stream; a batch settles nothing there

    def committed(self, messages: Sequence[Message]) -> None:
        """Ack every delivery on the stream once the store committed their batch (whose
        retries wait in the outbox, due after their backoff). A worker that dies between the
        two leaves its deliveries pending: they come back after the visibility timeout, and
        a worker settles them as stale."""
        self.ack(messages)

    def claim(self, worker: str, limit: int, visibility_ms: int) -> list[Message]:
        """Entries pending longer than ``visibility_ms`` first, then new ones; the last entry
        split to fit ``limit``."""
        if limit < 1:
            return []
        try:
            flat = self._call(self._claim, self.keys[:2], [GROUP, worker, limit, visibility_ms])
        except redis.ResponseError as exc:  # an entry this release cannot read
            raise ConfigError(
                f"redis {self.url.shown}: {str(exc).partition(' script:')[0]}"
            ) from exc
        deliveries = []
        for i in range(0, len(flat), 6):
            entry, count, env, attempt, prior, ids = flat[i : i + 6]
            tasks = [int(t) for t in ids.split(b",")]
            receives = int(prior) + int(count)
            held = _Held(entry, worker, int(count), tasks)
            for t in tasks:
                self._held[(int(env), t, receives)] = held
            deliveries.append((int(env), tasks, receives, int(attempt)))
        return self._outbox.queue.messages(deliveries, self.ack)

    def ack(self, messages: Sequence[Message]) -> int:
        """Settle the deliveries given, only where they are still the latest."""
        acked: dict[int, tuple[_Held, set[int]]] = {}
        for m in messages:
            held = self._held.pop(_delivery(m), None)
            if held is not None:
                acked.setdefault(id(held), (held, set()))[1].add(m.task_id)
        by_consumer: dict[str, list[Any]] = {}
        for held, tasks in acked.values():
            held.left = [t for t in held.left if t not in tasks]
            args = [held.entry, held.deliveries, len(tasks), ",".join(map(str, held.left))]
            by_consumer.setdefault(held.consumer, []).extend(args)
        return sum(
            int(self._call(self._ack, self.keys, [GROUP, consumer, *args]))
            for consumer, args in by_consumer.items()
        )

    @contextlib.contextmanager
    def holding(
        self, groups: Sequence[Sequence[Message]], visibility_ms: int
    ) -> Iterator[Sequence[Sequence[Message]]]:
        """Every group, with the visibility heartbeat: while the block runs, every
        ``visibility_ms / 3`` the entries of these deliveries are touched (idle time reset,
        count kept) as long as this delivery still holds them, so no one else receives them
        however long the handlers take. A touch that fails is not fatal: the delivery may come
        back, and a worker settles a stale delivery without running it."""
        messages = [m for g in groups for m in g]
        held = {id(h): h for m in messages if (h := self._held.get(_delivery(m)))}.values()
        by_consumer: dict[str, list[Any]] = {}
        for h in held:
            by_consumer.setdefault(h.consumer, []).extend([h.entry, h.deliveries])
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(max(visibility_ms, 3) / 3000):
                for consumer, args in by_consumer.items():
                    with contextlib.suppress(BackendUnavailable, redis.RedisError):
                        self._call(self._touch, [self.stream], [GROUP, consumer, *args])

        thread = threading.Thread(target=beat, name="cronlab-visibility", daemon=True)
        thread.start()
        try:
            yield groups
        finally:
            stop.set()
            thread.join()

    def reconcile(self, now_ms: int, epoch: int) -> int:
        """Enqueue again, fenced by ``epoch``, the tasks DISPATCHED for a while whose stream
        entry is gone (AOF ``everysec``, a failover after the relay): the store's candidates
        less every task id on the stream or in the outbox; then relay them. The stream is read
        first: a task absent from it is DONE (the store commits before the ack deletes its
        entry), in the outbox, or lost; one relayed meanwhile is sent twice, which a worker
        settles as a stale delivery. Skipped while the stream holds more than
        ``RECONCILE_MAX_ENTRIES`` entries. Returns how many were enqueued."""
        on_stream = self._stream_task_ids()
        if on_stream is None:
            return 0
        n = self._outbox.reconcile(now_ms, epoch, queued_elsewhere=on_stream)
        if n:
            self.relay()
        return n

    def depth(self) -> int:
        """Messages on the stream not yet acked, plus those in the outbox."""
        on_stream = int(self._call(self._redis.get, self.keys[2]) or 0)
        return on_stream + self._outbox.queue.depth()

    # -- the outbox relay -------------------------------------------------------------------

    def relay(self) -> int:
        """Publish every visible outbox envelope to the stream, deleting it from the outbox
        once published. Returns the messages published."""
        now, total = self._clock.now_ms(), 0
        while n := int(self._outbox.queue.outbox_take(RELAY_BATCH, now, self._publish)):
            total += n
            if n < RELAY_BATCH:
                break
        if total:
            self._call(self._redis.publish, wakeups.channel(self.url.prefix), "")
        return total

    def waiter(self) -> Waiter | None:
        """A subscription to "entries published" (pub/sub on ``<prefix>:wake``)."""
        return wakeups.RedisWaiter(self._redis, self.url.prefix)

    # -- Redis requests ---------------------------------------------------------------------

    def _stream_task_ids(self) -> set[int] | None:
        """Every task id an entry on the stream still holds (None: too many entries to read
        now). Read outside the store's transaction: the write lock is not held meanwhile."""
        if int(self._call(self._redis.xlen, self.stream)) > RECONCILE_MAX_ENTRIES:
            return None
        ids: set[int] = set()
        left = self._call(self._redis.hgetall, self.keys[1])  # a split entry holds only these
        start = "-"
        while True:
            chunk = self._call(self._redis.xrange, self.stream, start, "+", RECONCILE_PAGE)
            for entry, fields in chunk:
                ids.update(int(t) for t in left.get(entry, fields[b"ids"]).split(b","))
            if len(chunk) < RECONCILE_PAGE:
                return ids
            start = "(" + chunk[-1][0].decode()

    def _ensure_group(self) -> None:
        try:
            self._redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _publish(self, envelopes: Iterable[Envelope]) -> None:
        args: list[Any] = []
        for env, tasks, attempt in envelopes:
            args += [env, attempt, ",".join(map(str, tasks)), len(tasks)]
        if args:
            self._call(self._append, [self.stream, self.keys[2]], args)

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
                    raise BackendUnavailable(f"redis {self.url.shown} unreachable: {exc}") from exc
                time.sleep(delay)
                delay = min(2.0, delay * 2)


def _delivery(m: Message) -> tuple[int, int, int]:
    """One delivery of one message: messages of an outbox envelope share its id."""
    return (m.id, m.task_id, m.receives)
