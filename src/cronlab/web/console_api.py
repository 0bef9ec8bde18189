"""The console's JSON API: its inputs, checked and bounded, and its OpenAPI document."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cronlab.exceptions import ConfigError
from cronlab.ports import MAX_RUNS, MAX_TASK_ID, RunQuery
from cronlab.views import parse_task_id
from cronlab.web.board import PAGE_SIZE, Page

FIELDS = {"pause": {"note"}, "resume": set(), "trigger": set(), "backfill": {"from", "to"}}
TASK_ACTIONS = ("cancel", "retry")  # on one task, by id: each takes an empty body ({})
MAX_TEXT = 500
QUERY = {"schedule", "task", "failed", "since_ms", "limit"}
NAME_CHARS = 100
MAX_PAGE = 500  # schedules one page may list
MAX_PAGE_NUMBER = 100_000
SINCE_MS = 10**15
# A backfill's from and to: an ISO 8601 instant with its UTC offset, a real calendar date
# (29 February only in leap years), years 1000-9999 — what the OpenAPI document states, so
# that every string it allows is one ``delays.parse_at`` takes.
_YEAR = "[1-9][0-9]{3}"
_LEAP = "([1-9][0-9](0[48]|[2468][048]|[13579][26])|([2468][048]|[13579][26])00)"
_DATE = (
    f"({_YEAR}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|{_YEAR}-(0[13-9]|1[0-2])-(29|30)"
    f"|{_YEAR}-(0[13578]|1[02])-31|{_LEAP}-02-29)"
)
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_OFFSET = "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
INSTANT = f"^{_DATE}T{_TIME}{_OFFSET}$"
NO_NUL = "^[^\\u0000]*$"  # what PostgreSQL's text can hold (as the document states it)


class FieldError(ConfigError):
    """A bad input, naming its ``field`` (the API answers 422 with it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def storable(field: str, value: str) -> str:
    """``value`` when every store can hold it, else a FieldError naming ``field``: UTF-8 text
    (a lone surrogate, from a JSON escape, is not) without NUL (PostgreSQL's text refuses it)."""
    if "\x00" in value:
        raise FieldError(field, f"{field} must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FieldError(field, f"{field} must be UTF-8 text (a lone surrogate is not)") from None
    return value


def check_fields(action: str, body: Mapping[str, Any]) -> None:
    """Only the fields ``action`` takes, each a string of at most ``MAX_TEXT`` characters
    that every store can hold."""
    for key, value in body.items():
        if key not in FIELDS[action]:
            raise FieldError(key, f"unknown field {key[:40]!r} for {action}")
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise FieldError(key, f"{key} must be a string of at most {MAX_TEXT} characters")
        storable(key, value)
    if action == "backfill" and not {"from", "to"} <= body.keys():
        raise FieldError("from", "backfill needs from and to (ISO 8601 with an offset)")
    for key in FIELDS[action] & {"from", "to"}:
        if not re.fullmatch(INSTANT, body[key]):
            raise FieldError(key, f"{key} must be like 2026-11-01T09:00:00Z or …+01:00")


def task_id(text: str) -> int:
    """A task id from the path (``views.parse_task_id``); a bad one is a ``FieldError``."""
    try:
        return parse_task_id(text)
    except ConfigError as exc:
        raise FieldError("id", str(exc)) from None


def check_task_body(action: str, body: Mapping[str, Any]) -> None:
    """A task action takes no field (its body is ``{}``)."""
    for key in body:
        raise FieldError(key, f"unknown field {key[:40]!r} for {action}")


def text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def page(params: Mapping[str, str]) -> Page:
    """``/api/console``'s query string: ``q`` (a name filter), ``page`` and ``size``."""
    for key, value in params.items():
        if key not in ("q", "page", "size"):
            raise FieldError(key, f"unknown parameter {key[:40]!r}")
        if len(value) > NAME_CHARS:
            raise FieldError(key, f"{key} is longer than {NAME_CHARS} characters")
        storable(key, value)
    return Page(
        q=params.get("q", ""),
        page=_int(params, "page", 0, MAX_PAGE_NUMBER) or 0,
        size=_int(params, "size", 1, MAX_PAGE) or PAGE_SIZE,
    )


def run_query(params: Mapping[str, str]) -> RunQuery:
    """``/api/runs``'s query string as a ``RunQuery``; a bad value is a ``FieldError``."""
    for key, value in params.items():
        if key not in QUERY:
            raise FieldError(key, f"unknown parameter {key[:40]!r}")
        if len(value) > NAME_CHARS:
            raise FieldError(key, f"{key} is longer than {NAME_CHARS} characters")
        storable(key, value)
    return RunQuery(
        schedule=params.get("schedule") or None,
        task=params.get("task") or None,
        failed=_flag(params.get("failed", "false")),
        since_ms=_int(params, "since_ms", -SINCE_MS, SINCE_MS),
        limit=_int(params, "limit", 1, MAX_RUNS) or 100,
    )


def _flag(value: str) -> bool:
    if value not in ("true", "false", "1", "0"):
        raise FieldError("failed", "failed must be true or false")
    return value in ("true", "1")


def _int(params: Mapping[str, str], key: str, low: int, high: int) -> int | None:
    if key not in params:
        return None
    try:
        number = int(params[key])
    except ValueError:
        raise FieldError(key, f"{key} must be an integer") from None
    if not low <= number <= high:
        raise FieldError(key, f"{key} must be {low:,}..{high:,}")
    return number


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the console's API: every input bounded as the server
    bounds it, every status it answers listed (an unknown query parameter is a 422 too)."""
    name = {"name": "name", "in": "path", "required": True,
            "schema": {"type": "string", "pattern": NO_NUL, "examples": ["nightly"]}}  # fmt: skip
    problem = {"description": "refused or bad input: {error, field}"}
    refused = {"403": problem, "422": problem}  # the token rule; a bad parameter

    task = {"name": "id", "in": "path", "required": True,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TASK_ID}}  # fmt: skip

    def action(
        summary: str, fields: dict[str, Any], required: list[str], on: dict[str, Any] = name
    ) -> dict[str, Any]:
        body = {"type": "object", "properties": fields, "additionalProperties": False}
        if required:
            body["required"] = required
        statuses = ("404", "413", "415") if on is name else ("404", "409", "413", "415")
        return {
            "post": {
                "summary": summary,
                "parameters": [on],
                "requestBody": {"required": True,
                                "content": {"application/json": {"schema": body}}},
                "responses": {"200": {"description": "done"}, **refused, **dict.fromkeys(
                    statuses, problem)},
            }
        }  # fmt: skip

    text_field = {"type": "string", "maxLength": MAX_TEXT, "pattern": NO_NUL}
    instant = {"type": "string", "pattern": INSTANT, "examples": ["2026-11-01T09:00:00Z"]}
    bounded = {"type": "string", "maxLength": NAME_CHARS, "pattern": NO_NUL}
    return {
        "openapi": "3.1.0",
        "info": {"title": "cronlab console", "version": "1"},
        "paths": {
            "/api/console": {"get": {
                "summary": "A page of schedules (next 10 fires, last 10 runs, counts), leader, "
                "processes with heartbeats, queue depth, lateness by minute, recent alerts",
                "parameters": [
                    {"name": "q", "in": "query", "schema": bounded},
                    {"name": "page", "in": "query", "schema": {
                        "type": "integer", "minimum": 0, "maximum": MAX_PAGE_NUMBER}},
                    {"name": "size", "in": "query",
                     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}},
                ],
                "responses": {"200": {"description": "the snapshot"}, **refused}}},
            "/api/runs": {"get": {
                "summary": "The run history, newest occurrence first (as cronlab runs --json)",
                "parameters": [
                    {"name": "schedule", "in": "query", "schema": bounded},
                    {"name": "task", "in": "query", "schema": bounded},
                    {"name": "failed", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "since_ms", "in": "query", "schema": {
                        "type": "integer", "minimum": -SINCE_MS, "maximum": SINCE_MS}},
                    {"name": "limit", "in": "query",
                     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_RUNS}},
                ],
                "responses": {"200": {"description": "{runs: [...]}"}, **refused}}},
            "/api/schedules/{name}/pause": action("Pause, with a note", {"note": text_field}, []),
            "/api/schedules/{name}/resume": action("Resume", {}, []),
            "/api/schedules/{name}/trigger": action("Run once now", {}, []),
            "/api/schedules/{name}/backfill": action(
                "Run the occurrences in [from, to) that never ran (at most 1,000; 422 for a "
                "range backwards, reaching past now or holding more)",
                {"from": instant, "to": instant}, ["from", "to"]),
            "/api/tasks/{id}": {"get": {
                "summary": "One task by id (as cronlab task show --json)",
                "parameters": [task],
                "responses": {"200": {"description": "the task"}, **refused, "404": problem}}},
            "/api/tasks/{id}/cancel": action(
                "Settle a task not run yet (PENDING) or waiting in the queue or for its retry "
                "(DISPATCHED) as SKIPPED, reason cancelled (409 for any other status)",
                {}, [], task),
            "/api/tasks/{id}/retry": action(
                "Run a FAILED task once more, now (409 for any other status)", {}, [], task),
        },
    }  # fmt: skip
