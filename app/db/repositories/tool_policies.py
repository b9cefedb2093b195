"""A tenant's tool policy rules (`TenantToolPolicy`): read by every turn's start and by
`GET /tool-policy`, replaced whole by `PUT /tool-policy`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.sql.elements import ClauseElement
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import TenantToolPolicy
from app.db.prepared import DialectInsert, Peeks, Prepared
from app.db.types import utcnow

_P = TenantToolPolicy.__table__  # type: ignore[attr-defined]

_READ = Prepared(select(_P.c.rules, _P.c.updated_at).where(_P.c.tenant == bindparam("p_tenant")))


def _replace(insert_into: DialectInsert) -> ClauseElement:
    """The tenant's rules as a new row, or over its row: two first writes of one tenant
    racing (PostgreSQL) both succeed, the later one's rules kept."""
    new = insert_into(_P)
    statement: ClauseElement = new.on_conflict_do_update(
        index_elements=[_P.c.tenant],
        set_={"rules": new.excluded.rules, "updated_at": new.excluded.updated_at},
    )
    return statement


_REPLACE = Prepared(_replace, column_keys=("tenant", "rules", "updated_at"))


@dataclass(frozen=True)
class TenantRules:
    """A tenant's stored rules and when they were last replaced (None: never)."""

    rules: list[dict[str, Any]]
    updated_at: datetime | None


def _rules_from(rows: list[tuple[Any, ...]]) -> TenantRules:
    if not rows:
        return TenantRules([], None)
    rules, updated_at = rows[0]
    return TenantRules(list(rules or []), updated_at)


class ToolPolicyRepository:
    def __init__(self, db: AsyncSession) -> None:
        self.db = db

    async def get(self, tenant: str) -> TenantRules:
        return _rules_from((await _READ.execute(self.db, {"p_tenant": tenant})).rows)

    async def replace(self, tenant: str, rules: list[dict[str, Any]]) -> TenantRules:
        now = utcnow()
        await _REPLACE.execute(self.db, {"tenant": tenant, "rules": rules, "updated_at": now})
        return TenantRules(rules, now)


async def peek_tenant_rules(units: Peeks, tenant: str) -> TenantRules:
    """The tenant's rules outside any unit of work: what a turn's start reads once."""
    return _rules_from(await units.peek(_READ, {"p_tenant": tenant}))
