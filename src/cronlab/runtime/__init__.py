"""The engine's processes: the scheduler and worker loops, their duties and the cluster."""
