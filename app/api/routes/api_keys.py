"""The caller's tenant's API keys: list, create (the key shown once), revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from app.api.deps import CurrentTenant, DatabaseDep, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.schemas.api_keys import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyPublic
from app.services import auth

router = APIRouter(prefix="/api-keys", tags=["api-keys"], responses=problem_responses(401, 503))

KeyId = Annotated[str, Path(max_length=40, description="An API key's id (`key_…`).")]


@router.get(
    "",
    name="list",
    summary="The tenant's API keys (never the keys themselves)",
    description=(
        "The keys stored for the caller's tenant, newest first, by id and prefix "
        "with their expiry and revocation; the operator's keys (STRATA_API_KEYS) "
        "are not listed."
    ),
)
async def list_keys(db: SessionDep, tenant: CurrentTenant) -> ApiKeyList:
    return ApiKeyList(data=[ApiKeyPublic.of(row) for row in await auth.tenant_keys(db, tenant)])


@router.post(
    "",
    status_code=201,
    name="create",
    summary="Create an API key for the caller's tenant",
    description="The answer holds the `key`, shown this once. 409 on a server without keys: "
    "the first key turns authentication on for every client, so the operator makes it "
    "(`strata keys create`).",
    responses=problem_responses(409, 413, 422),
)
async def create_key(
    body: ApiKeyCreate,
    request: Request,
    database: DatabaseDep,
    tenant: CurrentTenant,
    response: Response,
) -> ApiKeyCreated:
    keyless = not await request.app.state.authenticator.keys_exist(database)
    row, key = await database.write(
        lambda db: auth.create_tenant_key(db, tenant, keyless=keyless, expires_at=body.expires_at)
    )
    response.headers["Location"] = f"/api-keys/{row.id}"
    return ApiKeyCreated(**ApiKeyPublic.of(row).model_dump(), key=key)


@router.post(
    "/{key_id}/revoke",
    name="revoke",
    summary="Revoke an API key of the caller's tenant",
    description="Refused from now on (at once in this process, within "
    "STRATA_API_KEY_CACHE_SECONDS in others). Revoking a revoked key answers it as it is. "
    "409 when it is the tenant's last valid key: the operator decides that "
    "(`strata keys revoke`).",
    responses=problem_responses(404, 409, 422),
)
async def revoke_key(
    key_id: KeyId, database: DatabaseDep, tenant: CurrentTenant, settings: SettingsDep
) -> ApiKeyPublic:
    configured = {key.tenant for key in settings.configured_keys}
    row = await database.write(
        lambda db: auth.revoke_tenant_key(db, tenant, key_id, configured_tenants=configured)
    )
    return ApiKeyPublic.of(row)
