"""Helpers the lab page's browser tests share: open the page, read a card, stand in for
``/api/realsim`` with an answer of its documented shape."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, Route

Console = list[str]


def open_lab(page: Page, query: str = "", fragment: str = "") -> None:
    page.goto("/" + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else ""))
    page.wait_for_function("() => window.cronlabLab && window.cronlabLab.recomputes > 0")


def settled(page: Page) -> None:
    """Wait until no /api/simulate request is in flight (the page shows the latest answer)."""
    page.wait_for_function("() => !window.cronlabLab.state.inflight")


def metric(page: Page, name: str) -> str:
    return page.locator(f'[data-metric="{name}"]').inner_text()


def realsim_answer(**over: Any) -> dict[str, Any]:
    """A /api/realsim answer as the contract states it (issue 15), with ``over`` applied."""
    totals = {
        "due": 2000,
        "dispatched": 2020,
        "executed": 2020,
        "duplicates": 20,
        "missed": 0,
        "fenced_writes": 0,
        "redelivered": 0,
        "stuck": 0,
        "late": 0,
    }
    body: dict[str, Any] = {
        "supported": True,
        "why": None,
        "scale": {"tasks": 2000, "of": 1_000_000},
        "totals": totals,
        "verdict": {
            "ok": False,
            "counts": {"lost": 0, "duplicated": 20, "unexpected": 0, "late": 0, "stuck": 0},
            "samples": {"duplicated": ["invoice-0007", "invoice-0011"]},
        },
        "model": {"totals": {**totals}},
        "disagree": [],
        "seed": 7,
        "replay": "cronlab sim --seed 7 --pause leader@0:30 --fencing off",
        "elapsed_ms": 1234,
    }
    body.update(over)
    return body


def stub_realsim(page: Page, answer: dict[str, Any] | None = None, status: int = 200) -> list[str]:
    """Answer every /api/realsim request with ``answer``; returns the queries the page sent."""
    asked: list[str] = []

    def handle(route: Route) -> None:
        asked.append(route.request.url.split("?", 1)[-1] if "?" in route.request.url else "")
        route.fulfill(
            status=status,
            content_type="application/json",
            body=json.dumps(answer if answer is not None else realsim_answer()),
        )

    page.route("**/api/realsim*", handle)
    return asked
