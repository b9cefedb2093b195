"""A `Database` on the test's own database with some sessions in it: what the tests that
call services directly (without the API) start from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Session
from app.settings import Settings


@asynccontextmanager
async def database_with(database_url: str, *session_ids: str) -> AsyncIterator[Database]:
    """The database, holding a session of tenant `t` for each id."""
    db = Database(Settings(_env_file=None, database_url=database_url))

    async def add(session: AsyncSession) -> None:
        session.add_all([Session(id=session_id, tenant="t") for session_id in session_ids])

    try:
        await db.write(add)
        yield db
    finally:
        await db.dispose()
