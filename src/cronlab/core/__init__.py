"""The pure core: no I/O, time is always an argument."""
