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
_SECRET_WORDS = r"(?:password|passwd|pass|sslpassword|token|secret)"
_SECRET_PARAM = re.compile(rf"([?&]{_SECRET_WORDS}=)[^&#]*", re.I)
# libpq's keyword form: ``host=h password=pw`` or ``password = 'p w'`` (quotes, \' escapes)
_SECRET_KEYWORD = re.compile(rf"((?:^|\s){_SECRET_WORDS}\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)", re.I)
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.I)
# (a scheme is short: an unbounded one made this quadratic in a long run of letters)
_URL_IN_TEXT = re.compile(r"\b[a-z][a-z0-9+.-]{0,30}://[^\s'\"]+", re.I)
_ENCODE = "/?#@"  # what a password must %-encode: urllib and libpq cut the URL there


def _secret_span(text: str, user: bool = False) -> tuple[int, int, bool] | None:
    """Where a password may sit in ``text``: ``(start, end, after_at)``. With an ``@``, what
    lies between the first ``:`` after ``scheme://`` (or the start, with ``user``: the user
    too) and the LAST ``@`` — an unencoded ``/``, ``?``, ``#`` or ``@`` in the password would
    otherwise end the userinfo early and show the rest. Without one, a port that is not a
    number (``scheme://user:password`` with the ``@host`` forgotten). SQLite URLs have none."""
    head = _SCHEME.match(text)
    if head is not None and head.group(1).lower() == "sqlite":
        return None
    start = head.end() if head else 0
    at = text.rfind("@")
    if at >= start:
        colon = text.find(":", start, at)
        if user:
            return (start, at, True)
        return (colon + 1, at, True) if colon >= 0 else None
    if head is None:
        return None
    authority = re.split(r"[/?#]", text[start:], maxsplit=1)[0]
    offset = start
    for host in authority.split(","):  # libpq takes host:port,host:port
        port_at = host.rfind(":")
        port = host[port_at + 1 :]
        if port_at > host.rfind("]") and port and not (port.isascii() and port.isdigit()):
            return (offset + port_at + 1, offset + len(host), False)
        offset += len(host) + 1
    return None


def redact(url: str, *, user: bool = True) -> str:
    """``url`` fit for a message or a log: a password in the user part (``user=False``: the
    whole user part), a port that may be one, the values of ``password``, ``sslpassword``,
    ``token``, ``secret``... parameters, and those of a libpq keyword string
    (``host=h password=pw``) become ``***``."""
    span = _secret_span(url, user=not user)
    if span is not None:
        url = f"{url[: span[0]]}***{url[span[1] :]}"
    url = _SECRET_PARAM.sub(r"\1***", url)
    return url if "://" in url else _SECRET_KEYWORD.sub(r"\1***", url)


def redact_text(text: str) -> str:
    """``text`` (a message that may quote URLs or a libpq keyword string anywhere, as click's
    own "invalid value" messages do) with each one's secrets as ``***``."""
    text = _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
    return _SECRET_KEYWORD.sub(r"\1***", text)


def _secrets(url: str) -> list[str]:
    """Each secret in ``url`` as given and %-decoded (keyword values unquoted too)."""
    found = [m.group(0).partition("=")[2] for m in _SECRET_PARAM.finditer(url)]
    found += [m.group(2) for m in _SECRET_KEYWORD.finditer(url)]
    found += [s.strip("'").replace("\\'", "'") for s in found if s.startswith("'")]
    span = _secret_span(url)
    if span is not None:
        found.append(url[span[0] : span[1]])
    return found + [unquote(s) for s in found]


def scrub(message: str, url: str) -> str:
    """``message`` (a driver's error about ``url``) with ``url`` redacted and each secret in
    it, as given or %-decoded, replaced by ``***`` wherever the driver echoed it."""
    text = message.replace(url, redact(url))
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***") if secret else text
    return text


def check_password(text: str, what: str) -> None:
    """ConfigError (showing no secret) for a URL whose password a parser would cut short (an
    unencoded ``/ ? # @``), or whose port is not a number (the ``@host`` left out: what
    follows ``user:`` would be taken for a port and echoed)."""
    span = _secret_span(text)
    if span is None:
        return
    start, end, after_at = span
    if not after_at:
        why = "the port is not a number (a password goes as user:password@host)"
    elif any(c in text[start:end] for c in _ENCODE):
        why = "a '/', '?', '#' or '@' in the password must be %-encoded (%2F, %3F, %23, %40)"
    else:
        return
    raise ConfigError(f"malformed {what} URL {redact(text)!r}: {why}")


def split(text: str, what: str) -> tuple[SplitResult, int | None]:
    """``text`` split as urllib splits it, and its port; ConfigError naming the (redacted)
    URL when urllib cannot read its host or port (a ``[`` not closed, a port past 65535)."""
    check_password(text, what)
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
    if not sep and "=" in text:
        raise ConfigError(
            f"malformed store URL {redact(text)!r}: a libpq keyword string is not taken; "
            "give postgresql://user@host:port/db (the password in PGPASSWORD or ~/.pgpass)"
        )
    if not sep:
        raise ConfigError(f"malformed store URL {redact(text)!r}: expected sqlite:///PATH")
    if scheme not in SCHEMES:
        raise ConfigError(
            f"unknown store scheme {scheme!r} in {redact(text)!r} (supported: sqlite, postgresql)"
        )
    if scheme != "sqlite":
        check_password(text, "store")
        return StoreUrl(scheme=scheme, path=Path(), text=text)
    if not rest.startswith("/") or rest == "/":
        raise ConfigError(f"malformed store URL {redact(text)!r}: expected sqlite:///PATH")
    return StoreUrl(scheme=scheme, path=Path(rest[1:] or "/"), text=text)
