"""The live panel says what of the page's scenario a live run will not do, and why, next to
*Run it for real* — instead of starting the engine as if it would (issue 15: "where the real
engine cannot show a mode, the page says so instead of faking it")."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from tests.browser.lab_helpers import Console, open_lab

pytestmark = pytest.mark.browser


def test_the_default_scenario_runs_live_as_it_is(page: Page, console: Console) -> None:
    open_lab(page)
    expect(page.locator("#live-gaps")).to_be_hidden()
    assert console == []


def test_a_scenario_from_a_link_names_what_will_not_run_live(page: Page, console: Console) -> None:
    open_lab(page, "lose=1000@20&effects=external&visibility=900&pod-restart=never&replicas=9")
    gaps = page.locator("#live-gaps")
    expect(gaps).to_be_visible()
    expect(gaps).to_contain_text("Not run live")
    expect(gaps).to_contain_text(
        "lost messages (lose 1000@20): a live run has no queue failover to lose them with"
    )
    expect(gaps).to_contain_text("external effects: the live invoices commit their effect")
    expect(gaps).to_contain_text("900 s visibility (live: 600)")
    expect(gaps).to_contain_text("pod restart never (live: a killed worker is back after 300 s)")
    expect(gaps).to_contain_text("9 replicas (live: 7)")
    start = page.locator('[data-action="live-start"]')
    assert start.get_attribute("aria-describedby") == "live-gaps"
    assert console == []


def test_a_fault_set_on_the_page_is_named_and_removing_it_clears_the_sentence(
    page: Page, console: Console
) -> None:
    open_lab(page)
    gaps = page.locator("#live-gaps")
    page.locator('[data-control="effects"]').select_option("external")
    expect(gaps).to_have_text(
        "Not run live — external effects: the live invoices commit their effect with the ack "
        "(transactional)."
    )
    page.locator('[data-control="lose-count"]').fill("500")
    page.locator('[data-action="lose"]').click()
    expect(gaps).to_contain_text("lost messages (lose 500@0)")
    page.locator('[data-action="pause-leader"]').click()
    expect(gaps).to_contain_text(
        "pause leader@0:30: not sent by themselves — send them with the buttons above while it runs"
    )
    page.locator('[data-action="reset"]').click()
    expect(gaps).to_be_hidden()
    assert console == []
