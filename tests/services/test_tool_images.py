"""Images tool results carry are files of the tenant, within its quota: past it, the
model gets a note, the turn goes on."""

from __future__ import annotations

from pathlib import Path

from app.db.engine import Database
from app.domain.items import ImageBlock
from app.services.files import ToolImages
from app.settings import Settings
from tests.fakes import media


async def test_a_tool_image_past_the_tenants_file_quota_is_a_note_not_a_failure(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        _env_file=None, database_url=database_url, data_dir=tmp_path, file_tenant_max_count=1
    )
    database = Database(settings)
    try:
        images = ToolImages(database, settings, "t")
        first = await images.store(media.png(4, 4), "shot-1.png")
        second = await images.store(media.png(5, 5), "shot-2.png")
    finally:
        await database.dispose()

    assert isinstance(first, ImageBlock)
    assert isinstance(second, str)
    assert second.startswith("[image shot-2.png not sent:")
    assert "STRATA_FILE_TENANT_MAX_COUNT" in second
