"""A tenant's tool policy rules in the database: replaced whole, read in a unit of work
and outside one (what a turn's start reads)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.repositories.tool_policies import (
    TenantRules,
    ToolPolicyRepository,
    peek_tenant_rules,
)

RULES = [{"tool": "Bash", "input": {"command": "git *"}, "effect": "allow"}]


@pytest.fixture
async def database(make_settings: Any) -> AsyncIterator[Database]:
    db = Database(make_settings())
    yield db
    await db.dispose()


def replace(tenant: str, rules: list[dict[str, Any]]) -> Any:
    async def work(db: AsyncSession) -> TenantRules:
        return await ToolPolicyRepository(db).replace(tenant, rules)

    return work


async def test_a_tenants_rules_replace_its_rules_and_are_read_outside_a_unit(
    database: Database,
) -> None:
    await database.write(replace("acme", [{"tool": "*", "effect": "ask"}]))

    kept = await database.write(replace("acme", RULES))
    peeked = await peek_tenant_rules(database, "acme")

    assert peeked == kept
    assert peeked.rules == RULES


async def test_a_tenant_that_never_wrote_rules_has_none(database: Database) -> None:
    await database.write(replace("acme", RULES))

    assert await peek_tenant_rules(database, "globex") == TenantRules([], None)
