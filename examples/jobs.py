"""The README's "Your own jobs" example: a handler and a monthly schedule on a SQLite store.

Run it with ``cronlab cluster --store sqlite:///cron.db --app jobs:app`` from this directory;
``cronlab schedule list --store sqlite:///cron.db`` shows the next fire in Berlin time.
"""

import cronlab

app = cronlab.App("sqlite:///cron.db")


@app.handler("bill")  # looked up by name, never pickled
def bill(ctx, payload):  # type: ignore[no-untyped-def]
    print("billing", payload["plan"], "for", ctx.scheduled_for)


app.cron(
    "monthly-invoices",
    "0 0 1 * *",
    handler="bill",
    tz="Europe/Berlin",
    catchup="all",
    overlap="skip",
    payload={"plan": "pro"},
)
