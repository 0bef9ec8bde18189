"""Wake-ups between processes on one machine (the SQLite store): Unix datagram sockets.

A waiter binds ``<dir>/<channel>.<pid>.<n>``; a notify sends one empty datagram to every
socket of its channel there, and removes the sockets nobody holds any more (a process that
died). ``dir`` is ``$TMPDIR/cronlab-<uid>/<hash of the database's real path>``, mode 0700:
only this user's processes on this database wake each other. A directory this user does not
own, or that others may write to, turns wake-ups off (the fallback polls still run).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import select
import socket
import stat
import tempfile
from pathlib import Path

from cronlab.ports import Channel

_COUNTER = itertools.count()
_GONE = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK)


def directory(db: Path) -> Path:
    """Where the sockets of ``db``'s waiters live (the path stays short: sockets' limit)."""
    digest = hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"cronlab-{os.getuid()}" / digest


def notify(where: Path, channel: Channel) -> int:
    """Wake every waiter of ``channel`` in ``where``; returns how many were sent a datagram."""
    try:
        names = [n for n in os.listdir(where) if n.startswith(channel + ".")]
    except OSError:
        return 0  # no waiter ever started on this database
    sent = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        for name in names:
            sent += _send(s, where / name)
    return sent


def _send(s: socket.socket, path: Path) -> int:
    try:
        s.sendto(b"", str(path))
    except BlockingIOError:
        return 0  # its buffer is full of wake-ups already
    except OSError as exc:
        if exc.errno in _GONE:
            with contextlib.suppress(OSError):
                path.unlink()
        return 0
    return 1


class UnixWakeups:
    """``sqlite.Wakeups`` between the processes of one database file, through ``where``."""

    def __init__(self, where: Path) -> None:
        self.where = where

    def notify(self, channel: Channel) -> None:
        notify(self.where, channel)

    def waiter(self, channel: Channel) -> UnixWaiter | None:
        try:
            return UnixWaiter(self.where, channel)
        except OSError:
            return None  # no private directory to be woken in: the fallback polls do


class UnixWaiter:
    """``ports.Waiter`` on a datagram socket of its own in ``where``."""

    def __init__(self, where: Path, channel: Channel) -> None:
        _private_dir(where)
        self.path = where / f"{channel}.{os.getpid()}.{next(_COUNTER)}"
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a previous process with this pid died without removing it
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.setblocking(False)

    def wait(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
        if not ready:
            return False
        with contextlib.suppress(BlockingIOError):
            while True:  # one wake-up for everything sent meanwhile
                self.sock.recv(16)
        return True

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


def _private_dir(where: Path) -> None:
    """``where`` and its parent exist, belong to this user, and only this user may enter."""
    for d in (where.parent, where):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError(f"{d} is not a private directory of this user")
