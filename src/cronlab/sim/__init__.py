"""The deterministic simulator of the real code (``cronlab verify``).

One seed → one reproducible run of the real scheduler, worker, handler runner, election and
SQL store code on a SQLite file, with simulated processes interleaved statement by statement
and faults drawn from the seed (``scenario.KINDS``); the checker (``checker.py``) then holds
what took effect against what was due. The method of FoundationDB's simulation testing and
TigerBeetle's VOPR, on our own code.
"""
