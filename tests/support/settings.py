"""The type of the `make_settings` fixture (`tests/conftest.py`)."""

from __future__ import annotations

from typing import Any, Protocol

from app.settings import Settings


class MakeSettings(Protocol):
    """Settings for the test's database, with these fields changed."""

    def __call__(self, **overrides: Any) -> Settings: ...
