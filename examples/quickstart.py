import cronlab  # pip install . (in a cronlab clone), then python quickstart.py

app = cronlab.App("sqlite:///cron.db")


@app.cron("* * * * *")  # every minute, on whichever process leads
@app.task
def report(ctx: cronlab.Context) -> None:
    print("report for", ctx.scheduled_for)


@app.task
def welcome(ctx: cronlab.Context, user: str) -> None:
    print("welcome,", user)


if __name__ == "__main__":
    welcome.defer(user="ada")  # a row in cron.db: it survives a restart
    app.run()  # scheduler + worker in this process; Ctrl-C stops
