"""The engine's ports: every piece of I/O sits behind one of these protocols.

Time is integer epoch milliseconds everywhere here. Backends live in role-named folders
(``stores/sql/`` with its dialects ``stores/sqlite.py`` and ``stores/postgres.py``,
``election/store.py``, ``queues/store.py``); ``stores/memory.MemoryStore`` (SQLite
``:memory:`` through the same code) and ``runtime/clock.FakeClock`` ship in the package.

Statuses of a task: ``PENDING`` → ``DISPATCHED`` → ``DONE`` | ``FAILED``; ``MISSED`` when a
scheduler with in-memory timers skipped its trigger (the documented anti-pattern); ``SKIPPED``
when a schedule's policy chose not to run an occurrence (overlap, catch-up, pause, removal),
or an operator cancelled a task that had not run (``TaskControl.cancel_task``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypedDict

from cronlab.core.lease import LeaseState
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConfigError

STATUSES = ("PENDING", "DISPATCHED", "DONE", "FAILED", "MISSED", "SKIPPED")
# The one list of outcomes: a run's (``ok``: its effect applied, ``noop``: an idempotent
# duplicate, ``error``: failed and retried, ``failed``: failed for good), then what the run
# history shows of an occurrence that did not run, or has not yet (``RunRecord``).
OUTCOMES = ("ok", "noop", "error", "failed", "skipped", "missed", "due", "queued")
RUN_OUTCOMES = OUTCOMES[:2]  # a run that completed
# How a run ends, in the worker's counts and ``RunCounts`` (its keys, in this order): a run's
# outcome, or ``stale`` (its delivery superseded: it ran nothing).
RUN_ENDINGS = (*OUTCOMES[:4], "stale")


# A keyed insert that found its key held, then its holder gone (deleted by the retention before
# it could be read back), inserts again at most this many times (the key is free by then).
KEY_TRIES = 5


class NewTask(NamedTuple):
    """A task to add; a second task with the same ``idempotency_key`` is ignored.

    Immutable like the other port values, and a tuple because a seed builds millions.
    """

    idempotency_key: str
    task: str
    trigger_ms: int
    payload: str = "{}"
    schedule: str | None = None


@dataclass(frozen=True, kw_only=True)
class StoredTask:
    """A stored task as a dispatcher sees it."""

    id: int
    idempotency_key: str
    task: str
    payload: str
    trigger_ms: int
    status: str = "PENDING"
    attempts: int = 0
    epoch: int | None = None


class Message(NamedTuple):
    """A queue message: one dispatched copy of a task, received ``receives`` times.

    ``attempt`` grows on each retry after an error; ``receives`` on every delivery, so
    ``receives - attempt`` deliveries were abandoned (their worker died before acking).
    ``execution_id`` is for stores that record a start row before running (0 otherwise).
    ``id`` names the queue entry: messages enqueued together may share it (an envelope).
    Immutable like the other port values, and a tuple because workers build millions.
    """

    id: int
    task_id: int
    idempotency_key: str
    task: str
    payload: str
    trigger_ms: int
    receives: int = 1
    attempt: int = 1
    execution_id: int = 0


@dataclass(frozen=True, kw_only=True)
class Lease:
    """A held lease: ``epoch`` is the fencing token every dispatch carries."""

    holder: str
    epoch: int
    expires_ms: int


@dataclass(frozen=True, kw_only=True)
class ProcessInfo:
    """A process the cluster started: role ``scheduler`` or ``worker``, its index and pid, and
    where that pid is it (``place``: machine and boot, PID namespace, start time)."""

    role: str
    index: int
    pid: int
    owner: str
    started_ms: int
    exited_ms: int | None = None
    heartbeat_ms: int | None = None  # when it last said it was alive
    place: str | None = None  # where its pid means it (runtime/proc.py); None: not known


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something the control plane or chaos did: ``acquire``, ``crash``, ``pause``, ``fenced`` …"""

    kind: str
    at_ms: int
    holder: str | None = None
    epoch: int | None = None
    pid: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Retry:
    """A failing handler runs again after ``base_ms · 2^(attempt-1)`` until ``max_attempts``."""

    max_attempts: int = 5
    base_ms: int = 500
    cap_ms: int = 60_000

    def delay_ms(self, attempt: int) -> int:
        return int(min(self.cap_ms, self.base_ms * 2 ** max(0, attempt - 1)))


