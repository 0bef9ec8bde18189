"""runtime backends."""
