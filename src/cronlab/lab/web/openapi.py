"""The lab's HTTP API, described by hand (OpenAPI 3.1); a test checks every route is here."""

from __future__ import annotations

import dataclasses
from typing import Any

from cronlab.lab import model
from cronlab.lab.params import COMPARE_KEYS
from cronlab.lab.web.query import REPEATABLE


def _q(name: str, schema: dict[str, Any], text: str, *, many: bool = False) -> dict[str, Any]:
    if many:
        schema = {"type": "array", "items": schema, "maxItems": REPEATABLE[name]}
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


def _each(pattern: str) -> dict[str, Any]:
    """A repeated parameter's value: ``pattern``, or empty (which is no value)."""
    return {"type": "string", "pattern": f"^(?:{pattern})?$"}


def upto(high: int, *, zero: bool = False) -> str:
    """A regular expression for the decimal numbers 1..``high`` (0..``high`` with ``zero``),
    written without sign or leading zeros: the bounds of a number inside a string parameter."""
    digits = str(high)
    forms = ["0"] if zero else []
    if len(digits) > 1:
        forms.append(rf"[1-9]\d{{0,{len(digits) - 2}}}")  # fewer digits than high
    for i, top in enumerate(digits):  # as many digits: high's prefix, then a smaller digit
        low = 1 if i == 0 else 0
        if int(top) > low:
            forms.append(rf"{digits[:i]}[{low}-{int(top) - 1}]\d{{{len(digits) - i - 1}}}")
    forms.append(digits)
    return "(?:" + "|".join(forms) + ")"


SECONDS = upto(model.MAX_SECONDS, zero=True)
CRASH = rf"(?:leader|replica:{upto(model.MAX_REPLICAS - 1, zero=True)})@{SECONDS}"
RESTART = rf"(?:never|{SECONDS})"
LENGTH = upto(model.MAX_TTL_S)
PAUSE = rf"(?:leader|replica:{upto(model.MAX_REPLICAS - 1, zero=True)})@{SECONDS}:{LENGTH}"
WORKER_CRASH = rf"{upto(model.MAX_WORKERS - 1, zero=True)}@{SECONDS}"
LOSE = rf"{upto(model.MAX_TASKS)}@{SECONDS}"
RECONCILE = rf"(?:off|{LENGTH})"
CHANGES = {  # compare KEY=VALUE: each key's values, as the same knob takes them
    "election": "(?:lease|off)",
    "replicas": upto(model.MAX_REPLICAS),
    "workers": upto(model.MAX_WORKERS),
    "rate": upto(model.MAX_RATE),
    "lease-ttl": upto(model.MAX_TTL_S),
    "timers": "(?:durable|in-memory)",
    "restart-after": RESTART,
    "crash": f"(?:none|{CRASH})",
    "fencing": "(?:on|off)",
    "batch": upto(model.MAX_TASKS),
    "effects": "(?:transactional|external)",
    "visibility": LENGTH,
    "pod-restart": RESTART,
    "reconcile": RECONCILE,
    "pause": f"(?:none|{PAUSE})",
    "worker-crash": f"(?:none|{WORKER_CRASH})",
    "lose": f"(?:none|{LOSE})",
}

SCENARIO_PARAMS = [
    _q(
        "preset",
        {"enum": ["midnight", "steady", "spread"], "default": "midnight"},
        "Workload shape: all at min 00, tasks every minute, or tasks spread over minutes.",
    ),
    _q(
        "tasks",
        _int(0, model.MAX_TASKS, 1_000_000),
        "Tasks (midnight, spread) or tasks per minute (steady).",
    ),
    _q("minutes", _int(1, model.MAX_BUCKETS, 60), "Minutes for steady and spread."),
    _q(
        "bucket",
        _each(f"{upto(model.MAX_SECONDS // 60, zero=True)}={upto(model.MAX_TASKS, zero=True)}"),
        "MINUTE=COUNT; overrides the preset. The counts sum to at most 10^12.",
        many=True,
    ),
    _q("replicas", _int(1, model.MAX_REPLICAS, 3), "Scheduler replicas."),
    _q("workers", _int(1, model.MAX_WORKERS, 5), "Worker pods."),
    _q("rate", _int(1, model.MAX_RATE, 200), "Tasks per second per pod."),
    _q("election", {"enum": ["lease", "off"], "default": "lease"}, "Leader election."),
    _q("ttl", _int(1, model.MAX_TTL_S, 10), "Lease TTL in seconds (alias lease-ttl)."),
    _q(
        "timers",
        {"enum": ["durable", "in-memory"], "default": "durable"},
        "PENDING rows in a store, or timers in the dispatching process.",
    ),
    _q(
        "crash",
        _each(CRASH),
        "leader@T or replica:I@T (seconds; I below replicas).",
        many=True,
    ),
    _q(
        "restart-after",
        {"type": "string", "pattern": f"^{RESTART}$", "default": "300"},
        "Seconds, or never.",
    ),
    _q(
        "pause",
        _each(PAUSE),
        "leader@T:D or replica:I@T:D: stop at second T for D seconds, then resume (a zombie "
        "leader if D is past its lease).",
        many=True,
    ),
    _q(
        "fencing",
        {"enum": ["on", "off"], "default": "on"},
        "Off: a paused leader that lost its lease still writes the batch it held.",
    ),
    _q("batch", _int(1, model.MAX_TASKS, 10_000), "Tasks a leader reads and writes per batch."),
    _q("worker-crash", _each(WORKER_CRASH), "POD@T: worker pod POD dies at second T.", many=True),
    _q("visibility", _int(1, model.MAX_TTL_S, 30), "Queue visibility timeout, seconds."),
    _q(
        "pod-restart",
        {"type": "string", "pattern": f"^{RESTART}$", "default": "30"},
        "A crashed pod is back after so many seconds, or never.",
    ),
    _q(
        "effects",
        {"enum": ["transactional", "external"], "default": "transactional"},
        "A task's effect commits with its ack, or is sent before it (an e-mail).",
    ),
    _q("lose", _each(LOSE), "N@T: N queued messages lost at second T.", many=True),
    _q(
        "reconcile",
        {"type": "string", "pattern": f"^{RECONCILE}$", "default": "60"},
        "The leader re-enqueues lost messages every so many seconds, or off.",
    ),
    _q(
        "compare",
        _each("|".join(f"{k}={v}" for k, v in CHANGES.items())),
        f"KEY=VALUE: run again with a knob changed ({', '.join(COMPARE_KEYS)}); VALUE as "
        "that knob takes it (crash: also none).",
        many=True,
    ),
]

