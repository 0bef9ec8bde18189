"""Backends by role."""
