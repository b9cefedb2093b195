"""Cursor pages: fetch one row more than asked to know whether another page exists."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    data: list[T]
    next_cursor: str | None


def page_of(rows: Sequence[T], limit: int, cursor_of: Callable[[T], str]) -> Page[T]:
    """`rows` were fetched with `limit + 1`; the extra row only says 'there is more'."""
    data = list(rows[:limit])
    more = len(rows) > limit
    return Page(data=data, next_cursor=cursor_of(data[-1]) if more and data else None)