# The model's totals that are counts (takeover_delays_s is a list); the simulated real code
# counts the same but for the backlog peak and the drain time (sim.lab._totals).
TOTALS = [f.name for f in dataclasses.fields(model.Totals) if f.name != "takeover_delays_s"]
REAL_TOTALS = [k for k in TOTALS if k not in ("backlog_peak", "drain_time_s")]
PROBLEM = {
    "type": "object",
    "required": ["error", "field"],
    "properties": {"error": {"type": "string"}, "field": {"type": "string"}},
}
RESULT = {
    "type": "object",
    "required": ["scenario", "totals", "timeline", "log", "sentence", "per_minute"],
    "description": "cronlab.lab.params.result_dict(result, minutes=True); with compare, also "
    "`compare`: {changes, b (the same shape without timeline), diff (b − a)}.",
    "properties": {
        "totals": {
            "type": "object",
            "properties": {k: {"type": "integer"} for k in TOTALS}
            | {"takeover_delays_s": {"type": "array", "items": {"type": "integer"}}},
        },
        "timeline": {"type": "object", "description": "Run-length encoded per-second series."},
        "per_minute": {"type": "object"},
        "log": {"type": "array", "items": {"type": "object"}},
        "sentence": {"type": "string"},
        "faults": {"type": "array", "items": {"type": "string"}},
        "scenario": {"type": "object"},
        "lanes": {
            "type": "object",
            "description": "Each replica's and pod's states over time, for the lease "
            "timeline: spans {who, state, start, end, epoch, held}.",
            "properties": {
                "replicas": {"type": "array", "items": {"type": "object"}},
                "pods": {"type": "array", "items": {"type": "object"}},
            },
        },
        "verdict": {
            "type": "object",
            "required": ["ok", "counts"],
            "properties": {
                "ok": {"type": "boolean"},
                "counts": {
                    "type": "object",
                    "properties": {
                        k: {"type": "integer", "minimum": 0}
                        for k in ("lost", "duplicated", "unexpected", "late", "stuck")
                    },
                },
            },
        },
    },
}
COUNTS = {
    "type": "object",
    "properties": {k: {"type": "integer", "minimum": 0} for k in REAL_TOTALS},
}
REALSIM = {
    "type": "object",
    "required": ["supported", "why"],
    "description": "cronlab.lab.simulated.run: with supported, also scale {tasks, of}, totals, "
    "verdict {ok, counts, samples}, model {totals at the same scale}, disagree [{metric, "
    "model, code}], seed, replay, elapsed_ms.",
    "properties": {
        "supported": {"type": "boolean"},
        "why": {"type": ["string", "null"]},
        "scale": {"type": "object"},
        "totals": COUNTS,
        "verdict": {"type": "object", "required": ["ok", "counts"]},
        "model": {"type": "object"},
        "disagree": {"type": "array", "items": {"type": "object"}},
        "seed": {"type": "integer"},
        "replay": {"type": "string"},
        "elapsed_ms": {"type": "integer", "minimum": 0},
    },
}
SNAPSHOT = {
    "type": "object",
    "required": ["running", "version"],
    "description": "cronlab.lab.web.live.Live.snapshot(): while a run goes, also its config, t (s "
    "since the invoices fell due), status and report (the CLI's --json), prediction, events.",
    "properties": {
        "running": {"type": "boolean"},
        "version": {"type": "integer"},
        "config": {"type": "object"},
        "t": {"type": "number"},
        "status": {"type": "object"},
        "report": {"type": "object"},
        "verdict": {
            "type": "object",
            "description": "cronlab check --json on the run: {ok, counts, samples} (empty at "
            "first)",
        },
        "prediction": {"type": "object", "required": ["totals", "sentence"]},
        "events": {"type": "array", "items": {"type": "object"}},
        "cluster_exit": {"type": ["integer", "null"]},
    },
}


