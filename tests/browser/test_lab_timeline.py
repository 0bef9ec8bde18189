"""The lease timeline: one lane per replica (and per pod, plus the queue), who held which epoch
when, pauses, fenced and zombie writes, crashes and restarts as marks — on the charts' x axis."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect
from tests.browser.lab_helpers import Console, open_lab, settled

pytestmark = pytest.mark.browser

PIXEL = """([name, t, lane]) => {
  const u = window.cronlabLab.chart(name), m = window.cronlabLab.lanes[name];
  const x = Math.round(u.valToPos(t / 60, 'x', true));
  const h = u.bbox.height / m.lanes.length, y = Math.round(u.bbox.top + (lane + 0.5) * h);
  return Array.from(u.ctx.getImageData(x, y, 1, 1).data);
}"""


def lanes(page: Page, name: str) -> dict[str, Any]:
    return page.evaluate(f"window.cronlabLab.lanes.{name}")  # type: ignore[no-any-return]


def spans(model: dict[str, Any], lane: int) -> list[tuple[str, int, int, int, int]]:
    return [
        (s["state"], s["start"], s["end"], s["epoch"], s["held"])
        for s in model["lanes"][lane]["spans"]
    ]


def marks(model: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(m["kind"], m["t"], m["lane"]) for m in model["marks"]]


def test_lanes_show_who_held_which_epoch_and_the_zombie(page: Page, console: Console) -> None:
    open_lab(page, "pause=leader@0:30&fencing=off")
    m = lanes(page, "lanes")
    assert [lane["name"] for lane in m["lanes"]] == ["r0", "r1", "r2"]
    assert spans(m, 0) == [("paused", 0, 30, 1, 10_000), ("standby", 30, 1020, 0, 0)]
    assert spans(m, 1) == [("standby", 0, 10, 0, 0), ("leader", 10, 1020, 2, 0)]
    assert marks(m) == [("zombie", 30, 0)]
    label = page.locator("#chart-lanes").get_attribute("aria-label") or ""
    assert "r0: paused epoch 1 holding 10,000 00:00–00:30" in label
    assert "r1: standby 00:00–00:10, leader epoch 2 00:10–17:00" in label
    page.locator('[data-control="zoom"]').select_option("2")  # 30 s wide, clear of the marks
    paused = page.evaluate(PIXEL, ["lanes", 12, 0])
    leader = page.evaluate(PIXEL, ["lanes", 60, 1])
    assert paused[0] > paused[1] > paused[2], f"the paused lane is drawn amber: {paused}"
    assert leader[1] > leader[0] and leader[1] > leader[2], f"the leader lane is green: {leader}"
    assert console == []


def test_crash_restart_and_fenced_marks(page: Page, console: Console) -> None:
    open_lab(page, "crash=leader@0&restart-after=60&pause=replica:1@100:30")
    m = lanes(page, "lanes")
    assert ("crash", 0, 0) in marks(m) and ("restart", 60, 0) in marks(m)
    assert spans(m, 0)[:3] == [
        ("down", 0, 60, 0, 0),
        ("standby", 60, 110, 0, 0),
        ("leader", 110, 1010, 3, 0),
    ]
    assert ("paused", 100, 130, 0, 0) in spans(m, 1), (
        "epoch 2's leader paused, nothing left to hold"
    )
    assert not [k for k, _, _ in marks(m) if k in ("fenced", "zombie")]
    open_lab(page, "pause=leader@0:30")
    m = lanes(page, "lanes")
    assert ("paused", 0, 30, 1, 10_000) in spans(m, 0)
    assert marks(m) == [("fenced", 30, 0)]
    assert console == []


def test_pod_lanes_and_the_queue_lane(page: Page, console: Console) -> None:
    open_lab(page, "workers=12&worker-crash=9@30&lose=1000@40")
    m = lanes(page, "pods")
    names = [lane["name"] for lane in m["lanes"]]
    assert names[0] == "queue" and "pod 9" in names and len(names) == 9, names
    nine = names.index("pod 9")
    assert spans(m, nine) == [
        ("up", 0, 30, 0, 0),
        ("down", 30, 60, 0, 0),
        ("up", 60, m["lanes"][nine]["spans"][-1]["end"], 0, 0),
    ]
    assert ("worker_crash", 30, nine) in marks(m)
    assert ("redeliver", 60, 0) in marks(m) and ("lose", 40, 0) in marks(m)
    assert ("reconcile", 60, 0) in marks(m)
    expect(page.locator("#pods-more")).to_have_text("(8 of 12 drawn)")
    page.locator('[data-control="zoom"]').select_option("2")
    down = page.evaluate(PIXEL, ["pods", 45, nine])
    assert down[0] > down[2], f"a down pod is drawn red: {down}"
    assert console == []


def x_of(page: Page, name: str, t: int) -> float:
    return float(page.evaluate("([n, t]) => window.cronlabLab.pageX(n, t)", [name, t]))


def assert_aligned(page: Page) -> None:
    ranges = {
        n: page.evaluate("(n) => window.cronlabLab.xRange(n)", n)
        for n in ("backlog", "flow", "lanes", "pods")
    }
    assert len({tuple(r) for r in ranges.values()}) == 1, ranges
    for t in (0, 30, 300, 900):
        assert abs(x_of(page, "lanes", t) - x_of(page, "backlog", t)) < 0.6, t
        assert abs(x_of(page, "pods", t) - x_of(page, "flow", t)) < 0.6, t


def cursor_x(page: Page, name: str) -> float:
    box = page.locator(f"#chart-{name} .cursor").bounding_box()
    assert box is not None
    return box["x"]


def test_the_timelines_share_the_charts_x_axis_and_cursor(page: Page, console: Console) -> None:
    open_lab(page, "crash=leader@0&worker-crash=0@30")
    assert_aligned(page)
    page.locator("#c-scrub").fill("300")
    expect(page.locator("#clock")).to_contain_text("05:00 /")
    assert abs(cursor_x(page, "lanes") - cursor_x(page, "backlog")) < 1
    assert abs(cursor_x(page, "pods") - cursor_x(page, "flow")) < 1
    assert abs(cursor_x(page, "lanes") - x_of(page, "lanes", 300) + page.evaluate("scrollX")) < 2
    page.locator('[data-control="zoom"]').select_option("2")
    assert page.evaluate("window.cronlabLab.xRange('lanes')") == [0, 2]
    assert_aligned(page)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.wait_for_timeout(200)
    assert_aligned(page)
    page.locator('[data-control="replicas"]').fill("6")
    settled(page)
    expect(page.locator("#o-replicas")).to_have_text("6")
    page.wait_for_function("() => window.cronlabLab.lanes.lanes.lanes.length === 6")
    assert_aligned(page)
    assert console == []