class Tx(Protocol):
    """The open transaction a handler writes through (committed together with the ack).

    SQL takes ``?`` (values in a sequence) or ``:name`` (a mapping) on every store, or the
    driver's own style; ``dialect`` (``"sqlite"`` or ``"postgresql"``) says which store it is.
    """

    dialect: str

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        """Run one bound statement; return the number of rows it changed."""
        ...

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Run one bound statement; return the rows it produced (a SELECT, or RETURNING)."""
        ...

    def add_task(self, task: NewTask) -> int:
        """Insert a follow-up task in this transaction; 0 when its key already exists."""
        ...

    def holder(self, key: str) -> tuple[int, str, str, int] | None:
        """The task holding idempotency key ``key``, as this transaction sees it: (id, task
        name, payload, due ms), or None."""
        ...


class Run(Protocol):
    """How a worker runs its batch's messages (``handlers.Runner``; ``execution.Plain`` makes
    one of a bare ``fn(message, tx) -> bool``)."""

    def __call__(self, m: Message, tx: Tx) -> bool:
        """Run ``m``'s handler inside the batch transaction: True when its effect was applied,
        False when it was a no-op (an idempotent duplicate); raising means it failed."""
        ...

    def retry(self, task: str, default: Retry) -> Retry:
        """Task ``task``'s own retry policy, else ``default`` (the worker's)."""
        ...

    def prepare(self, m: Message) -> Callable[[Tx], bool]:
        """The run of ``m`` as a step, with what it can do before the write lock done now:
        only the handler's own work then runs inside the transaction."""
        ...

    def prepare_batch(
        self, messages: Sequence[Message], dialect: str
    ) -> Callable[[Tx], list[bool]] | None:
        """Every message as one step, when each task has a batch form; None otherwise."""
        ...

    def gather(self, runs: Sequence[tuple[Any, Tx]]) -> list[bool | BaseException]:
        """The async steps among ``prepare``'s, each with its queued writes, run at once on one
        event loop; each one's result or exception, in order."""
        ...


class Ended(NamedTuple):
    """A run of a message that ended and was recorded: when its handler started and ended,
    and its outcome (``ok``, ``noop``, ``error``, ``failed``) with its error, if it failed."""

    message: Message
    start_ms: int
    end_ms: int
    outcome: str
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Batch:
    """Messages a worker claimed, and how to run them (``execution.execute``). Once the batch has
    committed, ``observe`` (the worker's metrics) is given its recorded runs, and ``failed``
    (the worker's log) those that failed."""

    worker: str
    messages: Sequence[Message]
    run: Run
    retry: Retry
    now: Callable[[], int]
    checked: bool = True  # False: run every delivery, live or stale (``--fencing off``)
    observe: Callable[[Sequence[Ended]], None] | None = None
    failed: Callable[[Sequence[Ended]], None] | None = None


# A recorded run: its message, start and end instants, outcome and error.
Record = tuple[Message, int, int, str, str | None]


@dataclass(frozen=True)
class Ending:
    """What a batch's runs ended in, for its store to write before it commits."""

    records: Sequence[Record]
    done: Sequence[int]  # the ``--election off`` copies that ran
    acks: Sequence[Message]
    retries: Sequence[tuple[Message, int]]  # each with the instant its retry is due


class BatchTx(Protocol):
    """A store's open transaction, as a batch's runs use it (``Store.batch_transaction``)."""

    @property
    def dialect(self) -> str:
        """The store's SQL flavour (what a batch form and a ``QueuedTx`` are told)."""
        ...

    @property
    def tx(self) -> Tx:
        """What handlers write through: inside a ``savepoint``, into it."""
        ...

    def live(self, messages: Sequence[Message], checked: bool) -> tuple[list[bool], set[int]]:
        """Mark the messages' tasks started; which messages run (each task once, at the
        attempt its message carries), and the tasks among them that are ``--election off``
        copies (these run whatever their state, and are marked DONE by ``finish``).
        ``checked=False`` (``--fencing off``): every delivery runs, as copies."""
        ...

    def savepoint(self) -> AbstractContextManager[None]:
        """A run's writes through ``tx``: an exception inside undoes them alone."""
        ...

    def is_connection_error(self, exc: BaseException) -> bool: ...

    def failed(self, task_id: int, error: str, final: bool) -> None:
        """A run failed: its task becomes FAILED (``final``) or waits for its retry."""
        ...

    def finish(self, ending: Ending) -> None:
        """Write the run records, mark the copies that ran DONE, settle the acks and retries
        (each retry due at the instant given)."""
        ...


