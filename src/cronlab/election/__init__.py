"""election backends."""
