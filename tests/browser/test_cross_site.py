"""A page on another origin drives the lab's live endpoints from a real browser, as issue 13
found it could (a form posting text/plain started a cluster and SIGKILLed its leader); every
attempt is refused and nothing runs."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser

from .conftest import free_port, serve_lab

EVIL_PAGE = """<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="chaos" method="post" enctype="text/plain" target="sink" action="{lab}/api/live/chaos">
  <input name='{{"action":"crash-leader","x":"' value='"}}'>
</form>
<form id="start" method="post" enctype="text/plain" target="sink" action="{lab}/api/live/start">
  <input name='{{"count":100,"x":"' value='"}}'>
</form>
<script>
  document.getElementById("start").submit();
  setTimeout(function () {{ document.getElementById("chaos").submit(); }}, 300);
  fetch("{lab}/api/live/start", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: "{{}}"}})
    .then(function () {{ document.title = "sent"; }}, function () {{ document.title = "sent"; }});
</script>
</body></html>"""


@contextmanager
def evil_site(lab: str) -> Iterator[str]:
    """Another origin (another port) serving the attacking page."""
    body = EVIL_PAGE.format(lab=lab).encode()

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


def live_state(lab: str) -> dict[str, object]:
    with urllib.request.urlopen(lab + "/api/live", timeout=5) as res:
        data: dict[str, object] = json.loads(res.read())
        return data


def test_a_page_on_another_origin_cannot_start_or_crash_anything(browser: Browser) -> None:
    with serve_lab() as lab, evil_site(lab) as evil:
        assert live_state(lab)["running"] is False
        context = browser.new_context()
        page = context.new_page()
        refused: list[int] = []
        page.on(
            "response",
            lambda r: refused.append(r.status) if "/api/live/" in r.url else None,
        )
        page.goto(evil)
        page.wait_for_function("document.title === 'sent'", timeout=15_000)
        deadline = time.monotonic() + 10
        while len(refused) < 2 and time.monotonic() < deadline:
            page.wait_for_timeout(200)  # the form posts land in the iframe
        context.close()
        assert refused and set(refused) == {403}, refused
        time.sleep(1.0)  # a cluster, had one been started, would show by now
        state = live_state(lab)
        assert state["running"] is False, state