# Runs a function in a batch's transaction, once, and returns what it returned.
BatchTransaction = Callable[[Callable[[BatchTx], dict[str, int]]], dict[str, int]]


class Clock(Protocol):
    """Wall time in integer epoch milliseconds, and a monotonic clock for deadlines."""

    def now_ms(self) -> int:
        """The current wall time (it may jump: NTP, an operator, a VM resumed)."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never jumps (deadlines are measured on it)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block (or, for a fake clock, advance) ``seconds``."""
        ...


Channel = Literal["due", "queued"]  # a wake-up's news: tasks may be due / messages queued


class Waiter(Protocol):
    """A process's subscription to one wake-up channel of a backend, held for its life.

    Best effort, never needed for correctness: a waiter may wake for nothing or miss a
    notification (its caller's fallback poll then finds the work). A notification sent while
    the process was busy makes its next ``wait`` return at once, so none falls between a
    caller's empty look and its wait.
    """

    def wait(self, timeout_s: float) -> bool:
        """Block until a notification or ``timeout_s``; True if notified."""
        ...

    def close(self) -> None: ...


class BatchStore(Protocol):
    """What the executor needs of a store (``execution.execute``)."""

    @property
    def dialect(self) -> str:
        """The store's SQL flavour: ``"sqlite"`` or ``"postgresql"``."""
        ...

    def batch_transaction(self, work: Batch, *, in_store: bool = True) -> BatchTransaction:
        """How a worker batch's ONE transaction is opened (``execution.execute`` runs the batch
        in it): the runs' effects, the task updates, the execution records and the acks commit
        together or not at all, never replayed after a lost connection. ``in_store``: the
        messages came from the store's own queue table, which the transaction settles (else a
        queue elsewhere acks them once it committed, and a retry waits in the store's outbox)."""
        ...


class Store(BatchStore, Protocol):
    """Tasks, fencing, executions, the process registry and the event log.

    Every write method is one transaction: it happens completely or not at all.
    """

    def missing(self) -> bool:
        """True when the database was deleted or replaced under this store."""
        ...

    def add_tasks(self, tasks: Iterable[NewTask]) -> int:
        """Insert tasks as PENDING; duplicates of an existing key are ignored. Returns inserted."""
        ...

    def dispatch_due(
        self, now_ms: int, limit: int, epoch: int, *, clock: Callable[[], int] | None = None
    ) -> int:
        """Claim up to ``limit`` PENDING tasks with ``trigger_ms <= now_ms`` (oldest first);
        return how many. ``clock``: read for "now" instead, once the transaction holds its
        locks (a dispatch that waited for them judges by when it ran).

        In one transaction: check ``epoch`` still holds the lease (else raise ``FencedError``
        and write nothing), mark them DISPATCHED with ``epoch``, enqueue one message each.
        """
        ...

    def next_due_ms(self, after_ms: int) -> int | None:
        """The earliest trigger time of a PENDING task later than ``after_ms`` (None: none)."""
        ...

    def counts(self) -> dict[str, int]:
        """Tasks by status (every status in ``STATUSES`` present, zero when none)."""
        ...

    def register_process(self, info: ProcessInfo) -> None:
        """Record a started process under its owner name. Processes in one slot (role and
        index) from two clusters are two rows; the slot's exited rows are dropped."""
        ...

    def process_exited(self, owner: str, now_ms: int) -> None:
        """Record that the process registered as ``owner`` has exited."""
        ...

    def processes(self) -> list[ProcessInfo]:
        """Every registered process, ordered by role, index and start."""
        ...

    def record_event(self, event: Event) -> None:
        """Append to the event log."""
        ...

    def events(self) -> list[Event]:
        """The event log in time order."""
        ...

    def record_sample(self, now_ms: int, depth: int) -> None:
        """Append a queue-depth sample (the leader writes one per scan)."""
        ...


