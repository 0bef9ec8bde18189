"""The lab's own workload, an app on top of the engine like any user's (``invoices.app``).

The engine knows nothing of invoices: ``cronlab cluster`` without ``--app`` runs this app, which
creates its table when it starts on a store. The lab page itself lives in ``cronlab.web``.
"""
