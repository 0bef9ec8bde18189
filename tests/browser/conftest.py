"""The lab served by the real CLI (`cronlab lab` subprocess) and driven in Debian's Chromium."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


@contextmanager
def serve_lab(*extra: str, python: str = sys.executable) -> Iterator[str]:
    """``cronlab lab`` on a free loopback port; SIGINT at the end stops it and any live run."""
    port = free_port()
    proc = subprocess.Popen(
        [python, "-m", "cronlab", "lab", "--port", str(port), "--no-open", *extra],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/openapi.json")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def serve_console(store: Path, *extra: str) -> Iterator[str]:
    """``cronlab console`` on a SQLite store, on a free loopback port; SIGINT stops it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronlab", "console", "--store", f"sqlite:///{store}",
         "--port", str(port), "--no-open", *extra],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/openapi.json")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def lab_url() -> Iterator[str]:
    """The lab every page test shares."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} missing: scripts/setup.sh installs it")
    with serve_lab() as url:
        yield url


@pytest.fixture
def token_lab() -> Iterator[str]:
    """A second lab started with ``--token t0k``."""
    with serve_lab("--token", "t0k") as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def console() -> list[str]:
    """Console errors and uncaught page errors seen while the test ran."""
    return []


@pytest.fixture
def page(browser: Browser, lab_url: str, console: list[str]) -> Iterator[Page]:
    """A fresh 1366×768 page on the lab, offline apart from the lab itself."""
    context = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=lab_url)
    context.route("**/*", _only_lab(lab_url))
    p = context.new_page()
    p.on("console", lambda msg: _keep_error(console, msg))
    p.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
    yield p
    context.close()


def _keep_error(errors: list[str], msg: ConsoleMessage) -> None:
    if msg.type == "error":
        errors.append(f"{msg.text} ({msg.location.get('url', '')})")


def _only_lab(lab_url: str):  # type: ignore[no-untyped-def]
    """Abort any request that leaves the lab: the page must work offline."""

    def route(r):  # type: ignore[no-untyped-def]
        if r.request.url.startswith(lab_url) or r.request.url.startswith("data:"):
            return r.continue_()
        return r.abort()

    return route
