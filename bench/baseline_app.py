"""The yardstick for `bench/api_throughput.py`: a bare FastAPI + SQLModel tasks endpoint.

    python -m bench.baseline_app --database-url sqlite:///x.db --port 8123

What a competent minimal service with the same stack does for the same two routes,
and nothing more: `GET /sessions/{id}/tasks` is one SELECT of the session's task
rows, `POST /sessions/{id}/tasks` is one INSERT of a row, committed and returned as
JSON. No auth, no tenant, no log, no events. Everything else is held equal so the
ratio measures what Strata's own work costs, not a different stack: the same
FastAPI, pydantic validation of the same body, SQLModel over an async SQLAlchemy
engine (aiosqlite with Strata's SQLite pragmas and `BEGIN IMMEDIATE` for writes,
psycopg 3 on PostgreSQL), the engine's default pool, and uvicorn started exactly as
`strata serve` starts it (one worker, `log_config=None`, loop and HTTP parser
chosen by uvicorn: uvloop and httptools when installed).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Column, DateTime, Index
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel import Field as SQLField
from sqlmodel import SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import install_sqlite_hooks, switch_to_wal

SQLITE_BUSY_TIMEOUT_MS = 5000  # Strata's default `sqlite_busy_timeout_ms`


def _now() -> datetime:
    return datetime.now(UTC)


class BaselineTask(SQLModel, table=True):
    __tablename__ = "baseline_tasks"
    __table_args__ = (Index("ix_baseline_tasks_session", "session_id", "id"),)

    id: int | None = SQLField(default=None, primary_key=True)
    session_id: str = SQLField(max_length=40)
    status: str = SQLField(default="pending", max_length=20)
    subject: str = SQLField(max_length=500)
    description: str = ""
    created_at: datetime = SQLField(
        default_factory=_now, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
    updated_at: datetime = SQLField(
        default_factory=_now, sa_column=Column(DateTime(timezone=True), nullable=False)
    )


class TaskCreate(BaseModel):
    """The same body and limits as Strata's `TaskCreate`."""

    model_config = ConfigDict(extra="forbid")

    subject: str = Field(min_length=1, max_length=500)
    description: str = Field(default="", max_length=20_000)


class TaskOut(BaseModel):
    id: int
    status: str
    subject: str
    description: str
    created_at: datetime
    updated_at: datetime


class TaskList(BaseModel):
    data: list[TaskOut]


def _engine(database_url: str) -> AsyncEngine:
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        return create_async_engine(url.set(drivername="postgresql+psycopg"))
    # the WAL, pragmas and BEGIN handling of app/db/engine.py, so both write SQLite alike
    if url.database and url.database != ":memory:":
        switch_to_wal(url.database, SQLITE_BUSY_TIMEOUT_MS)
    engine = create_async_engine(url.set(drivername="sqlite+aiosqlite"))
    install_sqlite_hooks(engine, SQLITE_BUSY_TIMEOUT_MS)
    return engine


async def db_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's unit of work; writes take SQLite's write lock up front, as Strata's do."""
    maker = request.app.state.read if request.method == "GET" else request.app.state.write
    async with maker() as session:
        yield session


Db = Annotated[AsyncSession, Depends(db_session)]


async def healthz() -> dict[str, str]:
    return {"status": "ok"}


async def list_tasks(session_id: str, db: Db) -> TaskList:
    query = (
        select(BaselineTask)
        .where(BaselineTask.session_id == session_id)
        .order_by(col(BaselineTask.id))
    )
    rows = (await db.exec(query)).all()
    return TaskList(data=[TaskOut.model_validate(row, from_attributes=True) for row in rows])


async def create_task(session_id: str, body: TaskCreate, db: Db) -> TaskOut:
    row = BaselineTask(session_id=session_id, **body.model_dump())
    db.add(row)
    await db.commit()
    return TaskOut.model_validate(row, from_attributes=True)


def create_app(database_url: str) -> FastAPI:
    engine = _engine(database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with engine.begin() as connection:
            await connection.run_sync(SQLModel.metadata.create_all)
        app.state.engine = engine
        app.state.read = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
        app.state.write = async_sessionmaker(
            engine.execution_options(sqlite_immediate=True),
            class_=AsyncSession,
            expire_on_commit=False,
        )
        yield
        await engine.dispose()

    app = FastAPI(title="baseline", lifespan=lifespan)
    app.get("/healthz")(healthz)
    app.get("/sessions/{session_id}/tasks")(list_tasks)
    app.post("/sessions/{session_id}/tasks", status_code=201)(create_task)
    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # what `strata serve` does at STRATA_LOG_LEVEL=warning: uvicorn logs through the root
    # logger, so its access lines (level info) are dropped
    logging.basicConfig(level=logging.WARNING)
    uvicorn.run(create_app(args.database_url), host="127.0.0.1", port=args.port, log_config=None)


if __name__ == "__main__":
    main()
