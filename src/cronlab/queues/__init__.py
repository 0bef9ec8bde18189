"""queues backends."""
