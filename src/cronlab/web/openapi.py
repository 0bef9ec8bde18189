"""The lab's HTTP API, described by hand (OpenAPI 3.1); a test checks every route is here."""

from __future__ import annotations

from typing import Any

from cronlab.core.params import COMPARE_KEYS


def _q(name: str, schema: dict[str, Any], text: str, *, many: bool = False) -> dict[str, Any]:
    if many:
        schema = {"type": "array", "items": schema}
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": text,
        **({"explode": True} if many else {}),
    }


def _int(low: int, high: int, default: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high, "default": default}


SCENARIO_PARAMS = [
    _q(
        "preset",
        {"enum": ["midnight", "steady", "spread"], "default": "midnight"},
        "Workload shape: all at min 00, tasks every minute, or tasks spread over minutes.",
    ),
    _q(
        "tasks",
        _int(0, 10**12, 1_000_000),
        "Tasks (midnight, spread) or tasks per minute (steady).",
    ),
    _q("minutes", _int(1, 1440, 60), "Minutes for steady and spread."),
    _q(
        "bucket",
        {"type": "string", "pattern": r"^\d+=\d+$"},
        "MINUTE=COUNT; overrides the preset.",
        many=True,
    ),
    _q("replicas", _int(1, 32, 3), "Scheduler replicas."),
    _q("workers", _int(1, 100_000, 5), "Worker pods."),
    _q("rate", _int(1, 10**8, 200), "Tasks per second per pod."),
    _q("election", {"enum": ["lease", "off"], "default": "lease"}, "Leader election."),
    _q("ttl", _int(1, 86_400, 10), "Lease TTL in seconds (alias lease-ttl)."),
    _q(
        "timers",
        {"enum": ["durable", "in-memory"], "default": "durable"},
        "PENDING rows in a store, or timers in the dispatching process.",
    ),
    _q(
        "crash",
        {"type": "string", "pattern": r"^(leader|replica:\d+)@\d+$"},
        "leader@T or replica:I@T (seconds).",
        many=True,
    ),
    _q("restart-after", {"type": "string", "default": "300"}, "Seconds, or never."),
    _q(
        "compare",
        {"type": "string", "pattern": "^[a-z-]+=.+$"},
        f"KEY=VALUE: run again with a knob changed ({', '.join(COMPARE_KEYS)}).",
        many=True,
    ),
]

PROBLEM = {
    "type": "object",
    "required": ["error", "field"],
    "properties": {"error": {"type": "string"}, "field": {"type": "string"}},
}
RESULT = {
    "type": "object",
    "required": ["scenario", "totals", "timeline", "log", "sentence", "per_minute"],
    "description": "cronlab.core.params.result_dict(result, minutes=True); with compare, also "
    "`compare`: {changes, b (the same shape without timeline), diff (b − a)}.",
    "properties": {
        "totals": {
            "type": "object",
            "properties": {
                k: {"type": "integer"}
                for k in (
                    "due",
                    "dispatched",
                    "executed",
                    "duplicates",
                    "missed",
                    "backlog_peak",
                    "drain_time_s",
                )
            }
            | {"takeover_delays_s": {"type": "array", "items": {"type": "integer"}}},
        },
        "timeline": {"type": "object", "description": "Run-length encoded per-second series."},
        "per_minute": {"type": "object"},
        "log": {"type": "array", "items": {"type": "object"}},
        "sentence": {"type": "string"},
        "scenario": {"type": "object"},
    },
}
LIVE_START = {
    "type": "object",
    "properties": {
        "replicas": _int(1, 7, 3),
        "workers": _int(1, 16, 5),
        "election": {"enum": ["lease", "off"]},
        "timers": {"enum": ["durable", "in-memory"]},
        "ttl": _int(1, 120, 10),
        "count": _int(1, 1_000_000, 20_000),
        "drain_s": _int(5, 3600, 60),
        "lead_s": _int(2, 120, 5),
    },
}
GUARDED = {
    "403": {
        "description": "A cross-site request (Origin, Sec-Fetch-Site), or not loopback-bound "
        "and no valid token (X-Cronlab-Token).",
        "content": {"application/json": {"schema": PROBLEM}},
    },
    "413": {
        "description": "A body over 64 KiB.",
        "content": {"application/json": {"schema": PROBLEM}},
    },
    "415": {
        "description": "Not Content-Type: application/json.",
        "content": {"application/json": {"schema": PROBLEM}},
    },
}


def _json(schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"description": text, "content": {"application/json": {"schema": schema}}}


def _text(kind: str, text: str) -> dict[str, Any]:
    return {"description": text, "content": {kind: {"schema": {"type": "string"}}}}


PATHS: dict[str, Any] = {
    "/": {"get": {"summary": "The lab page", "responses": {"200": _text("text/html", "HTML")}}},
    "/api/simulate": {
        "get": {
            "summary": "Run the model for a scenario (the page's recompute)",
            "parameters": SCENARIO_PARAMS,
            "responses": {
                "200": _json(RESULT, "The run"),
                "422": _json(PROBLEM, "A bad parameter, named; or a run too long to chart"),
            },
        }
    },
    "/api/live": {
        "get": {
            "summary": "The live run's snapshot",
            "responses": {"200": _json({"type": "object"}, "Snapshot")},
        }
    },
    "/api/live/start": {
        "post": {
            "summary": "Start the real engine (one run at a time)",
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": LIVE_START}},
            },
            "responses": {
                "201": _json({"type": "object"}, "Started; the snapshot"),
                "409": _json(PROBLEM, "A run is already going"),
                "422": _json(PROBLEM, "A bad field, named"),
                **GUARDED,
            },
        }
    },
    "/api/live/stop": {
        "post": {
            "summary": "Kill every process of the run and remove its folder",
            "responses": {
                "200": _json({"type": "object"}, "Stopped"),
                "404": _json(PROBLEM, "No run"),
                **GUARDED,
            },
        }
    },
    "/api/live/chaos": {
        "post": {
            "summary": "Send real signals through cronlab chaos",
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["action"],
                            "properties": {
                                "action": {"enum": ["crash-leader", "pause-leader"]},
                                "for": _int(1, 600, 15),
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": _json({"type": "object"}, "Sent"),
                "404": _json(PROBLEM, "No run"),
                "422": _json(PROBLEM, "A bad field, named"),
                **GUARDED,
            },
        }
    },
    "/api/live/events": {
        "get": {
            "summary": "Server-sent events: `snapshot` on every change, `end` when the run stops",
            "responses": {"200": _text("text/event-stream", "SSE stream")},
        }
    },
    "/metrics": {
        "get": {
            "summary": "Prometheus text for the live engine",
            "responses": {"200": _text("text/plain", "Exposition format 0.0.4")},
        }
    },
    "/openapi.json": {
        "get": {
            "summary": "This document",
            "responses": {"200": _json({"type": "object"}, "OpenAPI")},
        }
    },
    "/static/{path}": {
        "get": {
            "summary": "The page's CSS, JS and vendored uPlot",
            "parameters": [
                {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": {"200": {"description": "A file"}},
        }
    },
}


def document() -> dict[str, Any]:
    """The OpenAPI document served at ``/openapi.json``."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cronlab lab",
            "version": "1",
            "description": "Cron at Scale: Leader Election & Worker Dispatch. The model "
            "(`/api/simulate`) and the real engine (`/api/live/*`).",
        },
        "paths": PATHS,
    }
