"""API keys and tenants.

Keys are random 256-bit tokens, so a plain SHA-256 is the right hash: slow
password hashes protect guessable secrets, and these are not guessable. Keys
listed in settings may be given already hashed (`sha256:<hex>`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import ApiKey
from app.db.repositories.api_keys import ApiKeyRepository
from app.domain.errors import InvalidInput, Unauthorized
from app.domain.ids import new_id
from app.settings import ConfiguredKey

LOCAL_TENANT = "local"
KEY_PREFIX = "sk_strata_"
_TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def validate_tenant_name(tenant: str) -> str:
    if not _TENANT_NAME.match(tenant):
        raise InvalidInput(
            "tenant names are 1-100 characters of letters, digits, '_', '.', '-'", field="tenant"
        )
    return tenant


async def create_key(db: AsyncSession, tenant: str) -> tuple[ApiKey, str]:
    """Store a new key's hash; the key itself is returned once and never again."""
    key = generate_key()
    row = ApiKey(
        id=new_id("key"),
        tenant=validate_tenant_name(tenant),
        key_hash=hash_key(key),
        prefix=key[: len(KEY_PREFIX) + 4],
    )
    return await ApiKeyRepository(db).add(row), key


class Authenticator:
    """Maps a bearer token to its tenant, from settings or the `api_keys` table."""

    def __init__(self, configured: list[ConfiguredKey]) -> None:
        self._configured: dict[str, str] = {}
        for entry in configured:
            digest = (
                entry.secret.removeprefix("sha256:")
                if entry.secret.startswith("sha256:")
                else hash_key(entry.secret)
            )
            self._configured[digest.lower()] = validate_tenant_name(entry.tenant)
        self._keys_seen = False

    async def keys_exist(self, db: AsyncSession) -> bool:
        """Keys are never deleted, so once one is seen the answer stays yes; until then
        every request asks, so a key made by `strata keys create` binds at once."""
        if not self._keys_seen:
            self._keys_seen = bool(self._configured) or await ApiKeyRepository(db).any_exist()
        return self._keys_seen

    async def tenant_for(self, db: AsyncSession, token: str | None) -> str:
        """The caller's tenant. Without any key configured, everyone is the local tenant.

        A valid key costs one look-up (none for a configured one); only a request
        without a valid key asks whether any key exists."""
        if token:
            tenant = await self._tenant_of_key(db, token)
            if tenant is not None:
                return tenant
        if not await self.keys_exist(db):
            return LOCAL_TENANT
        if not token:
            raise Unauthorized("this server needs 'Authorization: Bearer <key>'")
        raise Unauthorized("the API key is not valid")

    async def _tenant_of_key(self, db: AsyncSession, token: str) -> str | None:
        digest = hash_key(token)
        for known, tenant in self._configured.items():
            if hmac.compare_digest(known, digest):
                return tenant
        return await ApiKeyRepository(db).tenant_for_hash(digest)
