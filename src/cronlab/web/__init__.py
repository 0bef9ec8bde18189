"""web backends."""
