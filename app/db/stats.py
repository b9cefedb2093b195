"""Counts of database work in this process: transactions, statements, thread hand-offs.

They do not depend on load or on the machine, so the benchmarks report them per agent
step and per turn next to the timings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

_KEY = "strata.stats"


@dataclass
class DbStats:
    transactions: int = 0
    statements: int = 0
    handoffs: int = 0

    def watch(self, engine: AsyncEngine) -> None:
        @event.listens_for(engine.sync_engine, "before_cursor_execute")
        def _statement(*_args: Any) -> None:
            self.statements += 1

        @event.listens_for(engine.sync_engine, "commit")
        def _commit(_conn: Any) -> None:
            self.transactions += 1

        @event.listens_for(engine.sync_engine, "rollback")
        def _rollback(_conn: Any) -> None:
            self.transactions += 1

    def snapshot(self) -> DbStats:
        return DbStats(self.transactions, self.statements, self.handoffs)

    def since(self, before: DbStats) -> DbStats:
        return DbStats(
            self.transactions - before.transactions,
            self.statements - before.statements,
            self.handoffs - before.handoffs,
        )


def attach(db: Any, stats: DbStats) -> None:
    """Let statements run past SQLAlchemy's events (`app.db.prepared`) count in `stats`."""
    db.info[_KEY] = stats


def stats_of(db: Any) -> DbStats | None:
    found: DbStats | None = db.info.get(_KEY)
    return found
