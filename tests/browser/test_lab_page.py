"""The lab page in headless Chromium: the worked numbers, playback, keyboard, sharing, offline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
Console = list[str]


def open_lab(page: Page, query: str = "") -> None:
    page.goto("/" + (f"?{query}" if query else ""))
    page.wait_for_function("() => window.cronlabLab && window.cronlabLab.recomputes > 0")


def metric(page: Page, name: str) -> str:
    return page.locator(f'[data-metric="{name}"]').inner_text()


def test_page_loads_with_the_midnight_run(page: Page, console: Console) -> None:
    open_lab(page)
    expect(page).to_have_title("Cron at Scale: Leader Election & Worker Dispatch · cronlab")
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("0")
    expect(page.locator('[data-metric="missed"]')).to_have_text("0")
    expect(page.locator('[data-metric="backlog"]')).to_have_text("999,000")
    expect(page.locator('[data-metric="drain"]')).to_have_text("16.7")
    expect(page.locator("#ticker")).to_have_text(
        "min 00 · dispatched 1,000,000 · executed 60,000 · dup ×0 · missed 0 · backlog 940,000"
    )
    expect(page.locator("#sentence")).to_contain_text("zero loss — PENDING rows survive")
    assert page.locator(".replica.leader").count() == 1
    assert page.locator("#chart-backlog canvas").count() == 1
    assert page.locator("#chart-flow canvas").count() == 1
    assert console == []


def test_election_off_duplicates_two_million(page: Page, console: Console) -> None:
    open_lab(page)
    page.locator('[data-control="election"]').uncheck()
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("2,000,000")
    expect(page.locator('[data-metric="drain"]')).to_have_text("50.0")
    expect(page.locator(".replica.dispatcher")).to_have_count(3)
    expect(page.locator("#x-dup")).to_have_text("1,000,000 × (3 − 1) = 2,000,000")
    expect(page).to_have_url(re.compile(r"\?election=off$"))
    assert console == []


def test_crash_leader_at_zero_durable_then_in_memory(page: Page, console: Console) -> None:
    open_lab(page)
    expect(page.locator("#crash-at")).to_have_text("00:00")
    page.locator('[data-action="crash-leader"]').click()
    expect(page.locator("#fault-list")).to_contain_text("crash leader@0")
    expect(page.locator('[data-metric="missed"]')).to_have_text("0")
    expect(page.locator("#sub-missed")).to_have_text("takeover 10 s")
    log = page.locator("#event-log")
    expect(log).to_contain_text("replica 1 took the lease (epoch 2) after 10 s")
    expect(log.locator(".kind.acquire")).to_have_text("takeover")
    expect(page.locator('[data-metric="drain"]')).to_have_text("16.8")
    page.locator('[data-control="timers"]').select_option("in-memory")
    expect(page.locator('[data-metric="missed"]')).to_have_text("1,000,000")
    expect(page.locator("#sentence")).to_contain_text("timers live in its memory")
    expect(page).to_have_url(re.compile(r"\?timers=in-memory&crash=leader%400$"))
    assert console == []


def test_keyboard_operates_the_controls(page: Page, console: Console) -> None:
    open_lab(page)
    election = page.locator('[data-control="election"]')
    election.focus()
    page.keyboard.press("Space")
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("2,000,000")
    page.locator('[data-control="replicas"]').focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#o-replicas")).to_have_text("4")
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("3,000,000")
    page.locator('[data-action="reset"]').focus()
    page.keyboard.press("Enter")
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("0")
    assert election.is_checked()
    page.locator("h1").click()  # focus off the controls: space is play/pause
    page.keyboard.press("Space")
    expect(page.locator('[data-action="play"]')).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Space")
    expect(page.locator('[data-action="play"]')).to_have_attribute("aria-pressed", "false")
    assert console == []


def test_particles_are_drawn_on_one_canvas(page: Page, console: Console) -> None:
    open_lab(page, "election=off")
    nodes = page.evaluate("document.getElementsByTagName('*').length")
    page.locator('[data-action="play"]').click()
    page.wait_for_function("() => window.cronlabLab.state.t > 3")
    painted = page.evaluate(
        """() => { const c = document.getElementById('particles');
                   const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                   let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }"""
    )
    page.locator('[data-action="play"]').click()
    assert painted > 0, "particles drawn while playing"
    assert page.evaluate("document.getElementsByTagName('*').length") <= nodes + 5
    assert console == []


def test_every_control_has_a_label(page: Page, console: Console) -> None:
    open_lab(page)
    names = page.evaluate(
        """() => [...document.querySelectorAll('input, select, button')].filter(
            el => el.offsetParent !== null).map(el => [el.id || el.dataset.action || el.outerHTML,
            (el.labels && el.labels.length ? el.labels[0].innerText
             : el.getAttribute('aria-label') || el.innerText).trim()])"""
    )
    unlabelled = [n for n, label in names if not label]
    assert unlabelled == []
    hooks = ["election", "replicas", "workers", "rate", "ttl", "timers", "tasks", "preset"]
    for hook in hooks:
        assert page.locator(f'[data-control="{hook}"]').count() == 1, hook
    for action in ["crash-leader", "play", "reset", "live-start", "live-stop"]:
        assert page.locator(f'[data-action="{action}"]').count() == 1, action
    assert console == []


def test_scenario_lives_in_the_url(page: Page, console: Console) -> None:
    open_lab(page, "election=off&replicas=5&workers=10&compare=timers=in-memory")
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("4,000,000")
    assert not page.locator('[data-control="election"]').is_checked()
    expect(page.locator("#o-workers")).to_have_text("10")
    expect(page.locator("#c-ab-key")).to_have_value("timers")
    expect(page.locator("#ab-table")).to_contain_text("Duplicate executions")
    assert console == []


def test_bad_input_shows_the_field_and_keeps_the_numbers(page: Page, console: Console) -> None:
    open_lab(page)
    page.locator('[data-control="tasks"]').fill("-5")
    page.locator('[data-control="tasks"]').press("Tab")
    expect(page.locator("#form-error")).to_contain_text("tasks")
    expect(page.locator('[data-metric="backlog"]')).to_have_text("999,000")
    page.locator('[data-control="tasks"]').fill("2000000")
    page.locator('[data-control="tasks"]').press("Tab")
    expect(page.locator("#form-error")).to_have_text("")
    expect(page.locator('[data-metric="backlog"]')).to_have_text("1,999,000")
    # A 422 is a console "Failed to load resource" line; nothing else may appear.
    assert all("422" in e for e in console), console


def test_ab_panel_shows_the_difference(page: Page, console: Console) -> None:
    open_lab(page)
    row = page.locator("#ab-table tbody tr").first
    expect(row).to_contain_text("+2,000,000")
    page.locator("#c-ab-key").select_option("crash")
    expect(page.locator("#c-ab-value")).to_have_value("leader@0")
    expect(page.locator("#ab-table tbody tr").nth(3)).to_contain_text("+10")
    assert console == []


def test_playback_play_pause_scrub_step(page: Page, console: Console) -> None:
    open_lab(page, "crash=leader@0")
    page.locator('[data-control="speed"]').select_option("1200")
    page.locator('[data-action="play"]').click()
    page.wait_for_function("() => window.cronlabLab.state.t > 30")
    page.locator('[data-action="play"]').click()
    expect(page.locator('[data-action="play"]')).to_have_attribute("aria-pressed", "false")
    page.locator("#c-scrub").fill("5")
    expect(page.locator("#clock")).to_contain_text("00:05 /")
    expect(page.locator(".replica.crashed")).to_contain_text("lease expires in 5 s")
    page.locator('[data-action="step-forward"]').click()
    expect(page.locator("#clock")).to_contain_text("00:15 /")
    expect(page.locator(".replica.leader")).to_contain_text("epoch 2")
    expect(page.locator("#queue-depth")).to_have_text("994,000")
    page.locator('[data-action="step-back"]').click()
    expect(page.locator("#clock")).to_contain_text("00:05 /")
    assert console == []


def test_exports_json_csv_and_png(page: Page, console: Console, tmp_path: Path) -> None:
    open_lab(page, "election=off")
    with page.expect_download() as dl:
        page.locator('[data-action="export-json"]').click()
    data = json.loads(Path(dl.value.path()).read_text())
    assert data["totals"]["duplicates"] == 2_000_000
    with page.expect_download() as dl:
        page.locator('[data-action="export-csv"]').click()
    lines = Path(dl.value.path()).read_text().splitlines()
    assert lines[0] == "minute,dispatched,executed,duplicates,missed,backlog,leader"
    assert lines[1].startswith("0,3000000,60000,2000000,0,2940000")
    with page.expect_download() as dl:
        page.locator('[data-action="png-backlog"]').click()
    assert Path(dl.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert console == []


@pytest.mark.parametrize(("width", "height"), [(1366, 768), (1440, 900)])
def test_screenshot_for_a_laptop(page: Page, console: Console, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    open_lab(page, "crash=leader@0")
    page.locator("#c-scrub").fill("300")
    ARTIFACTS.mkdir(exist_ok=True)
    name = "lab.png" if width == 1366 else f"lab-{width}.png"
    page.screenshot(path=str(ARTIFACTS / name))
    cards = page.locator(".cards").bounding_box()
    stage = page.locator(".playback").bounding_box()
    assert cards is not None and stage is not None
    assert stage["y"] + stage["height"] <= height, "playback must be above the fold"
    overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not overflow, "no horizontal scrolling"
    assert console == []
