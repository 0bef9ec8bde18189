"""A web app that defers a task from a request handler (Starlette; a FastAPI route is the same).

    uvicorn web:web                      # the web app: POST /checkout defers a receipt
    cronlab run --app web:jobs           # next to it: the scheduler and worker that send it

The request returns as soon as the task row is written; the receipt goes out from the worker,
retried on failure, once per order (the idempotency key is the order's).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import cronlab

jobs = cronlab.App("sqlite:///cron.db", name="web")
outbox: list[dict[str, Any]] = []  # a stand-in for the mail provider


@jobs.task(name="send_receipt", retries=3)
async def send_receipt(ctx: cronlab.Context, order: int, email: str) -> None:
    outbox.append({"order": order, "email": email, "attempt": ctx.attempt})


async def checkout(request: Request) -> JSONResponse:
    try:
        body = await request.json()
        order, email = int(body["order"]), str(body["email"])
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": "expected {'order': int, 'email': str}"}, status_code=422)
    ref = await send_receipt.defer_async(order=order, email=email, key=f"receipt:{order}")
    return JSONResponse({"task": ref.id, "new": ref.added}, status_code=202)


web = Starlette(routes=[Route("/checkout", checkout, methods=["POST"])])
