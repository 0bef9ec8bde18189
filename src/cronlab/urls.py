"""Store URLs: ``sqlite:///PATH`` (absolute: ``sqlite:////abs/path``; relative: ``sqlite:///rel``)
or ``postgresql://user@host:port/db`` (``path`` is then empty; the URL goes to psycopg as is).

Election (``etcd://``) and queue (``redis://``) URLs are parsed in ``cronlab.distributed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

from cronlab.exceptions import ConfigError

SCHEMES = ("sqlite", "postgresql", "postgres")
_SECRET_PARAM = re.compile(r"([?&](?:password|passwd|pass|sslpassword|token|secret)=)[^&#]*", re.I)
_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://[^/?#@:]*):[^/?#@]*@", re.I)


def redact(url: str) -> str:
    """``url`` fit for a message or a log: a password in the user part and the values of
    ``password``, ``sslpassword``, ``token``, ``secret``... parameters become ``***``."""
    return _SECRET_PARAM.sub(r"\1***", _USERINFO.sub(r"\1:***@", url))


def scrub(message: str, url: str) -> str:
    """``message`` (a driver's error about ``url``) with ``url`` redacted and each secret in
    it, as given or %-decoded, replaced by ``***`` wherever the driver echoed it."""
    text = message.replace(url, redact(url))
    found = _USERINFO.match(url)
    secrets = [m.group(0).partition("=")[2] for m in _SECRET_PARAM.finditer(url)]
    if found:
        secrets.append(url[len(found.group(1)) + 1 : found.end() - 1])
    for secret in sorted(secrets + [unquote(s) for s in secrets], key=len, reverse=True):
        text = text.replace(secret, "***") if secret else text
    return text


def split(text: str, what: str) -> tuple[SplitResult, int | None]:
    """``text`` split as urllib splits it, and its port; ConfigError naming the (redacted)
    URL when urllib cannot read its host or port (a ``[`` not closed, a port past 65535)."""
    try:
        parts = urlsplit(text)
        return parts, parts.port
    except ValueError as exc:
        why = scrub(str(exc), text)
        why = why[:1].lower() + why[1:]
        raise ConfigError(f"malformed {what} URL {redact(text)!r}: {why}") from None


@dataclass(frozen=True, kw_only=True)
class Url:
    """A parsed URL; ``text`` as given, ``shown`` as messages show it (no secrets)."""

    text: str

    @property
    def shown(self) -> str:
        return redact(self.text)


@dataclass(frozen=True, kw_only=True)
class StoreUrl(Url):
    """A parsed store URL."""

    scheme: str
    path: Path


def parse(text: str) -> StoreUrl:
    """Parse ``--store``; ConfigError names an unknown scheme or a malformed URL."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ConfigError(f"malformed store URL {redact(text)!r}: expected sqlite:///PATH")
    if scheme not in SCHEMES:
        raise ConfigError(
            f"unknown store scheme {scheme!r} in {redact(text)!r} (supported: sqlite, postgresql)"
        )
    if scheme != "sqlite":
        return StoreUrl(scheme=scheme, path=Path(), text=text)
    if not rest.startswith("/") or rest == "/":
        raise ConfigError(f"malformed store URL {redact(text)!r}: expected sqlite:///PATH")
    return StoreUrl(scheme=scheme, path=Path(rest[1:] or "/"), text=text)
