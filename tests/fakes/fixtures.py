"""Fixtures for the fake Messages API (filled in by the fake server module)."""
