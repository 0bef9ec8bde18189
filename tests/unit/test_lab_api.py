"""The lab's HTTP API through Starlette's TestClient: the model's numbers, 422s, OpenAPI, tokens."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from cronlab.exceptions import ConfigError
from cronlab.lab import params
from cronlab.lab.model import simulate
from cronlab.lab.web import openapi
from cronlab.lab.web.app import LabConfig, create_app
from cronlab.lab.web.live import Live, LiveConfig
from cronlab.web.guard import is_loopback

LOOPBACK = "http://127.0.0.1"
JSON_TYPE = {"content-type": "application/json"}
EVIL = "http://evil.example"


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(LabConfig()), base_url=LOOPBACK)


def totals(client: TestClient, query: str) -> dict[str, Any]:
    res = client.get(f"/api/simulate?{query}")
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return body["totals"]  # type: ignore[no-any-return]


def test_default_scenario_equals_the_model(client: TestClient) -> None:
    expected = params.totals_dict(simulate(params.build_scenario()).totals)
    assert totals(client, "") == expected
    assert expected["drain_time_s"] == 1000


def test_election_off_duplicates_two_million(client: TestClient) -> None:
    assert totals(client, "election=off")["duplicates"] == 2_000_000


def test_crash_leader_durable_loses_nothing_and_takes_over_in_ttl(client: TestClient) -> None:
    t = totals(client, "crash=leader@0")
    assert (t["missed"], t["takeover_delays_s"], t["drain_time_s"]) == (0, [10], 1010)


def test_crash_leader_in_memory_misses_the_million(client: TestClient) -> None:
    assert totals(client, "crash=leader@0&timers=in-memory")["missed"] == 1_000_000


def test_result_has_the_pages_fields(client: TestClient) -> None:
    body = client.get("/api/simulate?preset=spread&tasks=600&minutes=6&ttl=4").json()
    assert set(body) >= {"scenario", "totals", "timeline", "log", "sentence", "per_minute"}
    assert body["scenario"]["lease_ttl"] == 4
    assert body["per_minute"]["dispatched"][:6] == [100] * 6
    assert body["sentence"].startswith("leader holds lease; crash costs ~4s")


def test_repeated_crashes_and_aliases(client: TestClient) -> None:
    query = "crash=leader@0&crash=replica:1@5&lease-ttl=20&restart-after=never"
    expected = simulate(
        params.build_scenario(crashes=["leader@0", "replica:1@5"], lease_ttl=20, restart_after=None)
    ).totals
    assert totals(client, query) == params.totals_dict(expected)


def test_compare_returns_b_and_the_difference(client: TestClient) -> None:
    body = client.get("/api/simulate?compare=election=off").json()
    assert body["compare"]["changes"] == ["election=off"]
    assert body["compare"]["b"]["totals"]["duplicates"] == 2_000_000
    assert body["compare"]["diff"]["duplicates"] == 2_000_000
    assert body["compare"]["diff"]["drain_time_s"] == 3000 - 1000


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("replicas=0", "replicas"),
        ("replicas=three", "replicas"),
        ("workers=-1", "workers"),
        ("minutes=100000", "minutes"),
        ("preset=noon", "preset"),
        ("election=maybe", "election"),
        ("timers=disk", "timers"),
        ("crash=leader", "crash"),
        ("crash=replica:7@0", "crash"),
        ("bucket=zero", "bucket"),
        ("restart-after=soon", "restart-after"),
        ("compare=election", "compare"),
        ("compare=colour=red", "compare"),
        ("compare=replicas=0", "compare"),
        ("bogus=1", "bogus"),
        ("replicas=3&replicas=4", "replicas"),
        # two buckets of one minute past the bound: the scenario's fault, not the crash's
        ("bucket=0=600000000000&bucket=0=600000000000&crash=leader@0", "scenario"),
    ],
)
def test_bad_parameters_are_422_naming_the_field(
    client: TestClient, query: str, field: str
) -> None:
    res = client.get(f"/api/simulate?{query}")
    assert res.status_code == 422
    assert res.json()["field"] == field
    assert res.json()["error"]


def test_every_route_is_in_openapi(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    app = client.app
    for route in app.routes:  # type: ignore[attr-defined]
        assert isinstance(route, Route | Mount)
        path = route.path + "/{path}" if isinstance(route, Mount) else route.path
        assert path in doc["paths"], path
        if isinstance(route, Route) and route.methods:
            methods = {m.lower() for m in route.methods} - {"head"}
            assert methods <= set(doc["paths"][path]), (path, methods)


def test_openapi_lists_every_query_parameter(client: TestClient) -> None:
    from cronlab.lab.web import query

    doc = client.get("/openapi.json").json()
    names = {p["name"] for p in doc["paths"]["/api/simulate"]["get"]["parameters"]}
    assert names == (query.SINGLE | set(query.REPEATABLE)) - {"token"}


def test_page_and_static_assets_are_served_locally(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "Cron at Scale: Leader Election &amp; Worker Dispatch" in page.text
    assert "http" not in page.text.split("<body>")[0].replace('name="viewport"', "")
    for asset in ("/static/lab/main.js", "/static/lab.css", "/static/vendor/uPlot.iife.min.js"):
        assert client.get(asset).status_code == 200, asset


def test_metrics_without_a_run(client: TestClient) -> None:
    res = client.get("/metrics")
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("text/plain")
    assert "cronlab_live_running 0.0" in res.text


def test_foreign_host_header_is_refused_on_loopback(client: TestClient) -> None:
    res = client.get("/api/simulate", headers={"host": "attacker.example"})
    assert res.status_code == 400


def test_a_lab_on_another_loopback_address_answers_there() -> None:
    """Issue 13: ``lab --host 127.0.0.2`` started, then answered 400 to every request."""
    client = TestClient(create_app(LabConfig(host="127.0.0.2")), base_url="http://127.0.0.2")
    assert client.get("/api/simulate").status_code == 200
    assert client.get("/api/simulate", headers={"host": "attacker.example"}).status_code == 400


def test_live_endpoints_allowed_on_loopback_without_token(client: TestClient) -> None:
    res = client.post("/api/live/stop", json={})
    assert res.status_code == 404
    assert res.json()["field"] == "live"


def test_off_loopback_needs_a_token() -> None:
    with pytest.raises(ConfigError, match=r"0\.0\.0\.0 is not loopback"):
        LabConfig(host="0.0.0.0")
    assert not is_loopback("0.0.0.0") and is_loopback("::1") and is_loopback("127.0.0.2")


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_with_a_token_live_endpoints_need_it(host: str) -> None:
    client = TestClient(create_app(LabConfig(host=host, token="s3cret")), base_url=LOOPBACK)
    for headers in ({}, {"x-cronlab-token": "wrong"}, {"authorization": "Bearer nope"}):
        for path in ("/api/live/start", "/api/live/stop", "/api/live/chaos"):
            assert client.post(path, headers=headers).status_code == 403, (path, headers)
    ok = client.post("/api/live/stop", json={}, headers={"x-cronlab-token": "s3cret"})
    assert ok.status_code == 404
    bearer = client.post("/api/live/stop", json={}, headers={"authorization": "Bearer s3cret"})
    assert bearer.status_code == 404
    assert client.get("/api/simulate?election=off").status_code == 200


def test_live_start_validates_fields(client: TestClient) -> None:
    for body, field in (
        ({"replicas": 0}, "replicas"),
        ({"count": "many"}, "count"),
        ({"colour": "red"}, "colour"),
        ({"election": "maybe"}, "election"),
    ):
        res = client.post("/api/live/start", json=body)
        assert res.status_code == 422, body
        assert res.json()["field"] == field
    res = client.post("/api/live/start", content=b"[1, 2]", headers=JSON_TYPE)
    assert (res.status_code, res.json()["field"]) == (422, "body")


def test_live_chaos_without_a_run_is_404_and_bad_action_422(client: TestClient) -> None:
    assert client.post("/api/live/chaos", json={"action": "crash-leader"}).status_code == 404
    res = client.post("/api/live/chaos", json={"action": "reboot"})
    assert (res.status_code, res.json()["field"]) == (422, "action")


def test_events_stream_ends_when_no_run_is_going(client: TestClient) -> None:
    with client.stream("GET", "/api/live/events") as res:
        assert res.headers["content-type"].startswith("text/event-stream")
        text = "".join(res.iter_text())
    assert text.startswith("event: snapshot\ndata: {")
    assert '"running": false' in text
    assert text.endswith("event: end\ndata: {}\n\n")


def test_cli_refuses_a_public_host_without_token(capsys: pytest.CaptureFixture[str]) -> None:
    from cronlab.cli import main

    assert main(["lab", "--host", "0.0.0.0", "--no-open"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("cronlab: error: --host 0.0.0.0 is not loopback: give --token")


def test_cli_reports_a_port_in_use_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from cronlab.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["lab", "--port", str(port), "--no-open"]) == 2
    assert capsys.readouterr().err == f"cronlab: error: port {port} on 127.0.0.1 is in use\n"


def test_live_commands_follow_the_engine_contract() -> None:
    from cronlab.lab.web.live import CRONLAB, LiveConfig, commands

    cfg = LiveConfig(replicas=4, workers=5, election="off", timers="in-memory", lease_ttl=7)
    cmds = commands(cfg, "sqlite:////tmp/x/lab.db")
    assert cfg.worker_rate == 67  # 20,000 invoices / (5 pods × 60 s), rounded up
    assert cmds["cluster"][len(CRONLAB) :] == [
        *("lab", "cluster", "--store", "sqlite:////tmp/x/lab.db", "--replicas", "4"),
        *("--workers", "5"),
        *("--election", "off", "--timers", "in-memory", "--lease-ttl", "7"),
        *("--worker-rate", "67", "--fencing", "on", "--visibility", "30"),
    ]
    seed = cmds["seed"][len(CRONLAB) :]
    assert seed[:2] == ["invoices", "seed"] and "--json" in seed
    assert seed[seed.index("--at") + 1] == "+5"
    assert cmds["status"][-1] == cmds["report"][-1] == "--json"


def test_live_prediction_counts_the_crashes_sent() -> None:
    from cronlab.lab.web.live import Faults, LiveConfig, prediction

    cfg = LiveConfig(count=1000, workers=2, drain_s=10, timers="in-memory")
    assert prediction(cfg, Faults())["totals"]["missed"] == 0
    crashed = Faults(crashes=["leader@0"])  # (crashed before the trigger: at 0, as the lab says)
    assert prediction(cfg, crashed)["totals"]["missed"] == 1000
    zombie = Faults(pauses=["leader@0:15"])
    off = LiveConfig(count=1000, workers=2, drain_s=10, fencing="off")
    assert prediction(off, zombie)["totals"]["duplicates"] == 1000  # its whole batch
    assert prediction(LiveConfig(count=1000), zombie)["totals"]["fenced_writes"] == 1000
    assert prediction(cfg, Faults(worker_crashes=["0@3"]))["totals"]["redelivered"] > 0
    # the cluster restarts a killed worker after 300 s, as the model is told (its own default
    # is 30 s): 5 pods × 20/s drain 30,000 in 300 s; pod 0, killed at 3 s, is back at 303 s
    slow = LiveConfig(count=30_000, workers=5, drain_s=300)
    drain = prediction(slow, Faults(worker_crashes=["0@3"]))["totals"]["drain_time_s"]
    assert drain > prediction(slow, Faults())["totals"]["drain_time_s"] + 40


def test_metrics_render_the_engine_report() -> None:
    from cronlab.lab.web import metrics

    snap = {
        "running": True,
        "report": {"dispatched": 600, "executed": 598, "duplicates": 0, "missed": 0,
                   "backlog_peak": 600, "takeover_delays_s": [2.3]},
        "status": {"queue_depth": 2, "leader": {"replica": 1, "epoch": 2}},
    }  # fmt: skip
    lines = metrics.render(snap).splitlines()
    for expected in (
        "cronlab_live_running 1.0",
        "cronlab_live_executed_total 598.0",
        "cronlab_live_backlog 2.0",
        "cronlab_live_leader_epoch 2.0",
        "cronlab_live_takeovers_total 1.0",
        "# TYPE cronlab_live_dispatched_total counter",
    ):
        assert expected in lines


# -- cross-site requests, bodies, headers (issue 13: each request below was run against main) --


class Tripwire(Live):
    """A live run that notes what reached it instead of starting processes (these tests are
    about what must never reach it; before the fix, these requests started real clusters)."""

    def __init__(self) -> None:
        super().__init__()
        self.reached: list[str] = []
        self.configs: list[LiveConfig] = []
        self.seconds: list[int] = []

    def start(self, cfg: LiveConfig) -> dict[str, Any]:
        self.reached.append("start")
        self.configs.append(cfg)
        return {}

    def chaos(self, action: str, seconds: int, mid_dispatch: bool = False) -> dict[str, Any]:
        self.reached.append(action)
        self.seconds.append(seconds)
        return {}


def test_a_page_elsewhere_cannot_start_a_cluster_or_crash_its_leader() -> None:
    """Before: 201 (a real cluster started) and 200 (the leader SIGKILLed)."""
    live = Tripwire()
    client = TestClient(create_app(LabConfig(), live), base_url=LOOPBACK)
    attempts = [
        ("/api/live/start", {"origin": EVIL, "content-type": "text/plain"}, b"{}"),
        (
            "/api/live/chaos",
            {"origin": EVIL, "content-type": "text/plain"},
            b'{"action":"crash-leader"}',
        ),
        # a plain HTML form, enctype=text/plain: name {"action":"crash-leader","x": value "}
        (
            "/api/live/chaos",
            {"origin": EVIL, "content-type": "text/plain"},
            b'{"action":"crash-leader","x":"="}',
        ),
        (
            "/api/live/chaos",
            {"sec-fetch-site": "cross-site", "content-type": "application/json"},
            b'{"action":"crash-leader"}',
        ),
        ("/api/live/start", {"origin": "null", "content-type": "application/json"}, b"{}"),
    ]
    for path, headers, body in attempts:
        res = client.post(path, content=body, headers=headers)
        assert (res.status_code, res.json()["field"]) == (403, "origin"), (path, headers)
    assert live.reached == []
    same_site = {"origin": LOOPBACK, "sec-fetch-site": "same-origin"}
    assert client.post("/api/live/start", json={}, headers=same_site).status_code == 201
    assert live.reached == ["start"]  # the lab's own page still gets through


def test_a_state_changing_request_must_be_json(client: TestClient) -> None:
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        res = client.post(
            "/api/live/chaos",
            content=b'{"action":"crash-leader"}',
            headers={"content-type": kind} if kind else {},
        )
        assert res.status_code == 415, kind
    same_site = {"origin": LOOPBACK, "sec-fetch-site": "same-origin"}
    res = client.post("/api/live/chaos", json={"action": "crash-leader"}, headers=same_site)
    assert res.status_code == 404  # past every guard: there is no run to crash


def test_bodies_are_bounded_and_bad_ones_are_422_never_500(client: TestClient) -> None:
    big = client.post("/api/live/start", content=b" " * (70 * 1024), headers=JSON_TYPE)
    assert big.status_code == 413
    for body in (
        b"\xff\xfe{}",
        b"[" * 30_000 + b"]" * 30_000,  # within the size bound, past the recursion limit
        b'{"count": ' + b"9" * 5000 + b"}",
    ):
        res = client.post("/api/live/start", content=body, headers=JSON_TYPE)
        assert (res.status_code, res.json()["field"]) == (422, "body"), body[:20]


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for path in (
        "/",
        "/api/simulate",
        "/openapi.json",
        "/static/lab/main.js",
        "/nowhere",
        "/api/live",
    ):
        res = client.get(path)
        assert res.headers["x-content-type-options"] == "nosniff", path
        assert res.headers["x-frame-options"] == "DENY", path
        assert res.headers["referrer-policy"] == "no-referrer", path
        assert "frame-ancestors 'none'" in res.headers["content-security-policy"], path
    assert "script-src 'self'" in client.get("/").headers["content-security-policy"]


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [  # issue 13: 3 GB and a 500 after 27 s; 2.4 GB; a 199 MB answer; OverflowError 500s
        ("tasks=1000000000000", "scenario", "the lab charts at most 50,000"),
        ("bucket=100000000=5", "scenario", "bucket minute"),
        ("bucket=10000000=5", "scenario", "the lab charts at most"),
        ("bucket=99999999999999999999999=5", "scenario", "bucket minute"),
        ("crash=leader@99999999999999999999999", "crash", "crash time"),
        ("restart-after=99999999999999999999999", "scenario", "restart-after"),
    ],
)
def test_a_run_too_costly_is_a_422_that_says_why(
    client: TestClient, query: str, field: str, words: str
) -> None:
    res = client.get(f"/api/simulate?{query}")
    assert res.status_code == 422, res.text[:200]
    assert res.json()["field"] == field and words in res.json()["error"]


def test_a_whole_number_written_as_a_float_is_that_number() -> None:
    """Issue 13: ``"for": 215.0`` was refused although JSON Schema calls it an integer."""
    live = Tripwire()
    client = TestClient(create_app(LabConfig(), live), base_url=LOOPBACK)
    chaos = client.post("/api/live/chaos", json={"action": "pause-leader", "for": 215.0})
    assert chaos.status_code == 200, chaos.text
    assert live.reached == ["pause-leader"] and live.seconds == [215]
    started = client.post("/api/live/start", json={"replicas": 3.0, "ttl": 4.0, "count": 1e3})
    assert started.status_code == 201, started.text
    assert live.configs == [LiveConfig(replicas=3, lease_ttl=4, count=1000)]
    assert type(live.configs[0].replicas) is int
    assert totals(client, "tasks=1e3&replicas=3.0")["due"] == 1000
    for body, field in (
        ({"action": "pause-leader", "for": 215.5}, "for"),
        ({"action": "pause-leader", "for": True}, "for"),
        ({"action": "pause-leader", "for": 15, "x": 1}, "x"),
    ):
        res = client.post("/api/live/chaos", json=body)
        assert (res.status_code, res.json()["field"]) == (422, field), body


@pytest.mark.parametrize(
    "body",
    [
        b'{"count": NaN}',  # Python's json reads NaN and Infinity: not whole numbers (a guard)
        b'{"count": Infinity}',
        b'{"\\udcff": 1}',  # a lone surrogate, echoed in the error, could not be encoded: 500
    ],
)
def test_a_body_json_cannot_hold_is_a_422(client: TestClient, body: bytes) -> None:
    res = client.post("/api/live/start", content=body, headers=JSON_TYPE)
    assert res.status_code == 422, res.text


def test_stop_takes_an_empty_json_object_and_nothing_else(client: TestClient) -> None:
    """Before, stop ignored its body; the document now says what it takes."""
    assert client.post("/api/live/stop", json={}).status_code == 404  # no run, every guard passed
    res = client.post("/api/live/stop", json={"force": True})
    assert (res.status_code, res.json()["field"]) == (422, "force")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("compare=a=0", "compare"),  # issue 13: the pattern took it, the server refused it
        ("compare=replicas=0", "compare"),
        ("crash=leader@1000000001", "crash"),
        ("restart-after=soon", "restart-after"),
        ("bucket=16666667=1", "scenario"),
    ],
)
def test_the_documented_patterns_refuse_what_the_server_refuses(
    client: TestClient, query: str, field: str
) -> None:
    name, _, value = query.partition("=")
    assert client.get(f"/api/simulate?{query}").json()["field"] == field
    assert not re.match(_pattern(client, name), value), query


@pytest.mark.parametrize(
    "query",
    [
        "compare=election=off",
        "compare=lease-ttl=86400",
        "compare=crash=none",
        "compare=crash=replica:2@0",
        "crash=replica:2@3600",
        "restart-after=never",
        "bucket=40000=1000000",
        "crash=",  # an empty value of a repeated parameter is no value
    ],
)
def test_the_documented_patterns_take_what_the_server_takes(client: TestClient, query: str) -> None:
    name, _, value = query.partition("=")
    assert re.match(_pattern(client, name), value), query
    assert client.get(f"/api/simulate?{query}").status_code == 200


def test_a_value_with_spaces_around_it_is_refused(client: TestClient) -> None:
    res = client.get("/api/simulate?crash=%20leader@0")
    assert (res.status_code, res.json()["field"]) == (422, "crash")


def test_the_compare_pattern_names_every_compare_key() -> None:
    assert tuple(openapi.CHANGES) == params.COMPARE_KEYS


@pytest.mark.parametrize("high", [1, 9, 10, 31, 32, 99, 100, 1440, 86_400])
def test_upto_matches_exactly_the_numbers_up_to_its_bound(high: int) -> None:
    numbers = re.compile(f"^{openapi.upto(high, zero=True)}$")
    assert [n for n in range(high * 10 + 10) if numbers.match(str(n))] == list(range(high + 1))
    assert not numbers.match(f"0{high}") and not re.match(f"^{openapi.upto(high)}$", "0")


def test_upto_holds_at_the_models_bounds() -> None:
    for high in (10**8, 10**9, 10**12, 16_666_666):
        numbers = re.compile(f"^{openapi.upto(high)}$")
        assert numbers.match(str(high)) and numbers.match(str(high - 1))
        assert not numbers.match(str(high + 1)) and not numbers.match(str(high * 10))


def test_the_documents_sse_and_static_answers_are_the_servers(client: TestClient) -> None:
    """Issue 13: the SSE events did not match their documented type, and the 404 of
    ``/static/{path}`` was undocumented."""
    paths = client.get("/openapi.json").json()["paths"]
    assert "404" in paths["/static/{path}"]["get"]["responses"]
    assert client.get("/static/nowhere.js").status_code == 404
    stream = paths["/api/live/events"]["get"]["responses"]["200"]["content"]
    events = stream["text/event-stream"]["schema"]["oneOf"]
    assert [e["properties"]["event"]["const"] for e in events] == ["snapshot", "end"]


def _pattern(client: TestClient, name: str) -> str:
    doc = client.get("/openapi.json").json()
    param = next(p for p in doc["paths"]["/api/simulate"]["get"]["parameters"] if p["name"] == name)
    schema = param["schema"]
    return str(schema.get("items", schema)["pattern"])


def test_a_live_visibility_out_of_bounds_is_refused_and_one_in_bounds_reaches_the_cluster(
    client: TestClient,
) -> None:
    """The page's visibility timeout is the live run's too (it was the engine's own 30 s)."""
    from cronlab.lab.web.live import LiveConfig, commands

    for bad in (0, 601):
        res = client.post("/api/live/start", json={"visibility": bad})
        assert (res.status_code, res.json()["field"]) == (422, "visibility")
        assert res.json()["error"] == f"live visibility must be 1..600 s, got {bad}"
    cluster = commands(LiveConfig(visibility=5), "sqlite:////tmp/x/lab.db")["cluster"]
    assert cluster[cluster.index("--visibility") + 1] == "5"


def test_fencing_off_with_election_off_is_refused_in_words(client: TestClient) -> None:
    """Found by schemathesis after issue 15's fencing field: the document allowed the pair (now
    a ``not`` says it does not) and the error read "live fencing must be fencing off needs…"."""
    res = client.post("/api/live/start", json={"election": "off", "fencing": "off"})
    assert (res.status_code, res.json()["field"]) == (422, "fencing")
    assert res.json()["error"] == (
        "live fencing must be on with election off (nobody holds a lease to fence)"
    )
    start = client.get("/openapi.json").json()["paths"]["/api/live/start"]["post"]
    schema = start["requestBody"]["content"]["application/json"]["schema"]
    assert schema["not"]["properties"] == {
        "election": {"const": "off"},
        "fencing": {"const": "off"},
    }