def _event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """One server-sent event (OpenAPI 3.1: a text/event-stream schema describes each event)."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": name},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data,
            },
        },
    }


EVENTS = {"oneOf": [_event("snapshot", SNAPSHOT), _event("end", {"type": "object"})]}
NO_FIELDS = {"type": "object", "additionalProperties": False}
LIVE_START = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "replicas": _int(1, 7, 3),
        "workers": _int(1, 16, 5),
        "election": {"enum": ["lease", "off"]},
        "timers": {"enum": ["durable", "in-memory"]},
        "ttl": _int(1, 120, 10),
        "count": _int(1, 1_000_000, 20_000),
        "drain_s": _int(5, 3600, 60),
        "lead_s": _int(2, 120, 5),
        "visibility": _int(1, 600, 30),
        "fencing": {
            "enum": ["on", "off"],
            "description": "off: the engine's zombie anti-pattern (docs/engine.md); lease only",
        },
    },
    "not": {  # fencing off with election off: nobody holds a lease to fence
        "required": ["election", "fencing"],
        "properties": {"election": {"const": "off"}, "fencing": {"const": "off"}},
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
    "422": {
        "description": "A bad field, named; or a body that is not a JSON object.",
        "content": {"application/json": {"schema": PROBLEM}},
    },
}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    """A state-changing request's body: JSON, always (an empty object will do)."""
    return {"required": True, "content": {"application/json": {"schema": schema}}}


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
    "/api/realsim": {
        "get": {
            "summary": "The scenario on the real code, simulated (the page's third column): "
            "the deterministic simulator of the real scheduler, worker and store at a scale "
            "that takes seconds; one at a time",
            "parameters": SCENARIO_PARAMS,
            "responses": {
                "200": _json(REALSIM, "The simulated run, or why it is not simulated"),
                "422": _json(PROBLEM, "A bad parameter, named"),
                "429": _json(PROBLEM, "Another simulated run is going"),
            },
        }
    },
    "/api/live": {
        "get": {
            "summary": "The live run's snapshot",
            "responses": {"200": _json(SNAPSHOT, "Snapshot")},
        }
    },
    "/api/live/start": {
        "post": {
            "summary": "Start the real engine (one run at a time)",
            "requestBody": _body(LIVE_START),
            "responses": {
                "201": _json(SNAPSHOT, "Started; the snapshot"),
                "409": _json(PROBLEM, "A run is already going"),
                **GUARDED,
            },
        }
    },
    "/api/live/stop": {
        "post": {
            "summary": "Kill every process of the run and remove its folder",
            "requestBody": _body(NO_FIELDS),
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["stopped", "folder_removed"],
                        "properties": {
                            "stopped": {"const": True},
                            "folder_removed": {"type": "boolean"},
                        },
                    },
                    "Stopped",
                ),
                "404": _json(PROBLEM, "No run"),
                **GUARDED,
            },
        }
    },
    "/api/live/chaos": {
        "post": {
            "summary": "Send real signals through cronlab chaos",
            "requestBody": _body(
                {
                    "type": "object",
                    "required": ["action"],
                    "additionalProperties": False,
                    "properties": {
                        "action": {"enum": ["crash-leader", "pause-leader", "kill-worker"]},
                        "for": _int(1, 600, 15) | {"description": "pause-leader: seconds"},
                        "mid_dispatch": {
                            "type": "boolean",
                            "default": False,
                            "description": "pause-leader: catch it between reading a batch "
                            "and writing it (the zombie leader)",
                        },
                    },
                }
            ),
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "required": ["sent", "at_s"],
                        "properties": {
                            "sent": {"enum": ["crash-leader", "pause-leader", "kill-worker"]},
                            "at_s": {"type": "integer"},
                        },
                    },
                    "Sent",
                ),
                "404": _json(PROBLEM, "No run"),
                **GUARDED,
            },
        }
    },
    "/api/live/events": {
        "get": {
            "summary": "Server-sent events: `snapshot` on every change, `end` when the run stops",
            "responses": {
                "200": {
                    "description": "SSE stream; each event's data is JSON",
                    "content": {"text/event-stream": {"schema": EVENTS}},
                }
            },
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
            "responses": {
                "200": {"description": "A file"},
                "404": _text("text/plain", "No such file"),
            },
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
