"""``/api/realsim`` (issue 15): the page's scenario on the real code, simulated — its numbers
agree with the model's at the same scale, its verdict names what went wrong, one run at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from cronlab.lab.web.app import LabConfig, create_app
from cronlab.lab.web.live import Live


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(LabConfig(), Live()), base_url="http://127.0.0.1") as c:
        yield c


def realsim(client: TestClient, query: str) -> dict[str, Any]:
    res = client.get("/api/realsim?" + query)
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return body


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("pause=leader@0:30&fencing=off", {"duplicates": 2, "fenced_writes": 0}),
        ("pause=leader@0:30", {"duplicates": 0, "fenced_writes": 2}),
        ("election=off", {"duplicates": 400}),
        ("crash=leader@0&timers=in-memory", {"missed": 200, "executed": 0}),
    ],
)
def test_the_simulated_code_agrees_with_the_model(
    client: TestClient, query: str, expect: dict[str, int]
) -> None:
    body = realsim(client, query)
    assert body["supported"] and body["disagree"] == []
    assert {k: body["totals"][k] for k in expect} == expect
    assert {k: body["model"]["totals"][k] for k in expect} == expect


def test_lost_messages_without_a_reconciler_are_stuck_in_both(client: TestClient) -> None:
    body = realsim(client, "lose=5000@30&reconcile=off")  # the code loses whole envelopes
    assert body["totals"]["stuck"] >= 1 and body["model"]["totals"]["stuck"] >= 1
    assert body["disagree"] == [] and body["verdict"]["counts"]["stuck"] >= 1
    assert realsim(client, "lose=5000@30")["totals"]["stuck"] == 0


def test_its_verdict_names_what_went_wrong_with_samples(client: TestClient) -> None:
    body = realsim(client, "pause=leader@0:30&fencing=off")
    assert not body["verdict"]["ok"] and body["verdict"]["counts"]["duplicated"] == 2
    assert body["verdict"]["samples"]["duplicated"][0].startswith("task:")
    assert "--pause leader@0:30" in body["replay"] and "--fencing off" in body["replay"]
    calm = realsim(client, "")
    assert calm["verdict"]["ok"] and calm["scale"] == {"tasks": 200, "of": 1_000_000}


def test_what_it_cannot_simulate_in_seconds_it_says(client: TestClient) -> None:
    body = realsim(client, "preset=steady&minutes=1440")
    assert body == {"supported": False, "why": body["why"]} and "simulated here" in body["why"]


def test_one_at_a_time_and_a_bad_query_is_a_422(client: TestClient) -> None:
    lab = client.app.state.lab  # type: ignore[attr-defined]
    assert lab.realsim_gate.acquire(blocking=False)
    try:
        busy = client.get("/api/realsim?rate=7")
    finally:
        lab.realsim_gate.release()
    assert busy.status_code == 429 and "another simulated run" in busy.json()["error"]
    bad = client.get("/api/realsim?pause=leader@0")
    assert bad.status_code == 422 and bad.json()["field"] == "pause"
