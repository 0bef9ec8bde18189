"""Pure pieces of the engine's edges: store URLs, ``--at``, takeover delays from events."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronlab import urls
from cronlab.cli.invoices import parse_at
from cronlab.exceptions import ConfigError
from cronlab.lab.invoices import tasks as invoice_tasks
from cronlab.lab.report import takeover_delays
from cronlab.ports import Event
from cronlab.urls import redact

NOW = 1_800_000_000_000


def test_sqlite_urls_absolute_and_relative() -> None:
    assert urls.parse("sqlite:////tmp/x.db").path == Path("/tmp/x.db")
    assert urls.parse("sqlite:///rel/x.db").path == Path("rel/x.db")


@pytest.mark.parametrize("text", ["sqlite://x.db", "sqlite:///", "/tmp/x.db", "mysql://h/db"])
def test_bad_store_urls_name_the_value(text: str) -> None:
    with pytest.raises(ConfigError, match="mysql" if "mysql" in text else "malformed"):
        urls.parse(text)


def test_at_relative_and_absolute() -> None:
    assert parse_at("+1.5", NOW) == NOW + 1_500
    assert parse_at("2027-01-15T00:00:00Z", NOW) == 1_799_971_200_000
    assert parse_at("2027-01-15T01:00:00+01:00", NOW) == 1_799_971_200_000


@pytest.mark.parametrize("text", ["+soon", "+inf", "+nan", "yesterday", "2027-01-15T00:00:00"])
def test_bad_at_is_a_config_error_naming_it(text: str) -> None:
    with pytest.raises(ConfigError, match="--at"):
        parse_at(text, NOW)


def test_invoice_tasks_are_keyed_by_period_and_customer() -> None:
    tasks = list(invoice_tasks(2, NOW, work_ms=5))
    assert [t.idempotency_key for t in tasks] == [
        "invoice/2027-01-15T08:00:00Z/cust-0000001",
        "invoice/2027-01-15T08:00:00Z/cust-0000002",
    ]
    assert tasks[0].payload == (
        '{"customer": "cust-0000001", "period": "2027-01-15T08:00:00Z", "work_ms": 5}'
    )


def hit(at: int, epoch: int, was_leader: bool = True) -> Event:
    return Event(kind="crash", at_ms=at, epoch=epoch, detail={"was_leader": was_leader})


def acquire(at: int, epoch: int) -> Event:
    return Event(kind="acquire", at_ms=at, epoch=epoch)


def test_takeover_delay_is_hit_to_next_higher_epoch_acquisition() -> None:
    events = [acquire(0, 1), hit(1_000, 1), acquire(11_250, 2), hit(20_000, 2, False)]
    assert takeover_delays(events) == (10.25,)


def test_a_second_hit_on_the_same_leadership_is_not_a_second_takeover() -> None:
    events = [acquire(0, 1), hit(1_000, 1), hit(1_000, 1), acquire(9_000, 2)]
    assert takeover_delays(events) == (8.0,)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
        (
            "postgresql://u@h/db?password=pw&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        (
            "postgresql://u@h/db?sslmode=require&sslpassword=pw",
            "postgresql://u@h/db?sslmode=require&sslpassword=***",
        ),
        ("redis://:pw@h:6379/0?prefix=x", "redis://:***@h:6379/0?prefix=x"),
        ("redis://h:6379/0?Token=pw", "redis://h:6379/0?Token=***"),
        ("etcd://h:2379/cronlab", "etcd://h:2379/cronlab"),
        ("sqlite:////tmp/a@b:c.db", "sqlite:////tmp/a@b:c.db"),
    ],
)
def test_a_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    """Bug 11: a password given as ``?password=`` was printed in errors."""
    assert redact(url) == shown
    assert "pw" not in redact(url)


@pytest.mark.parametrize(
    ("message", "url"),
    [
        ('in URI: "postgresql://u:hunter2@[::1/x"', "postgresql://u:hunter2@[::1/x"),
        ('invalid percent-encoded token: "hunter2%zz"', "postgresql://u:hunter2%zz@h/x"),
        ("auth failed for hunter2!", "postgresql://u@h/x?sslmode=require&password=hunter2%21"),
    ],
)
def test_a_driver_message_is_scrubbed_of_the_url_and_its_secrets(message: str, url: str) -> None:
    """Issue 13: libpq echoes the URI it cannot parse, or the token it choked on."""
    assert "hunter2" not in urls.scrub(message, url) and "***" in urls.scrub(message, url)


def test_a_malformed_url_error_shows_no_password() -> None:
    with pytest.raises(ConfigError) as info:
        urls.parse("mysql://u:pw@h/db")
    assert "pw" not in str(info.value) and "mysql" in str(info.value)


@pytest.mark.parametrize(
    "url", ["etcd://root:hunter2@127.0.0.1:2379", "etcd://root@127.0.0.1:2379"]
)
def test_an_etcd_url_with_credentials_is_refused_not_ignored(url: str) -> None:
    """Issue 27 ("also seen"): credentials in an etcd URL were hidden in messages but never
    sent to etcd — an election that seemed authenticated was not. cronlab's etcd client
    has no authentication: such a URL is refused in one line, the password not shown."""
    from cronlab.election.etcd import parse_url

    with pytest.raises(ConfigError, match="does not authenticate") as caught:
        parse_url(url)
    assert "hunter2" not in str(caught.value)