class LeaseTable(Protocol):
    """A lease row kept in a store: the atomic conditional updates the store elector uses."""

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> LeaseState | None:
        """Apply ``core.lease.acquire_or_renew`` atomically; None when another holds it."""
        ...

    def lease_release(self, owner: str) -> None:
        """Apply ``core.lease.release`` atomically."""
        ...

    def lease_read(self) -> LeaseState:
        """The lease row as it is now."""
        ...


class QueueTable(Protocol):
    """A queue kept in a store: what ``queues/store.py`` builds on."""

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        """Claim visible messages (conditional update), invisible until ``now + visibility``."""
        ...

    def queue_ack(self, messages: Sequence[Message]) -> int:
        """Delete the messages whose last delivery is the one given. Returns count."""
        ...

    def queue_release(self, messages: Sequence[Message]) -> int:
        """Give the envelopes of ``messages`` back, where the delivery given is still their
        latest: visible now, their receive uncounted. Returns the envelopes given back."""
        ...

    def queue_depth(self) -> int:
        """Messages not yet acked."""
        ...

    def reconcile(self, now_ms: int, epoch: int) -> int:
        """Enqueue again, fenced by ``epoch``, DISPATCHED tasks whose message is gone."""
        ...

    def waiter(self, channel: Channel) -> Waiter | None:
        """A subscription to ``channel`` on this table's database (None: no wake-ups)."""
        ...


class LeaseElector(Protocol):
    """Leader election with fencing epochs."""

    def acquire_or_renew(self, owner: str, ttl_ms: int) -> Lease | None:
        """Acquire a free/expired lease (epoch + 1) or renew our own; None if another holds it."""
        ...

    def release(self, owner: str) -> None:
        """Give the lease up now if ``owner`` holds it."""
        ...

    def current(self) -> Lease | None:
        """The unexpired lease, or None."""
        ...


class Queue(Protocol):
    """At-least-once delivery with a visibility timeout."""

    def claim(self, worker: str, limit: int, visibility_ms: int) -> list[Message]:
        """Up to ``limit`` visible messages, invisible to others for ``visibility_ms``."""
        ...

    def ack(self, messages: Sequence[Message]) -> int:
        """Delete delivered messages (only the delivery that was claimed last). Returns count."""
        ...

    def depth(self) -> int:
        """Messages not yet acked (visible or in flight)."""
        ...

    def holding(
        self, groups: Sequence[Sequence[Message]], visibility_ms: int
    ) -> AbstractContextManager[Sequence[Sequence[Message]]]:
        """The claimed deliveries as the transactions that will run them (``groups``, in
        order) → the groups to run now. While the block runs, no one else receives their
        deliveries, however long it takes (a visibility heartbeat, or the running transaction's
        locks); a group the queue cannot hold that long is given back at once instead, visible
        and its receive uncounted (it never started). After the block, unacked deliveries come
        back after ``visibility_ms``."""
        ...

    @property
    def in_store(self) -> bool:
        """True when the messages live in the store's own queue table, which a batch's
        transaction settles; False for a queue elsewhere (``committed`` acks them there)."""
        ...

    def committed(self, messages: Sequence[Message]) -> None:
        """A batch holding ``messages`` committed in the store: a queue elsewhere acks them
        now (a worker that dies before lets them come back, settled then as stale)."""
        ...

    def relay(self) -> int:
        """Publish what the store's outbox holds that is due (the leader calls it after each
        dispatch): a queue elsewhere's side of a dispatch. Returns the messages published."""
        ...

    def reconcile(self, now_ms: int, epoch: int) -> int:
        """Enqueue again, fenced by ``epoch``, the DISPATCHED tasks whose message this queue
        lost; returns how many (the leader calls it every ``reconcile_ms``)."""
        ...

    def waiter(self) -> Waiter | None:
        """A subscription to "messages queued" on this queue (None: it has none; poll)."""
        ...


