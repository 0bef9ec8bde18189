"""A page on another origin drives cronlab's servers from a real browser, as issue 13 found it
could drive the lab (a form posting text/plain started a cluster and SIGKILLed its leader):
the lab's live endpoints and the console's schedule and task actions. Every attempt is refused
with 403 — each one seen, not just some — and nothing changes."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from cronlab.clock import SystemClock
from cronlab.core.policy import Schedule
from cronlab.stores.sqlite import SqliteStore

from .conftest import free_port, serve_console, serve_lab

pytestmark = pytest.mark.browser
# Two text/plain forms (their bodies made JSON by the field's name and value), each into a
# frame of its own (a second post into the same frame aborts the first), and a no-cors fetch:
# what a page may send anywhere without asking CORS.
FORMS_AND_A_FETCH = """<!doctype html><html><body>
<iframe name="one"></iframe><iframe name="two"></iframe>
<form id="first" method="post" enctype="text/plain" target="one" action="{server}{first}">
  <input name='{{"{field}":"' value='"}}'>
</form>
<form id="second" method="post" enctype="text/plain" target="two" action="{server}{second}">
  <input name='{{"action":"crash-leader","x":"' value='"}}'>
</form>
<script>
  document.getElementById("first").submit();
  setTimeout(function () {{ document.getElementById("second").submit(); }}, 300);
  fetch("{server}{fetched}", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: "{{}}"}})
    .then(function () {{ document.title = "sent"; }}, function () {{ document.title = "sent"; }});
</script>
</body></html>"""
ATTEMPTS = 3


@contextmanager
def evil_site(page_html: str) -> Iterator[str]:
    """Another origin (another port) serving the attacking page."""
    body = page_html.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def statuses_seen(browser: Browser, evil: str, watched: str) -> list[int]:
    """Open the attacking page; the status of each POST to a ``watched`` path, once all
    ``ATTEMPTS`` answered (or 10 s passed). Read from Chromium's network events: the answer
    to the fetch is blocked from the page (``Cross-Origin-Resource-Policy``), so Playwright
    reports no response for it, though the server sent one."""
    context = browser.new_context()
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    posts: set[str] = set()
    status: dict[str, int] = {}

    def sent(event: dict[str, Any]) -> None:
        if event["request"]["method"] == "POST" and watched in event["request"]["url"]:
            posts.add(event["requestId"])

    cdp.on("Network.requestWillBeSent", sent)
    cdp.on(
        "Network.responseReceivedExtraInfo",
        lambda e: status.__setitem__(e["requestId"], e["statusCode"]),
    )
    page.goto(evil)
    page.wait_for_function("document.title === 'sent'", timeout=15_000)
    deadline = time.monotonic() + 10
    while len(posts & status.keys()) < ATTEMPTS and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    page.wait_for_timeout(300)  # and nothing more than the three
    context.close()
    return sorted(status.get(request, 0) for request in posts)


def live_state(lab: str) -> dict[str, object]:
    with urllib.request.urlopen(lab + "/api/live", timeout=5) as res:
        data: dict[str, object] = json.loads(res.read())
        return data


def test_a_page_on_another_origin_cannot_start_or_crash_anything(browser: Browser) -> None:
    with serve_lab() as lab:
        html = FORMS_AND_A_FETCH.format(
            server=lab, first="/api/live/start", field="count", second="/api/live/chaos",
            fetched="/api/live/start",
        )  # fmt: skip
        with evil_site(html) as evil:
            assert live_state(lab)["running"] is False
            seen = statuses_seen(browser, evil, "/api/live/")
        assert seen == [403] * ATTEMPTS, seen
        time.sleep(1.0)  # a cluster, had one been started, would show by now
        state = live_state(lab)
        assert state["running"] is False, state


def store_state(path: Path) -> tuple[Any, ...]:
    store = SqliteStore(path, create=False)
    try:
        tables = ("tasks", "events", "queue")
        counts = tuple(store.query(store.own(f"SELECT count(*) FROM {t}"))[0][0] for t in tables)
        return counts, store.get_schedule("nightly"), store.get_schedule("hourly")
    finally:
        store.close()


def test_a_page_on_another_origin_cannot_pause_trigger_or_backfill_in_the_console(
    browser: Browser, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    now = SystemClock().now_ms()
    for name in ("nightly", "hourly"):
        store.put_schedule(Schedule(name=name, cron="0 * * * *", task="h"), now, replace=False)
    store.close()
    before = store_state(db)
    with serve_console(db) as console:
        html = FORMS_AND_A_FETCH.format(
            server=console, first="/api/schedules/nightly/pause", field="note",
            second="/api/schedules/hourly/backfill", fetched="/api/schedules/nightly/trigger",
        )  # fmt: skip
        with evil_site(html) as evil:
            seen = statuses_seen(browser, evil, "/api/schedules/")
    assert seen == [403] * ATTEMPTS, seen
    assert store_state(db) == before


def test_a_page_on_another_origin_cannot_cancel_a_task_in_the_console(
    browser: Browser, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    now = SystemClock().now_ms()
    for name in ("nightly", "hourly"):  # their next occurrences: PENDING tasks 1 and 2
        store.put_schedule(Schedule(name=name, cron="0 * * * *", task="h"), now, replace=False)
    store.close()
    before = store_state(db)
    with serve_console(db) as console:
        html = FORMS_AND_A_FETCH.format(
            server=console, first="/api/tasks/1/cancel", field="reason",
            second="/api/tasks/2/cancel", fetched="/api/tasks/1/cancel",
        )  # fmt: skip
        with evil_site(html) as evil:
            seen = statuses_seen(browser, evil, "/api/tasks/")
    assert seen == [403] * ATTEMPTS, seen
    assert store_state(db) == before
