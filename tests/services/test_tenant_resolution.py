"""Tenant resolution from the key cache: what a process read about keys is reused for
STRATA_API_KEY_CACHE_SECONDS, without a database read; keys created in the process count
at once, keys created by another process once the cached answer expires."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from app.db.engine import Database
from app.domain.errors import Unauthorized
from app.services import auth
from app.services.auth import LOCAL_TENANT, Authenticator, create_key
from tests.support.clock import ManualClock

TTL = 5.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def database(make_settings: Any, clock: ManualClock) -> AsyncIterator[Database]:
    database = Database(make_settings(api_key_cache_seconds=TTL), clock=clock)
    yield database
    await database.dispose()


@pytest.fixture
async def other_process(make_settings: Any) -> AsyncIterator[Database]:
    """The same database as another process sees it: its own engines and caches."""
    database = Database(make_settings(api_key_cache_seconds=TTL))
    yield database
    await database.dispose()


@pytest.fixture
def authenticator() -> Authenticator:
    return Authenticator([])


async def new_key(database: Database, tenant: str = "initech") -> str:
    _, key = await database.write(lambda db: create_key(db, tenant))
    return key


async def statements(database: Database, call: Callable[[], Awaitable[Any]]) -> int:
    """How many SQL statements `call` ran (its result or error does not matter here)."""
    before = database.stats.snapshot()
    try:
        await call()
    except Unauthorized:
        pass
    return database.stats.since(before).statements


async def test_a_cached_key_resolves_without_database_work(
    database: Database, authenticator: Authenticator
) -> None:
    key = await new_key(database)
    assert await authenticator.tenant_for(database, key) == "initech"

    before = database.stats.snapshot()
    tenant = await authenticator.tenant_for(database, key)

    assert tenant == "initech"
    assert database.stats.since(before).statements == 0
    assert database.stats.since(before).transactions == 0


async def test_an_unknown_key_is_refused_from_the_cache_too(
    database: Database, authenticator: Authenticator
) -> None:
    await new_key(database)
    assert await statements(database, lambda: authenticator.tenant_for(database, "sk_x")) > 0

    with pytest.raises(Unauthorized):
        await authenticator.tenant_for(database, "sk_x")
    assert await statements(database, lambda: authenticator.tenant_for(database, "sk_x")) == 0


async def test_without_keys_the_local_tenant_is_answered_from_the_cache(
    database: Database, authenticator: Authenticator
) -> None:
    assert await authenticator.tenant_for(database, None) == LOCAL_TENANT

    assert await statements(database, lambda: authenticator.tenant_for(database, None)) == 0
    assert await authenticator.tenant_for(database, None) == LOCAL_TENANT


async def test_a_key_created_in_the_process_works_at_once_after_it_was_unknown(
    database: Database, authenticator: Authenticator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "generate_key", lambda: "sk_strata_chosen")
    # without keys a token is ignored: both "no such key" and "no key at all" are cached
    assert await authenticator.tenant_for(database, "sk_strata_chosen") == LOCAL_TENANT

    await new_key(database)

    assert await authenticator.tenant_for(database, "sk_strata_chosen") == "initech"
    with pytest.raises(Unauthorized):
        await authenticator.tenant_for(database, None)


async def test_a_cached_answer_is_read_again_once_the_ttl_passed(
    database: Database, authenticator: Authenticator, clock: ManualClock
) -> None:
    key = await new_key(database)
    await authenticator.tenant_for(database, key)

    clock.advance(TTL - 0.1)
    assert await statements(database, lambda: authenticator.tenant_for(database, key)) == 0
    clock.advance(0.1)
    assert await statements(database, lambda: authenticator.tenant_for(database, key)) > 0


async def test_a_first_key_made_by_another_process_binds_once_the_ttl_passed(
    database: Database, other_process: Database, authenticator: Authenticator, clock: ManualClock
) -> None:
    assert await authenticator.tenant_for(database, None) == LOCAL_TENANT
    key = await new_key(other_process)

    still_open = await authenticator.tenant_for(database, None)
    clock.advance(TTL)

    assert still_open == LOCAL_TENANT
    with pytest.raises(Unauthorized):
        await authenticator.tenant_for(database, None)
    assert await authenticator.tenant_for(database, key) == "initech"
