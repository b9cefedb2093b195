"""PostgreSQL cannot store U+0000 in `text` or `jsonb` (SQLite can).

On PostgreSQL it is replaced by U+FFFD in every bound string and JSON value, so a NUL
from a client or from a tool's output never turns into a server error.
"""

from __future__ import annotations

import json
from typing import Any


def without_nul(value: Any) -> Any:
    """`value` with U+0000 replaced by U+FFFD in every string, however deeply nested."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, tuple):
        return tuple(without_nul(v) for v in value)
    return value


def has_nul(value: Any) -> bool:
    """Whether `value` holds U+0000 in any string, however deeply nested."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    return False


def json_without_nul(value: Any) -> str:
    """The JSON serializer of PostgreSQL engines."""
    text = json.dumps(value)
    return json.dumps(without_nul(value)) if "\\u0000" in text else text
