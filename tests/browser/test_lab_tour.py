"""The guided tour: every step sets its scenario (the cards show the documented numbers), says
where to look, shows its progress, goes back and forth, opens from a link and by keyboard."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect
from tests.browser.lab_helpers import Console, open_lab, settled, stub_realsim

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"

# Step → (its scenario as a query, the cards and chips it documents: docs/lab.md's tour table).
STEPS: list[tuple[str, dict[str, str]]] = [
    ("", {"duplicates": "0", "missed": "0", "backlog": "999,000", "drain": "16.7"}),
    ("election=off", {"duplicates": "2,000,000", "missed": "0", "drain": "50.0"}),
    ("crash=leader@0", {"duplicates": "0", "missed": "0", "drain": "16.8"}),
    ("timers=in-memory&crash=leader@0", {"missed": "1,000,000"}),
    (
        "fencing=off&pause=leader@0:30&compare=fencing=on",
        {"duplicates": "10,000", "fenced_writes": "0", "drain": "17.0"},
    ),
    ("pause=leader@0:30&compare=fencing=off", {"duplicates": "0", "fenced_writes": "10,000"}),
    (
        "effects=external&worker-crash=0@30&compare=effects=transactional",
        {"duplicates": "200", "redelivered": "200"},
    ),
    ("worker-crash=0@30&compare=effects=external", {"duplicates": "0", "redelivered": "200"}),
    ("reconcile=off&lose=1000@30&compare=reconcile=60", {"stuck": "1,000", "duplicates": "0"}),
]


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def expect_step(page: Page, k: int) -> None:
    query, numbers = STEPS[k - 1]
    expect(page.locator("#tour-progress")).to_have_text(f"Step {k} of {len(STEPS)}")
    for name, value in numbers.items():
        expect(page.locator(f'[data-metric="{name}"]')).to_have_text(value)
    expect(page).to_have_url(re.compile(rf"[#&]tour={k}$"))
    settled(page)
    same = "(q) => new URLSearchParams(location.search) + '' === new URLSearchParams(q) + ''"
    page.wait_for_function(same, arg=query)
    assert query_of(page.url) == parse_qs(query)


def test_every_step_sets_its_scenario_and_its_cards_show_the_documented_numbers(
    page: Page, console: Console
) -> None:
    asked = stub_realsim(page)
    open_lab(page)
    page.locator('[data-action="tour"]').click()
    for k in range(1, len(STEPS) + 1):
        expect_step(page, k)
        expect(page.locator(".tour-target").first).to_be_visible()
        assert page.locator("#tour-look").inner_text().strip()
        expect(page.locator("#tour-steps button[aria-current=true]")).to_have_text(str(k))
        page.wait_for_function("(n) => window.cronlabLab.realsims >= n", arg=k)
        scenario = {k: v for k, v in parse_qs(STEPS[k - 1][0]).items() if k != "compare"}
        assert parse_qs(asked[-1]) == scenario, "the step's scenario (A) simulated"
        if k < len(STEPS):
            page.locator('[data-action="tour-next"]').click()
    expect(page.locator('[data-action="tour-next"]')).to_have_text("Done")
    page.locator('[data-action="tour-next"]').click()
    expect(page.locator("#tour")).to_be_hidden()
    expect(page).not_to_have_url(re.compile("tour="))
    assert console == []


def test_back_next_and_the_step_dots(page: Page, console: Console) -> None:
    stub_realsim(page)
    open_lab(page, fragment="tour=5")
    expect_step(page, 5)
    page.locator('[data-action="tour-back"]').click()
    expect_step(page, 4)
    page.locator('[data-action="tour-next"]').click()
    page.locator('[data-action="tour-next"]').click()
    expect_step(page, 6)
    page.get_by_role("button", name="Step 1: The midnight run").click()
    expect_step(page, 1)
    expect(page.locator('[data-action="tour-back"]')).to_be_disabled()
    assert console == []


@pytest.mark.parametrize(("how", "k"), [("fragment", 5), ("query", 7), ("fragment", 9)])
def test_a_link_opens_any_step(page: Page, console: Console, how: str, k: int) -> None:
    stub_realsim(page)
    if how == "fragment":
        open_lab(page, fragment=f"tour={k}")
    else:
        open_lab(page, query=f"tour={k}")
    expect_step(page, k)
    expect(page.locator("#tour-link")).to_have_attribute("href", f"#tour={k}")
    assert console == []


def test_the_link_keeps_the_token_and_a_hash_change_moves_the_tour(
    page: Page, console: Console
) -> None:
    stub_realsim(page)
    open_lab(page, fragment="token=abc&tour=2")
    expect_step(page, 2)
    assert page.evaluate("window.cronlabLab.state.token") == "abc"
    page.evaluate("location.hash = '#token=abc&tour=3'")
    expect_step(page, 3)
    assert "token=abc" in page.url
    assert console == []


def test_the_tour_by_keyboard(page: Page, console: Console) -> None:
    stub_realsim(page)
    open_lab(page)
    page.locator('[data-action="tour"]').focus()
    page.keyboard.press("Enter")
    expect_step(page, 1)
    page.locator('[data-action="tour-next"]').focus()
    page.keyboard.press("Enter")
    expect_step(page, 2)
    page.keyboard.press("Enter")
    expect_step(page, 3)
    page.locator('[data-action="tour-back"]').focus()
    page.keyboard.press("Space")
    expect_step(page, 2)
    page.keyboard.press("Escape")
    expect(page.locator("#tour")).to_be_hidden()
    # A step that opens the inspector leaves the focus on the tour's buttons.
    page.locator('[data-action="tour"]').focus()
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Step 4: In-memory timers").click()
    page.locator('[data-action="tour-next"]').focus()
    page.keyboard.press("Enter")
    expect_step(page, 5)
    expect(page.locator("#inspect")).to_be_visible()
    expect(page.locator('[data-action="tour-next"]')).to_be_focused()
    page.keyboard.press("Enter")
    expect_step(page, 6)
    assert console == []


def test_the_zombie_step_opens_the_inspector_on_the_paused_leader(
    page: Page, console: Console
) -> None:
    stub_realsim(page)
    open_lab(page, fragment="tour=5")
    expect_step(page, 5)
    box = page.locator("#inspect")
    expect(box).to_be_visible()
    expect(page.locator("#inspect-title")).to_have_text("replica 0 at 00:20")
    expect(box.locator('dd[data-field="in flight"]')).to_contain_text("10,000 rows read at 00:00")
    assert console == []


def box(page: Page, selector: str) -> dict[str, float]:
    b = page.locator(selector).first.bounding_box()
    assert b is not None, selector
    return b


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


# What the inspector and the tour card once covered in these screenshots (issue 15's audit).
UNDER_THE_INSPECTOR = [
    ".playback", "#c-scrub", "#ticker", ".chart-tools", "figure:has(#chart-backlog) > figcaption",
    "figure:has(#chart-flow) > figcaption", "#col-sched", "#col-workers",
]  # fmt: skip
UNDER_THE_TOUR = [".controls", ".controls fieldset:nth-of-type(4)", '[data-action="crash-leader"]']


@pytest.mark.parametrize(("k", "name"), [(5, "lab-zombie.png"), (7, "lab-worker-crash.png")])
def test_screenshots_of_the_zombie_and_the_worker_crash_steps(
    page: Page, console: Console, k: int, name: str
) -> None:
    """Saved in artifacts/; with LAB_SHOTS_TO_DOCS=1 also in docs/ (the ones docs/lab.md shows).
    Neither the inspector nor the tour card covers what the step is about."""
    page.set_viewport_size({"width": 1366, "height": 1440})
    stub_realsim(page)
    open_lab(page, fragment=f"tour={k}")
    expect_step(page, k)
    page.wait_for_function("() => window.cronlabLab.realsims > 0")
    page.evaluate("window.scrollTo(0, 0)")
    expect(page.locator("#inspect")).to_be_visible()
    inspector, tour = box(page, "#inspect"), box(page, "#tour")
    for sel in UNDER_THE_INSPECTOR:
        assert not overlap(inspector, box(page, sel)), f"the inspector covers {sel}"
    for sel in UNDER_THE_TOUR:
        assert not overlap(tour, box(page, sel)), f"the tour card covers {sel}"
    look = box(page, "#pod-timeline" if k == 7 else "#lease-timeline")
    assert look["y"] + look["height"] <= 1440, "the timeline the step points at is in the shot"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))
    if os.environ.get("LAB_SHOTS_TO_DOCS") == "1":
        shutil.copy(ARTIFACTS / name, ROOT / "docs" / name)
    overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not overflow, "no horizontal scrolling"
    assert console == []


def test_a_step_runs_the_lab_s_own_simulated_code(page: Page, console: Console) -> None:
    """No stand-in: step 5 asks /api/realsim; a quick Next aborts it (the server, busy with it,
    answers 429 and the page asks again) and step 6's own answer is the one shown."""
    open_lab(page, fragment="tour=5")
    expect_step(page, 5)
    expect(page.locator("#realsim-status")).to_contain_text("running the real code")
    page.locator('[data-action="tour-next"]').click()
    expect_step(page, 6)
    expect(page.locator("#realsim-status")).to_contain_text("simulated in", timeout=120_000)
    body = page.evaluate("window.cronlabLab.state.realsim.body")
    assert body["totals"]["fenced_writes"] > 0 and body["totals"]["duplicates"] == 0, body
    expect(page.locator("#verdict-realsim")).to_contain_text("Simulated code: ✓ ok")
    expect(page.locator("#realsim-stale")).to_be_hidden()
    assert all("429" in e for e in console), console
