"""The rules every cronlab server follows that need no web framework: which names are this
machine's, which ``Host`` headers a loopback server answers (no DNS rebinding), how a token is
compared, and the security headers (``guard.py`` applies them to the lab and the console,
``metrics/server.py`` to the metrics port)."""

from __future__ import annotations

import hmac
import ipaddress

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
API_CSP = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_hosts(bound: str) -> list[str]:
    """The ``Host`` names a server bound to the loopback address ``bound`` answers."""
    return [*LOOPBACK_NAMES, bound, f"[{bound}]"]


def host_name(header: str) -> str:
    """A ``Host`` header without its port (``[::1]:80`` → ``[::1]``), lower case."""
    name = header.strip().lower()
    if name.startswith("["):
        return name.partition("]")[0] + "]"
    return name.partition(":")[0]


def token_matches(given: str, token: str) -> bool:
    """``given`` is ``token`` (compared in constant time)."""
    return hmac.compare_digest(given.encode(), token.encode())


def bearer(authorization: str) -> str:
    """The token of an ``Authorization: Bearer TOKEN`` header, or ""."""
    return authorization[7:] if authorization.lower().startswith("bearer ") else ""
