"""Sortable, prefixed identifiers.

IDs start with a 48-bit millisecond timestamp (ULID layout, Crockford base32), so
ordering by id is ordering by creation time and cursor pagination needs no second
column. The prefix tells a reader what kind of object an id names.
"""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _ulid(now_ms: int | None = None) -> str:
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    value = (millis << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    return f"{prefix}_{_ulid()}"
