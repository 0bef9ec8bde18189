"""The new faults and defences on the page: controls with hooks, the fault list, the URL, the
A/B keys, the totals and the explain panel's formulas; and issue 15's two glitches."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, Route, expect
from tests.browser.lab_helpers import Console, open_lab, settled

pytestmark = pytest.mark.browser
AB_KEYS = [
    "election", "replicas", "workers", "rate", "lease-ttl", "timers", "restart-after", "crash",
    "fencing", "batch", "effects", "visibility", "pod-restart", "reconcile", "pause",
    "worker-crash", "lose",
]  # fmt: skip


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def wait_url(page: Page, pattern: str) -> None:
    expect(page).to_have_url(re.compile(pattern))


def test_every_new_control_round_trips_through_the_url(page: Page, console: Console) -> None:
    open_lab(page)
    for hook in ["fencing", "batch", "effects", "visibility", "pod-restart", "reconcile",
                 "pause-for", "crash-pod", "lose-count"]:  # fmt: skip
        assert page.locator(f'[data-control="{hook}"]').count() == 1, hook
    page.locator('[data-control="fencing"]').uncheck()
    page.locator('[data-control="batch"]').fill("5000")
    page.locator('[data-control="batch"]').press("Tab")
    page.locator('[data-control="effects"]').select_option("external")
    page.locator('[data-control="visibility"]').fill("45")
    page.locator('[data-control="visibility"]').press("Tab")
    page.locator('[data-control="pod-restart"]').select_option("never")
    page.locator('[data-control="reconcile"]').select_option("off")
    page.locator("#c-scrub").fill("20")
    page.locator('[data-control="pause-for"]').fill("40")
    page.locator('[data-action="pause-leader"]').click()
    page.locator('[data-control="crash-pod"]').select_option("2")
    page.locator('[data-action="crash-worker"]').click()
    page.locator('[data-control="lose-count"]').fill("500")
    page.locator('[data-action="lose"]').click()
    page.locator("#c-crash-replica").select_option("1")
    page.locator('[data-action="crash-replica"]').click()
    page.locator("#c-crash-replica").select_option("2")
    page.locator('[data-action="pause-replica"]').click()
    want = {
        "fencing": ["off"], "batch": ["5000"], "effects": ["external"], "visibility": ["45"],
        "pod-restart": ["never"], "reconcile": ["off"], "crash": ["replica:1@20"],
        "pause": ["leader@20:40", "replica:2@20:40"], "worker-crash": ["2@20"], "lose": ["500@20"],
    }  # fmt: skip
    page.wait_for_function(
        "(n) => new URLSearchParams(location.search).getAll('pause').length === n", arg=2
    )
    settled(page)
    assert query_of(page.url) == want
    expect(page.locator("#fault-list li")).to_have_count(5)
    expect(page.locator("#fault-list")).to_contain_text("pause leader at 00:20 for 40 s")
    expect(page.locator("#fault-list")).to_contain_text("pod 2 crashes at 00:20")
    expect(page.locator("#fault-list")).to_contain_text("lose 500 at 00:20")
    expect(page.locator("#form-error")).to_have_text("")
    shared = page.url
    page.goto(shared)
    page.wait_for_function("() => window.cronlabLab && window.cronlabLab.recomputes > 0")
    assert not page.locator('[data-control="fencing"]').is_checked()
    expect(page.locator('[data-control="batch"]')).to_have_value("5000")
    expect(page.locator('[data-control="effects"]')).to_have_value("external")
    expect(page.locator('[data-control="visibility"]')).to_have_value("45")
    expect(page.locator('[data-control="pod-restart"]')).to_have_value("never")
    expect(page.locator('[data-control="reconcile"]')).to_have_value("off")
    expect(page.locator("#fault-list li")).to_have_count(5)
    page.get_by_role("button", name="Remove pod 2 crashes at 00:20").click()
    expect(page.locator("#fault-list li")).to_have_count(4)
    page.wait_for_function("() => !new URLSearchParams(location.search).has('worker-crash')")
    assert "worker-crash" not in query_of(page.url)
    assert console == []


def test_an_unlisted_value_in_a_shared_link_is_shown_not_dropped(
    page: Page, console: Console
) -> None:
    open_lab(page, "pod-restart=45&reconcile=120&restart-after=120")
    expect(page.locator('[data-control="pod-restart"]')).to_have_value("45")
    expect(page.locator('[data-control="reconcile"]')).to_have_value("120")
    expect(page.locator('[data-control="restart-after"]')).to_have_value("120")
    assert console == []


def test_fewer_pods_drop_a_crash_of_a_pod_that_no_longer_exists(
    page: Page, console: Console
) -> None:
    open_lab(page, "worker-crash=4@30")
    expect(page.locator("#fault-list li")).to_have_count(1)
    page.locator('[data-control="workers"]').fill("3")
    settled(page)
    expect(page.locator("#fault-list li")).to_have_count(0)
    expect(page.locator("#form-error")).to_have_text("")
    assert console == []


def test_ab_offers_every_compare_key_and_each_gives_a_b(page: Page, console: Console) -> None:
    open_lab(page, "pause=leader@0:30&worker-crash=0@30&lose=1000@20")
    options = page.locator("#c-ab-key option").evaluate_all("els => els.map(e => e.value)")
    assert options == AB_KEYS
    for key in AB_KEYS:
        page.locator("#c-ab-key").select_option(key)
        settled(page)
        page.wait_for_function(
            "(k) => window.cronlabLab.state.result.compare.changes[0].startsWith(k + '=')", arg=key
        )
        expect(page.locator("#form-error")).to_have_text("")
        expect(page.locator("#ab-table tbody tr").first).to_contain_text("Duplicate executions")
    page.locator("#c-ab-key").select_option("fencing")
    expect(page.locator("#c-ab-value")).to_have_value("off")
    row = page.locator("#ab-table tbody tr", has_text="Duplicate executions")
    expect(row).to_contain_text("+10,000")  # the zombie's batch (transactional: the pod adds none)
    expect(page.locator("#ab-table tbody tr", has_text="Fenced writes")).to_contain_text("-10,000")
    assert console == []


def numbers_before(text: str, word: str) -> list[str]:
    return re.findall(r"([\d,]+) " + word, text)


def test_ab_sentence_uses_b_s_own_numbers_with_a_leader_crash(page: Page, console: Console) -> None:
    """Issue 15's glitch: the sentence said 2,000,000 (due × (replicas − 1)), the table
    1,000,000 — with a crash at 0 only two replicas dispatch."""
    open_lab(page, "crash=leader@0")
    b_dup = page.locator("#ab-table tbody tr", has_text="Duplicate executions").locator("td").nth(1)
    expect(b_dup).to_have_text("1,000,000")
    sentence = page.locator("#ab-sentence").inner_text()
    assert sentence.startswith("B (election=off): 1,000,000 duplicate executions"), sentence
    assert set(numbers_before(sentence, "duplicate")) == {"1,000,000"}, sentence
    open_lab(page, "election=off&crash=leader@0")
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("1,000,000")
    main = page.locator("#sentence").inner_text()
    assert set(numbers_before(main, "duplicate")) == {"1,000,000"}, main
    expect(page.locator("#x-dup")).to_have_text(
        "1,000,000 × (3 − 1) = 2,000,000 with every replica up; this run: 1,000,000"
    )
    assert console == []


def test_fault_totals_cards_and_explain_lines(page: Page, console: Console) -> None:
    # The loss comes before the zombie's write: the newest messages lost are first copies.
    open_lab(
        page,
        "pause=leader@0:30&fencing=off&worker-crash=0@30&effects=external&lose=1000@20&reconcile=off",
    )
    expect(page.locator('[data-metric="duplicates"]')).to_have_text("10,200")
    expect(page.locator("#sub-duplicates")).to_contain_text(
        "10,000 from a zombie · 200 redelivered, sent again"
    )
    expect(page.locator('[data-metric="redelivered"]')).to_have_text("200")
    expect(page.locator('[data-metric="stuck"]')).to_have_text("1,000")
    expect(page.locator('[data-chip="stuck"]')).to_have_class(re.compile(r"\bhit\b"))
    expect(page.locator('[data-chip="fenced_writes"]')).not_to_have_class(re.compile(r"\bhit\b"))
    expect(page.locator("#sub-missed")).to_contain_text("1,000 stuck")
    expect(page.locator("#x-zombie")).to_contain_text(
        "min(batch 10,000, due at the pause 1,000,000) = 10,000; back at 00:30 after a takeover: "
        "fencing off → it published them, 10,000 duplicates."
    )
    expect(page.locator("#x-redeliver")).to_contain_text("min(rate 200, what it claimed) = 200")
    expect(page.locator("#x-redeliver")).to_contain_text(
        "external effects ran already → 200 duplicates"
    )
    expect(page.locator("#x-stuck")).to_contain_text(
        "no reconciler → stuck = the lost first copies = 1,000"
    )
    expect(page.locator("#x-faults li")).to_have_count(3)
    expect(page.locator("#verdict-model")).to_contain_text("✗ not ok")
    expect(page.locator('#verdict-model [data-kind="duplicated"]')).to_have_text(
        "duplicated 10,200"
    )
    expect(page.locator('#verdict-model [data-kind="stuck"]')).to_have_text("stuck 1,000")
    open_lab(page, "pause=leader@0:5&fencing=off")
    expect(page.locator("#x-zombie")).to_contain_text(
        "back at 00:05, within its 10 s lease: written once, 0 duplicates."
    )
    assert console == []


VERDICT_KINDS = ("lost", "duplicated", "unexpected", "late", "stuck")


def live_snapshot() -> dict[str, object]:
    totals = {"due": 600, "dispatched": 600, "executed": 600, "duplicates": 0, "missed": 0,
              "backlog_peak": 590, "drain_time_s": 6, "takeover_delays_s": [3]}  # fmt: skip
    return {
        "running": True, "t": 40, "config": {"worker_rate": 60, "count": 600},
        "status": {"leader": {"replica": 1, "epoch": 2}}, "report": totals,
        "prediction": {"totals": totals}, "cluster_exit": None,
        "events": [{"t": i, "kind": "status", "text": f"event {i}"} for i in range(40)],
        "verdict": {"ok": True, "counts": dict.fromkeys(VERDICT_KINDS, 0)},
    }  # fmt: skip


def test_after_a_live_run_the_control_panel_stays_at_the_top_left(
    page: Page, console: Console
) -> None:
    """Issue 15's glitch: the panel was sticky; scrolled down to the live panel it floated in
    the middle of the page (a screenshot shows it there)."""

    def live(route: Route) -> None:
        route.fulfill(content_type="application/json", body=json.dumps(live_snapshot()))

    def events(route: Route) -> None:
        body = f"event: snapshot\ndata: {json.dumps(live_snapshot())}\n\n"
        route.fulfill(content_type="text/event-stream", body=body)

    page.route("**/api/live", live)
    page.route("**/api/live/events", events)
    open_lab(page)
    expect(page.locator("#live-status")).to_contain_text("leader replica 1 (epoch 2)")
    expect(
        page.locator('#live-table tr[data-live="executed"] td[data-col="measured"]')
    ).to_have_text("600")
    top = page.locator(".controls").evaluate("el => el.getBoundingClientRect().top + scrollY")
    layout = page.locator(".layout").evaluate("el => el.getBoundingClientRect().top + scrollY")
    page.locator("#live-log").scroll_into_view_if_needed()
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert page.evaluate("scrollY") > 1000
    after = page.locator(".controls").evaluate("el => el.getBoundingClientRect().top + scrollY")
    assert after == top, f"the control panel moved from {top} to {after} px down the page"
    assert top - layout < 20
    left = page.locator(".controls").bounding_box()
    assert left is not None and left["x"] < 40
    assert console == []
