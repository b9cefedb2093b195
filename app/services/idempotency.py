"""`Idempotency-Key`: a retried write returns its first answer and creates nothing.

The key's row is written in the same transaction as the change it answers for, so
the two commit together or not at all. Two requests racing with one key collide
on the row's primary key: the second gets 409 and may retry (then replays).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import IdempotencyKey
from app.db.repositories.idempotency import IdempotencyRepository
from app.db.types import utcnow
from app.domain.errors import Conflict, InvalidInput

MAX_KEY_LENGTH = 255
M = TypeVar("M", bound=BaseModel)


def body_fingerprint(body: bytes) -> str:
    """JSON bodies are compared by content, so whitespace and key order do not matter."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, UnicodeDecodeError):
        canonical = body
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class Replay:
    status_code: int
    body: dict[str, Any]


@dataclass
class IdempotentRequest:
    tenant: str
    key: str | None
    method: str
    path: str
    body_hash: str
    ttl_seconds: float

    async def replay(self, db: AsyncSession) -> Replay | None:
        """The stored answer for this key, or None when the request must run."""
        if self.key is None:
            return None
        repo = IdempotencyRepository(db)
        row = await repo.get(self.tenant, self.key)
        if row is None:
            return None
        if row.expires_at <= utcnow():
            await repo.remove(row)
            return None
        if (row.method, row.path, row.body_hash) != (self.method, self.path, self.body_hash):
            raise InvalidInput(
                "this Idempotency-Key was used with another request; use a new key",
                field="Idempotency-Key",
            )
        return Replay(row.status_code, row.response)

    def once(
        self, status_code: int, work: Callable[[AsyncSession], Awaitable[M]]
    ) -> Callable[[AsyncSession], Awaitable[M | Replay]]:
        """A unit of work that replays this key's answer, or runs `work` and remembers
        what it answered."""

        async def unit(db: AsyncSession) -> M | Replay:
            if (replay := await self.replay(db)) is not None:
                return replay
            answer = await work(db)
            await self.remember(db, status_code, answer.model_dump(mode="json"))
            return answer

        return unit

    async def remember(self, db: AsyncSession, status_code: int, body: dict[str, Any]) -> None:
        if self.key is None:
            return
        now = utcnow()
        row = IdempotencyKey(
            tenant=self.tenant,
            key=self.key,
            method=self.method,
            path=self.path,
            body_hash=self.body_hash,
            status_code=status_code,
            response=body,
            created_at=now,
            expires_at=now + timedelta(seconds=self.ttl_seconds),
        )
        try:
            await IdempotencyRepository(db).insert(row)
        except IntegrityError as exc:
            raise Conflict(
                "another request with this Idempotency-Key is in progress; retry it"
            ) from exc


def check_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(
            f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} characters", field="Idempotency-Key"
        )
    return key


async def purge_expired_keys(db: AsyncSession) -> int:
    """Deletes every key past its time (they are also replaced when reused); how many."""
    return await IdempotencyRepository(db).purge_expired(utcnow())
