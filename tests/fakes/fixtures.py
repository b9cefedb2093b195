"""Pytest fixtures for the fake Anthropic Messages API.

Loaded by the root conftest (`pytest_plugins = ["tests.fakes.fixtures"]`). One server runs
for the whole test run; `fake_llm` hands it to a test with an empty script and fresh records,
and after the test checks that every scripted step was used and nothing unexpected came in.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.messages_api import FakeMessagesAPI


@pytest.fixture(scope="session")
def _fake_messages_api_server() -> Iterator[FakeMessagesAPI]:
    server = FakeMessagesAPI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_llm(_fake_messages_api_server: FakeMessagesAPI) -> Iterator[FakeMessagesAPI]:
    """The fake Messages API, reset; its `url` is the SDK's `base_url`."""
    fake = _fake_messages_api_server
    fake.reset()
    yield fake
    fake.assert_all_consumed()
