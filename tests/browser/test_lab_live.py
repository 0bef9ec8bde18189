"""Live mode from the page: the real engine runs a small workload and its measured totals appear."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_run_it_for_real_small_workload(page: Page, console: list[str]) -> None:
    page.goto("/?workers=2&ttl=3")
    page.wait_for_function("() => window.cronlabLab && window.cronlabLab.recomputes > 0")
    page.locator('[data-control="live-count"]').fill("600")
    page.locator('[data-control="live-drain"]').select_option("5")
    page.locator('[data-action="live-start"]').click()
    status = page.locator("#live-status")
    expect(status).to_contain_text("leader replica", timeout=30_000)
    expect(page.locator('[data-action="live-start"]')).to_be_disabled()
    page.locator('[data-action="live-crash"]').click()
    measured = page.locator('#live-table tr[data-live="executed"] td[data-col="measured"]')
    expect(measured).to_have_text("600", timeout=45_000)
    model = page.locator('#live-table tr[data-live="executed"] td[data-col="live-model"]')
    expect(model).to_have_text("600")
    expect(page.locator('#live-table tr[data-live="missed"] td[data-col="measured"]')).to_have_text(
        "0"
    )
    log = page.locator("#live-log")
    expect(log).to_contain_text("SIGKILL leader")
    expect(log).to_contain_text("holds the lease (epoch 2)", timeout=30_000)
    page.locator('[data-action="live-stop"]').click()
    expect(status).to_have_text("stopped; processes killed, folder removed", timeout=30_000)
    expect(page.locator('[data-action="live-start"]')).to_be_enabled()
    assert console == []


def test_a_token_guards_live_mode_and_the_page_sends_it(browser: Browser, token_lab: str) -> None:
    page = browser.new_page()
    url = f"{token_lab}/?workers=1"
    page.goto(url)
    # The first model run drawn (its charts move the page): a click before it can land on
    # whatever moved under the button (a CI run's click left the status "idle").
    page.wait_for_function("() => window.cronlabLab && window.cronlabLab.recomputes > 0")
    page.locator('[data-control="live-count"]').fill("50")
    page.locator('[data-action="live-start"]').click()
    expect(page.locator("#live-status")).to_contain_text("need the lab's token")
    page.goto(url + "#token=t0k")
    page.locator('[data-action="live-start"]').click()
    expect(page.locator("#live-status")).to_contain_text("running", timeout=30_000)
    page.locator('[data-action="live-stop"]').click()
    expect(page.locator("#live-status")).to_contain_text("stopped", timeout=30_000)
    page.close()
