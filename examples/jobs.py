"""The README's "Your own jobs": a task and a monthly schedule on a SQLite store.

Run it with ``cronlab cluster --store sqlite:///cron.db --app jobs:app`` (or ``cronlab run
--app jobs:app``) from this directory; ``cronlab schedule list --store sqlite:///cron.db``
then shows the next fire in Berlin time.
"""

import cronlab

app = cronlab.App("sqlite:///cron.db")


@app.cron("0 0 1 * *", tz="Europe/Berlin", catchup="all", overlap="skip", args={"plan": "pro"})
@app.task(name="bill")  # workers look it up by this name; nothing is pickled
def bill(ctx: cronlab.Context, plan: str) -> None:
    print("billing", plan, "for", ctx.scheduled_for)
