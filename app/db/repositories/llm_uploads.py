"""The Anthropic Files API ids of stored files, per account (`LlmUpload`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import col, select

from app.db.models import LlmUpload
from app.db.repositories.rows import RowRepository
from app.db.types import utcnow


class LlmUploadRepository(RowRepository):
    async def remote_ids(self, account: str, file_ids: Sequence[str]) -> dict[str, str]:
        """The Files API id of each of `file_ids` uploaded with `account`, by file id."""
        if not file_ids:
            return {}
        query = select(LlmUpload).where(
            LlmUpload.account == account, col(LlmUpload.file_id).in_(list(set(file_ids)))
        )
        return {row.file_id: row.remote_id for row in (await self.db.exec(query)).all()}

    async def remember(self, file_id: str, account: str, remote_id: str) -> str:
        """Keep `remote_id` for the file and account, unless another process kept one
        first; the id kept either way."""
        postgresql = self.db.get_bind().dialect.name == "postgresql"
        insert = pg_insert if postgresql else sqlite_insert
        statement = (
            insert(LlmUpload)
            .values(file_id=file_id, account=account, remote_id=remote_id, created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["file_id", "account"])
        )
        await self.db.exec(statement)
        return (await self.remote_ids(account, [file_id]))[file_id]

    async def forget(self, account: str, remote_ids: Sequence[str]) -> None:
        """Drop ids of the account that the API no longer knows."""
        await self.db.exec(
            delete(LlmUpload).where(
                col(LlmUpload.account) == account, col(LlmUpload.remote_id).in_(list(remote_ids))
            )
        )

    async def forget_file(self, file_id: str) -> None:
        """Drop the ids of a file that is deleted."""
        await self.db.exec(delete(LlmUpload).where(col(LlmUpload.file_id) == file_id))
