"""A verdict on every run — the model's, the simulated code's, the live run's — and the real
code, simulated: the third column next to the model and measured, on demand, stale when the
scenario changes, a newer request aborting an older one. /api/realsim is stood in for by an
answer of its documented shape, except in the last test, which asks the lab's own."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, Route, expect
from tests.browser.lab_helpers import Console, open_lab, realsim_answer, settled, stub_realsim

pytestmark = pytest.mark.browser


def wait_for(page: Page, ok: Callable[[], bool], timeout_ms: int = 5000) -> None:
    for _ in range(timeout_ms // 50):
        if ok():
            return
        page.wait_for_timeout(50)
    raise AssertionError("timed out")


def cell(page: Page, metric: str, col: str):  # type: ignore[no-untyped-def]
    return page.locator(f'#live-table tr[data-live="{metric}"] td[data-col="{col}"]')


def test_the_model_verdict_is_shown_on_every_run(page: Page, console: Console) -> None:
    open_lab(page)
    for sel in ("#verdict-model", "#verdict-model-run"):
        expect(page.locator(sel)).to_contain_text("✓ ok")
        expect(page.locator(sel)).to_have_attribute("data-ok", "true")
    page.locator('[data-control="election"]').uncheck()
    expect(page.locator("#verdict-model")).to_contain_text("✗ not ok")
    expect(page.locator('#verdict-model [data-kind="duplicated"]')).to_have_text(
        "duplicated 2,000,000"
    )
    expect(page.locator('#verdict-model [data-kind="lost"]')).to_have_text("lost 0")
    open_lab(page, "timers=in-memory&crash=leader@0")
    expect(page.locator('#verdict-model-run [data-kind="lost"]')).to_have_text("lost 1,000,000")
    assert console == []


def test_realsim_on_demand_shows_its_numbers_verdict_and_agreement(
    page: Page, console: Console
) -> None:
    held: list[Route] = []
    page.route("**/api/realsim*", lambda route: held.append(route))
    open_lab(page, "pause=leader@0:30&fencing=off")
    button = page.locator('[data-action="realsim"]')
    button.click()
    expect(page.locator("#realsim-progress")).to_be_visible()
    expect(page.locator("#realsim-status")).to_contain_text(
        "running the real code in the simulator"
    )
    expect(button).to_have_attribute("aria-busy", "true")
    wait_for(page, lambda: len(held) == 1)
    assert len(held) == 1 and "pause=leader%400%3A30" in held[0].request.url
    held[0].fulfill(content_type="application/json", body=json.dumps(realsim_answer()))
    expect(page.locator("#realsim-progress")).to_be_hidden()
    expect(cell(page, "duplicates", "code")).to_have_text("20")
    expect(cell(page, "duplicates", "sim-model")).to_have_text("20")
    expect(cell(page, "backlog_peak", "code")).to_have_text("–")
    expect(page.locator("#realsim-scale")).to_have_text("2,000 of 1,000,000 tasks · seed 7")
    expect(page.locator("#realsim-replay")).to_have_text(
        "cronlab sim --seed 7 --pause leader@0:30 --fencing off"
    )
    verdict = page.locator("#verdict-realsim")
    expect(verdict).to_contain_text("Simulated code: ✗ not ok")
    expect(verdict.locator('[data-kind="duplicated"]')).to_have_text("duplicated 20")
    expect(verdict).to_contain_text("e.g. invoice-0007, invoice-0011")
    expect(page.locator("#realsim-disagree")).to_have_text(
        "Model and simulated code agree on every total at this scale."
    )
    expect(page.locator("#realsim-status")).to_have_text("simulated in 1,234 ms")
    assert console == []


def test_where_model_and_code_disagree_the_page_says_so(page: Page, console: Console) -> None:
    answer = realsim_answer(disagree=[{"metric": "duplicates", "model": 20, "code": 25}])
    answer["totals"] = {**answer["totals"], "duplicates": 25, "dispatched": 2025, "executed": 2025}
    stub_realsim(page, answer)
    open_lab(page, "pause=leader@0:30&fencing=off")
    page.locator('[data-action="realsim"]').click()
    expect(page.locator("#realsim-disagree")).to_have_text(
        "Model and simulated code disagree — duplicates: model 20, code 25."
    )
    expect(cell(page, "duplicates", "code")).to_have_class("disagree")
    expect(cell(page, "duplicates", "sim-model")).to_have_class("disagree")
    expect(cell(page, "missed", "code")).not_to_have_class("disagree")
    assert console == []


def test_a_scenario_the_simulator_cannot_run_is_said_not_faked(
    page: Page, console: Console
) -> None:
    stub_realsim(
        page, realsim_answer(supported=False, why="in-memory timers are not in the engine")
    )
    open_lab(page, "timers=in-memory")
    page.locator('[data-action="realsim"]').click()
    expect(page.locator("#realsim-status")).to_have_text(
        "The simulated code cannot run this scenario: in-memory timers are not in the engine. "
        "Nothing is shown rather than a guess."
    )
    expect(cell(page, "duplicates", "code")).to_have_text("–")
    expect(page.locator("#verdict-realsim")).to_be_hidden()
    assert console == []


def test_a_bad_query_is_shown_with_its_field(page: Page, console: Console) -> None:
    stub_realsim(
        page, {"error": "pause target replica 7 does not exist", "field": "pause"}, status=422
    )
    open_lab(page)
    page.locator('[data-action="realsim"]').click()
    expect(page.locator("#realsim-status")).to_have_text(
        "pause: pause target replica 7 does not exist"
    )
    assert all("422" in e for e in console), console


def test_a_newer_run_aborts_the_stale_one_and_a_change_marks_the_column_stale(
    page: Page, console: Console
) -> None:
    held: list[Route] = []
    failed: list[str] = []
    page.route("**/api/realsim*", lambda route: held.append(route))
    page.on("requestfailed", lambda r: failed.append(r.url) if "/api/realsim" in r.url else None)
    open_lab(page)
    page.locator('[data-action="realsim"]').click()
    page.wait_for_function("() => window.cronlabLab.state.realsimCtl")
    page.locator('[data-control="election"]').uncheck()
    settled(page)
    page.locator('[data-action="realsim"]').click()
    wait_for(page, lambda: len(held) == 2 and len(failed) == 1)
    assert len(held) == 2 and "election=off" in held[1].request.url
    assert len(failed) == 1 and "election" not in failed[0], "the first request aborted"
    newer = realsim_answer()
    newer["totals"] = {**newer["totals"], "duplicates": 4000}
    held[1].fulfill(content_type="application/json", body=json.dumps(newer))
    expect(cell(page, "duplicates", "code")).to_have_text("4,000")
    expect(page.locator("#realsim-stale")).to_be_hidden()
    page.locator('[data-control="election"]').check()
    expect(page.locator("#realsim-stale")).to_be_visible()
    expect(cell(page, "duplicates", "code")).to_have_class(re.compile(r"\bstale\b"))
    page.locator('[data-control="election"]').uncheck()
    expect(page.locator("#realsim-stale")).to_be_hidden()
    assert console == []


def test_a_busy_simulator_is_asked_again_and_a_small_difference_is_said(
    page: Page, console: Console
) -> None:
    answer = realsim_answer()
    answer["totals"] = {**answer["totals"], "redelivered": 1}  # within the scaling's tolerance
    replies = [(429, {"error": "another simulated run is going", "field": ""}), (200, answer)]
    asked: list[str] = []

    def handle(route: Route) -> None:
        status, body = replies[min(len(asked), 1)]
        asked.append(route.request.url)
        route.fulfill(status=status, content_type="application/json", body=json.dumps(body))

    page.route("**/api/realsim*", handle)
    open_lab(page, "worker-crash=0@30&effects=external")
    page.locator('[data-action="realsim"]').click()
    expect(page.locator("#realsim-status")).to_contain_text("waiting for the simulator")
    expect(page.locator("#realsim-status")).to_have_text("simulated in 1,234 ms", timeout=10_000)
    assert len(asked) == 2
    expect(page.locator("#realsim-disagree")).to_have_text(
        "Model and simulated code agree within what the simulator allows for the scaling; "
        "they differ by a little on redelivered (model 0, code 1)."
    )
    expect(cell(page, "redelivered", "code")).to_have_class("differs")
    assert all("429" in e for e in console), console


def realsim_lands(lab_url: str) -> bool:
    with urllib.request.urlopen(lab_url + "/openapi.json", timeout=5) as res:
        return "/api/realsim" in json.load(res)["paths"]


def test_realsim_of_the_lab_itself(page: Page, console: Console, lab_url: str) -> None:
    assert realsim_lands(lab_url), "the lab serves /api/realsim"
    open_lab(page, "pause=leader@0:30&fencing=off")
    page.locator('[data-action="realsim"]').click()
    expect(page.locator("#realsim-status")).to_contain_text("simulated in", timeout=120_000)
    expect(page.locator("#realsim-scale")).to_contain_text("of 1,000,000 tasks · seed")
    scale = page.evaluate("window.cronlabLab.state.realsim.body.scale.tasks")
    verdict = page.locator("#verdict-realsim")
    expect(verdict).to_contain_text("Simulated code: ✗ not ok")
    # The zombie's held batch at the simulator's scale: duplicates = min(batch, due) scaled.
    body = page.evaluate("window.cronlabLab.state.realsim.body")
    code, model = body["totals"], body["model"]["totals"]
    assert code["duplicates"] > 0 and model["duplicates"] > 0
    expect(cell(page, "duplicates", "code")).to_have_text(f"{code['duplicates']:,}")
    expect(cell(page, "duplicates", "sim-model")).to_have_text(f"{model['duplicates']:,}")
    expect(cell(page, "due", "code")).to_have_text(f"{scale:,}")
    expect(verdict.locator('[data-kind="duplicated"]')).to_have_text(
        f"duplicated {body['verdict']['counts']['duplicated']:,}"
    )
    expect(verdict.locator(".sample").first).to_contain_text("e.g. task:")
    expect(page.locator("#realsim-disagree")).not_to_be_empty()
    assert console == []
