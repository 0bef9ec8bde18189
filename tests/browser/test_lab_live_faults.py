"""Live mode's new faults from the page (issue 15): the zombie leader without fencing measured
against the model, a worker SIGKILLed mid-batch, the checker's verdict on the run, and a mode
the real engine refuses said in its own words."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from tests.browser.lab_helpers import Console, open_lab

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def cell(page: Page, metric: str, col: str):  # type: ignore[no-untyped-def]
    return page.locator(f'#live-table tr[data-live="{metric}"] td[data-col="{col}"]')


def start(page: Page, query: str, count: int, drain: str, lead: str, fencing: bool) -> None:
    open_lab(page, query)
    page.locator('[data-control="live-count"]').fill(str(count))
    page.locator('[data-control="live-drain"]').select_option(drain)
    page.locator('[data-control="live-lead"]').select_option(lead)
    page.locator('[data-control="live-fencing"]').set_checked(fencing)
    page.locator('[data-action="live-start"]').click()
    expect(page.locator("#live-status")).to_contain_text("leader replica", timeout=30_000)


def stop(page: Page) -> None:
    page.locator('[data-action="live-stop"]').click()
    expect(page.locator("#live-status")).to_have_text(
        "stopped; processes killed, folder removed", timeout=30_000
    )


def test_a_zombie_leader_without_fencing_live(page: Page, console: Console) -> None:
    start(page, "workers=2&ttl=3", 600, "5", "20", fencing=False)
    expect(page.locator("#live-scale")).to_have_text("600 invoices · fencing off")
    page.locator('[data-action="live-zombie"]').click()
    expect(page.locator("#live-log")).to_contain_text("pause-leader sent for 15 s")
    expect(cell(page, "executed", "measured")).to_have_text("1,200", timeout=90_000)
    expect(cell(page, "duplicates", "measured")).to_have_text("600")
    expect(cell(page, "duplicates", "live-model")).to_have_text("600")
    verdict = page.locator("#verdict-live")
    expect(verdict.locator('[data-kind="duplicated"]')).to_have_text(
        "duplicated 600", timeout=30_000
    )
    expect(verdict).to_contain_text("Live run: ✗ not ok")
    expect(verdict.locator(".sample").first).to_contain_text("e.g. ")
    stop(page)
    assert console == []


def test_a_worker_killed_mid_batch_live(page: Page, console: Console) -> None:
    start(page, "workers=2&ttl=3&visibility=5", 600, "10", "5", fencing=True)
    measured = cell(page, "executed", "measured")
    expect(measured).to_have_text(re.compile(r"^(?:[5-9]\d|[1-5]\d\d)$"), timeout=60_000)
    page.locator('[data-action="live-kill-worker"]').click()
    expect(page.locator("#live-log")).to_contain_text("kill-worker", timeout=20_000)
    expect(measured).to_have_text("600", timeout=120_000)
    expect(cell(page, "duplicates", "measured")).to_have_text("0")
    expect(cell(page, "duplicates", "live-model")).to_have_text("0")
    verdict = page.locator("#verdict-live")
    expect(verdict).to_contain_text("Live run: ✓ ok", timeout=30_000)
    stop(page)
    assert console == []


def test_a_mode_the_real_engine_refuses_is_said_not_faked(page: Page, console: Console) -> None:
    open_lab(page, "election=off")
    page.locator('[data-control="live-fencing"]').uncheck()
    page.locator('[data-action="live-start"]').click()
    status = page.locator("#live-status")
    # The engine's own words (they name fencing and the election), not the page's.
    expect(status).to_have_text(re.compile(r"^the real engine refuses: .*fencing.*election"))
    expect(page.locator('[data-action="live-start"]')).to_be_enabled()
    assert all("422" in e for e in console), console
