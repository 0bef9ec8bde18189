"""Click any replica or pod: its state at the scrubbed second — lease, epoch, what it holds in
flight and its clock — from the model's lanes, log and timeline."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from tests.browser.lab_helpers import Console, open_lab

pytestmark = pytest.mark.browser
ZOMBIE = "pause=leader@0:30&fencing=off"


def field(page: Page, name: str):  # type: ignore[no-untyped-def]
    return page.locator(f'#inspect dd[data-field="{name}"]')


def scrub(page: Page, t: int) -> None:
    page.locator("#c-scrub").fill(str(t))
    expect(page.locator("#clock")).to_contain_text(f"00:{t:02d} /")


def test_a_paused_leader_shows_its_held_batch_and_epoch_at_the_right_second(
    page: Page, console: Console
) -> None:
    open_lab(page, ZOMBIE)
    scrub(page, 20)
    page.locator('[data-inspect="replica:0"]').click()
    expect(page.locator("#inspect")).to_be_visible()
    expect(page.locator("#inspect-title")).to_have_text("replica 0 at 00:20")
    expect(field(page, "state")).to_have_text("paused since 00:00, until 00:30")
    expect(field(page, "lease")).to_contain_text("lost: replica 1 took it at 00:10 (epoch 2)")
    expect(field(page, "epoch")).to_have_text("believes 1; the store's is 2")
    expect(field(page, "in flight")).to_have_text(
        "10,000 rows read at 00:00, not yet written; at 00:30 it publishes them: 10,000 duplicates"
    )
    expect(field(page, "clock")).to_contain_text("stopped at 00:00")
    expect(field(page, "clock")).to_contain_text("it is really 00:20")
    # Before the takeover its lease still counts down; it believes it leads.
    scrub(page, 5)
    expect(page.locator("#inspect-title")).to_have_text("replica 0 at 00:05")
    expect(field(page, "lease")).to_contain_text("it expires at 00:10")
    expect(field(page, "epoch")).to_have_text("believes 1")
    expect(page.locator('[data-inspect="replica:0"]')).to_contain_text("lease expires in 5 s")
    # Awake again: a standby that sees the new epoch.
    scrub(page, 40)
    expect(field(page, "state")).to_contain_text("standby since 00:30")
    expect(field(page, "lease")).to_contain_text("not held; replica 1 holds it (epoch 2)")
    expect(field(page, "in flight")).to_contain_text("nothing")
    assert console == []


def test_the_new_leader_and_a_fenced_zombie(page: Page, console: Console) -> None:
    open_lab(page, "pause=leader@0:30")
    scrub(page, 20)
    page.locator('[data-inspect="replica:1"]').click()
    expect(field(page, "state")).to_contain_text("leader since 00:10")
    expect(field(page, "epoch")).to_have_text("2")
    page.locator('[data-inspect="replica:0"]').click()
    expect(page.locator("#inspect-title")).to_have_text("replica 0 at 00:20")
    expect(field(page, "in flight")).to_contain_text("at 00:30 fencing refuses its write")
    assert console == []


def test_a_pod_that_crashes_before_its_ack(page: Page, console: Console) -> None:
    open_lab(page, "worker-crash=0@30&effects=external")
    scrub(page, 10)
    page.locator('[data-inspect="pod:0"]').click()
    expect(page.locator("#inspect-title")).to_have_text("pod 0 at 00:10")
    expect(field(page, "in flight")).to_contain_text("about 200 claimed this second")
    expect(field(page, "clock")).to_have_text("reads 00:10 — the page's second")
    scrub(page, 30)
    expect(field(page, "state")).to_contain_text("dies at the end of this second")
    expect(field(page, "in flight")).to_contain_text(
        "200 claimed and run, not acked: invisible until 01:00"
    )
    expect(field(page, "effects")).to_contain_text("external")
    scrub(page, 45)
    expect(field(page, "state")).to_have_text("down since 00:30, until 01:00")
    expect(field(page, "in flight")).to_contain_text("invisible until 01:00")
    expect(field(page, "clock")).to_have_text("none: not running")
    expect(page.locator('[data-inspect="pod:0"]')).to_have_class("pod down inspected")
    assert console == []


def test_inspect_by_keyboard_and_escape_returns_focus(page: Page, console: Console) -> None:
    open_lab(page, "crash=leader@0")
    node = page.locator('[data-inspect="replica:0"]')
    node.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#inspect")).to_be_visible()
    expect(field(page, "state")).to_contain_text("down since 00:00")
    expect(field(page, "clock")).to_have_text("none: not running")
    page.keyboard.press("Escape")
    expect(page.locator("#inspect")).to_be_hidden()
    expect(node).to_be_focused()
    page.locator('[data-inspect="replica:2"]').focus()
    page.keyboard.press("Space")
    expect(page.locator("#inspect-title")).to_have_text("replica 2 at 00:00")
    page.locator("#inspect-close").click()
    expect(page.locator("#inspect")).to_be_hidden()
    assert console == []
