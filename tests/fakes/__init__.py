"""Test doubles that run for real on loopback (see `tests.fakes.messages_api`)."""
