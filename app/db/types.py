"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import JSON, BigInteger, CheckConstraint, DateTime, Integer, String
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

JSONType = JSON().with_variant(JSONB(), "postgresql")
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC; always hands back an aware datetime (SQLite forgets the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use datetime.now(UTC)")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = value
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)


E = TypeVar("E", bound=StrEnum)


class EnumText(TypeDecorator[E]):
    """A `StrEnum` stored as its value in a VARCHAR; read back as the enum member.

    The database refuses other values through `one_of` (a CHECK constraint)."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length=length)
        self.enum = enum

    def process_bind_param(self, value: E | str | None, dialect: Dialect) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> E | None:
        return None if value is None else self.enum(value)


def one_of(column: str, enum: type[StrEnum], name: str) -> CheckConstraint:
    """A CHECK constraint: `column` holds one of `enum`'s values."""
    values = ", ".join(f"'{member.value}'" for member in enum)
    return CheckConstraint(f"{column} IN ({values})", name=name)


def utcnow() -> datetime:
    return datetime.now(UTC)