MAX_RUNS = 100_000  # rows a history read returns at most


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One row of the run history: a run of a task (its execution record: start, end,
    attempt, worker), or an occurrence that did not run (``skipped`` by the overlap policy,
    a pause or a removal; ``missed``: no scheduler dispatched it in time) or has not yet
    (``due``: not dispatched; ``queued``: dispatched, no run recorded). ``outcome`` is one of
    ``OUTCOMES``; ``error`` is a failed run's error or a skip's reason."""

    task_id: int
    key: str
    task: str
    schedule: str | None
    occurrence_ms: int
    dispatched_ms: int | None
    start_ms: int | None
    end_ms: int | None
    attempt: int
    worker: str | None
    outcome: str
    error: str | None


@dataclass(frozen=True, kw_only=True)
class RunQuery:
    """Which history rows to read, newest occurrence first: of one ``schedule`` or ``task``
    (its name), only ``failed`` ones (outcome error or failed), occurrences at or after
    ``since_ms``, at most ``limit`` (1..``MAX_RUNS``)."""

    schedule: str | None = None
    task: str | None = None
    failed: bool = False
    since_ms: int | None = None
    limit: int = 100

    def __post_init__(self) -> None:
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_RUNS:
            raise ConfigError(f"limit must be 1..{MAX_RUNS:,}, got {self.limit!r}")


@dataclass(frozen=True, kw_only=True)
class ScheduleInfo:
    """A stored schedule and where it stands.

    ``next_fire_ms`` is the occurrence waiting as a PENDING task (None while paused);
    ``last_fire_ms`` the newest occurrence dispatched or skipped; ``last_outcome`` the status
    of the schedule's newest finished-or-skipped task (``DONE``, ``FAILED``, ``SKIPPED`` …) and
    ``last_reason`` why the newest skip happened (``overlap``, ``catchup=none`` …).
    """

    schedule: Schedule
    next_fire_ms: int | None = None
    last_fire_ms: int | None = None
    last_outcome: str | None = None
    last_reason: str | None = None
    app: str | None = None  # the App whose code declares it (None: added by hand)
    paused_note: str | None = None  # what the operator said when pausing it
    missed: int = 0  # occurrences no scheduler dispatched in time (dropped by catch-up)
    skipped: int = 0  # occurrences the overlap policy skipped


@dataclass(frozen=True, kw_only=True)
class Backfill:
    """What a backfill did: occurrences ``added`` (as ``backfill:NAME:FIRE_MS`` tasks due at
    their occurrence time) and ``existing`` ones (run, planned or backfilled already)."""

    added: int
    existing: int


@dataclass(frozen=True, kw_only=True)
class SyncReport:
    """What ``ScheduleStore.sync_schedules`` did, by schedule name."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class RunCounts(TypedDict):
    """How the runs of ``App.run_until_idle`` ended: ``ok`` (effect applied), ``noop`` (an
    idempotent duplicate), ``error`` (failed, to be retried), ``failed`` (failed for good),
    ``stale`` (a delivery no longer current, settled without running). A plain dict at run
    time, so ``counts["ok"]`` and comparing with a dict work; typed for ``mypy``."""

    ok: int
    noop: int
    error: int
    failed: int
    stale: int


