"""Wake-ups: a process that waits for work is told when it comes instead of polling for it.

Two channels (``ports.Channel``): ``due`` (a task was added or became due sooner: the
scheduler scans) and ``queued`` (messages were queued: workers claim). One module per
technology: ``unix.py`` (datagram sockets on one machine, for SQLite), ``postgres.py``
(``LISTEN``/``NOTIFY``), ``redis.py`` (pub/sub); those two reconnect alike (``retrying.py``).
Each is best effort; every waiter keeps a fallback poll, so a lost wake-up costs latency,
never a task (``docs/engine.md``).
"""