class ScheduleStore(Protocol):
    """Recurring schedules kept in a store (SQLite and memory).

    Adding or changing a schedule writes its next occurrence as a PENDING task keyed by
    ``policy.occurrence_key`` in the same transaction; ``dispatch_due`` plans each due
    occurrence (``policy.plan_dispatch``, ``overlap_decision``) and materialises the following
    one inside its own fenced transaction, so a stale leader writes nothing and the unique key
    makes a second materialisation of one occurrence a no-op.
    """

    def put_schedule(
        self,
        schedule: Schedule,
        now_ms: int,
        *,
        replace: bool,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        """Insert, or with ``replace`` upsert by name; False when the same one was stored.

        Due-ness is judged once the store holds its locks: by the database server's clock,
        else by ``clock()`` read then (the caller's clock: a change that waited for the lock
        while the machine's clock jumped judges by the new time), else by ``now_ms``; so for
        ``sync_schedules``, ``pause_schedule``, ``resume_schedule`` and ``remove_schedule``.

        Without ``replace`` an existing name is a ``ConflictError`` (nothing written). A changed
        definition drops its occurrence still to come and materialises ``next_fire(now)``; one
        already due stays and runs (it was due under the definition in force at its time).
        A zone whose meaning depends on the host (``localtime``, ``core/zones.py``) is a
        ``ConfigError``, here and in ``sync_schedules`` (nothing written).
        """
        ...

    def sync_schedules(
        self,
        app: str,
        wanted: Sequence[Schedule],
        now_ms: int,
        *,
        clock: Callable[[], int] | None = None,
    ) -> SyncReport:
        """Make the schedules ``app`` declares exactly ``wanted``, in one transaction: add,
        change (as ``put_schedule`` with ``replace``) and remove (as ``remove_schedule``)
        those of ``app``'s; one added by hand, or synced under the old default name ``"app"``
        (every App's, once), is adopted, and never removed; one of another app is a
        ``ConflictError`` (nothing written)."""
        ...

    def get_schedule(self, name: str) -> ScheduleInfo:
        """One schedule; ``NotFoundError`` naming it when there is none."""
        ...

    def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, by name."""
        ...

    def pause_schedule(
        self,
        name: str,
        now_ms: int,
        note: str | None = None,
        *,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        """Stop firing: drop the occurrence still to come (one already due is recorded
        SKIPPED as it is dispatched), keeping the operator's ``note`` (at most 500
        characters). False if it was already paused. Recorded as an event ``paused``."""
        ...

    def resume_schedule(
        self, name: str, now_ms: int, *, clock: Callable[[], int] | None = None
    ) -> bool:
        """Fire again from the next fire time after ``now_ms`` (no catch-up of the pause)."""
        ...

    def remove_schedule(
        self, name: str, now_ms: int, *, clock: Callable[[], int] | None = None
    ) -> None:
        """Delete the schedule and its occurrence still to come (one already due is recorded
        SKIPPED as it is dispatched); past tasks stay as history."""
        ...

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        """Add a one-off run of the schedule's handler due now; returns its idempotency key."""
        ...

    def backfill_schedule(self, name: str, from_ms: int, to_ms: int, now_ms: int) -> Backfill:
        """Add a run of each occurrence in [from_ms, to_ms) the store does not hold (never
        materialised, or pruned), due at its occurrence time and planned by the schedule's
        overlap policy; a backwards or future range, or one of more than 1,000 occurrences,
        is a ConfigError with nothing written. Returns what was ``added`` and ``existing``."""
        ...


MAX_TASK_ID = (1 << 63) - 1  # a task id is a positive 64-bit integer (both stores)


@dataclass(frozen=True, kw_only=True)
class TaskInfo:
    """A stored task as an operator sees it (``cronlab task show``): named as a history row
    names it (``RunRecord``); ``attempts`` are the runs started so far, ``last_error`` the
    newest failed run's error or a skip's reason."""

    id: int
    key: str
    task: str
    schedule: str | None
    occurrence_ms: int
    status: str
    attempts: int
    dispatched_ms: int | None
    last_error: str | None


class TaskControl(Protocol):
    """An operator's actions on one task by id (``cronlab task``, the console).

    Each action is ONE transaction, recorded as an event (``cancelled``, ``retried``) with
    who asked (``by``) and when (``now_ms``). Not fenced: an operator is not a leader. An id
    no task has is a ``NotFoundError``; a task whose status the action does not take is a
    ``ConflictError`` naming that status, and nothing changes.
    """

    def task_info(self, task_id: int) -> TaskInfo:
        """One task; ``NotFoundError`` when there is none."""
        ...

    def cancel_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        """Settle a task that has not run, or waits for its retry, as not run: PENDING or
        DISPATCHED becomes SKIPPED with the reason ``cancelled``. Its messages still in the
        queue are taken out; one a worker holds runs nothing (the worker's live check) and
        is acked. A run going on now is waited for (its task is then DONE or FAILED: refused;
        or waiting for its retry: cancelled).
        A schedule's next occurrence cancelled: the one after it is planned (the schedule
        goes on)."""
        ...

    def retry_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        """Run a FAILED task once more, now: DISPATCHED again with a message at its next
        attempt (its ``last_error`` kept until that run ends)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Watched:
    """A schedule with alert settings, and the first fire time an alert may expect a run of."""

    schedule: Schedule
    expected_from_ms: int | None


@dataclass(frozen=True, kw_only=True)
class Alert:
    """An alert as stored: ``kind`` ``late`` or ``failing``, what it is about (``subject``: the
    late occurrence's fire ms, or the key of a failure streak's first run) and its delivery
    (``pending``, ``delivered``, ``undeliverable`` or ``none``)."""

    id: int
    schedule: str
    kind: str
    subject: str
    raised_ms: int
    detail: Mapping[str, Any] = field(default_factory=dict)
    delivery: str = "pending"
    attempts: int = 0
    delivered_ms: int | None = None
