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
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db import caches
from app.db.engine import Database
from app.db.models import ApiKey
from app.db.repositories.api_keys import ApiKeyRepository
from app.db.types import utcnow
from app.domain.errors import Conflict, InvalidInput, NotFound, Unauthorized
from app.domain.ids import new_id
from app.services.webhooks import disable_tenant_subscriptions
from app.settings import ConfiguredKey

LOCAL_TENANT = "local"
KEY_PREFIX = "sk_strata_"
_ANY_KEY = "*"  # the cache entry of "does any key exist" (digests are hex)
T = TypeVar("T")
_TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
LAST_KEY_REVOKED = "the tenant's last valid API key was revoked"


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


async def create_key(
    db: AsyncSession, tenant: str, *, expires_at: datetime | None = None
) -> tuple[ApiKey, str]:
    """Store a new key's hash; the key itself is returned once and never again. This
    process forgets what it cached about keys, so the key works at once."""
    if expires_at is not None and expires_at <= utcnow():
        raise InvalidInput("a key's expiry must be in the future", field="expires_at")
    key = generate_key()
    row = ApiKey(
        id=new_id("key"),
        tenant=validate_tenant_name(tenant),
        key_hash=hash_key(key),
        prefix=key[: len(KEY_PREFIX) + 4],
        expires_at=expires_at,
    )
    caches.forget(db, caches.API_KEYS)
    return await ApiKeyRepository(db).save(row), key


async def list_keys(db: AsyncSession) -> list[ApiKey]:
    return await ApiKeyRepository(db).list_all()


async def tenant_keys(db: AsyncSession, tenant: str) -> list[ApiKey]:
    """The keys of `tenant` stored in the database, newest first (those of STRATA_API_KEYS
    are the operator's and are not listed)."""
    return await ApiKeyRepository(db).list_for_tenant(tenant)


async def create_tenant_key(
    db: AsyncSession, tenant: str, *, keyless: bool, expires_at: datetime | None = None
) -> tuple[ApiKey, str]:
    """A new key for the caller's own tenant (`create_key`). Refused on a server without
    keys (`keyless`): the first key turns authentication on for every client, which is
    the operator's decision (`strata keys create`)."""
    if keyless:
        raise Conflict(
            "this server has no API keys; the operator creates the first one with "
            "`strata keys create --tenant <name>`, which turns authentication on"
        )
    return await create_key(db, tenant, expires_at=expires_at)


async def revoke_tenant_key(
    db: AsyncSession, tenant: str, key_id: str, *, configured_tenants: Collection[str] = ()
) -> ApiKey:
    """Revoke a key of the caller's own tenant (another tenant's: 404). Refused when it
    would leave the tenant without a valid key: its clients, its console and its webhooks
    would all stop, which only the operator decides (`strata keys revoke`)."""
    keys = ApiKeyRepository(db)
    row = await keys.by_id(ApiKey, key_id, locked=True)
    if row is None or row.tenant != tenant:
        raise NotFound(f"no API key {key_id!r}")
    if row.revoked_at is not None:
        return row
    others = [
        key
        for key in await keys.list_for_tenant(tenant)
        if key.id != key_id and _valid(key, utcnow())
    ]
    if not others and tenant not in configured_tenants:
        raise Conflict(
            f"{key_id!r} is the tenant's last valid API key; create another one first "
            "(the operator can still revoke it with `strata keys revoke`)"
        )
    return (await revoke_key(db, key_id, configured_tenants=configured_tenants)).key


def _valid(key: ApiKey, now: datetime) -> bool:
    return key.revoked_at is None and (key.expires_at is None or key.expires_at > now)


@dataclass(frozen=True)
class Revocation:
    key: ApiKey
    webhooks_disabled: int  # the tenant's, when it has no valid key left


async def revoke_key(
    db: AsyncSession, key_id: str, *, configured_tenants: Collection[str] = ()
) -> Revocation:
    """Refused from now on: at once in this process, within STRATA_API_KEY_CACHE_SECONDS in
    the others (what they cached about it expires).

    A tenant left without a valid key (none unrevoked and unexpired in the table, none in
    `configured_tenants`, those of STRATA_API_KEYS) can no longer see or change its
    webhook subscriptions, so they are disabled with it: nothing more is delivered, what
    was queued included, until a new key of the tenant enables them again."""
    keys = ApiKeyRepository(db)
    row = await keys.revoke(key_id, utcnow())
    if row is None:
        raise NotFound(f"no API key {key_id!r}")
    caches.forget(db, caches.API_KEYS)
    disabled = 0
    if row.tenant not in configured_tenants and not await keys.tenant_has_valid_key(
        row.tenant, utcnow()
    ):
        disabled = await disable_tenant_subscriptions(db, row.tenant, LAST_KEY_REVOKED)
    return Revocation(row, disabled)


class Authenticator:
    """Maps a bearer token to its tenant, from settings or the `api_keys` table.

    What the table says is cached for STRATA_API_KEY_CACHE_SECONDS (`app.db.caches`):
    a known key's tenant, an unknown key, and that no key exists. So a request with a
    valid key usually costs no database work at all."""

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

    async def keys_exist(self, database: Database) -> bool:
        """Keys are never deleted, so once one is seen the answer stays yes. Until then
        'none' is cached like any answer: a key made in this process binds at once, one
        made by `strata keys create` elsewhere after the cache time at most."""
        if not self._keys_seen:
            self._keys_seen = bool(self._configured) or await self._cached(
                database, _ANY_KEY, lambda db: ApiKeyRepository(db).any_exist()
            )
        return self._keys_seen

    async def tenant_for(self, database: Database, token: str | None) -> str:
        """The caller's tenant. Without any key configured, everyone is the local tenant.

        A valid key costs one look-up (none for a configured or cached one); only a
        request without a valid key asks whether any key exists."""
        if token:
            tenant = await self._tenant_of_key(database, token)
            if tenant is not None:
                return tenant
        if not await self.keys_exist(database):
            return LOCAL_TENANT
        if not token:
            raise Unauthorized("this server needs 'Authorization: Bearer <key>'")
        raise Unauthorized("the API key is not valid (unknown, revoked or expired)")

    async def still_grants(self, database: Database, token: str | None, tenant: str) -> bool:
        """Whether `token` still makes its bearer `tenant`: asked again by what stays open
        after the request that opened it (an event stream), so a key revoked or expired
        since closes it (within STRATA_API_KEY_CACHE_SECONDS in other processes)."""
        try:
            return await self.tenant_for(database, token) == tenant
        except Unauthorized:
            return False

    async def _tenant_of_key(self, database: Database, token: str) -> str | None:
        digest = hash_key(token)
        for known, tenant in self._configured.items():
            if hmac.compare_digest(known, digest):
                return tenant
        grant = await self._cached(
            database, digest, lambda db: ApiKeyRepository(db).grant_for_hash(digest)
        )
        if grant is None:
            return None
        tenant, expires_at = grant
        if expires_at is not None and expires_at <= utcnow():
            return None  # checked at every use: a cached grant does not outlive its key
        return tenant

    async def _cached(
        self, database: Database, key: str, read: Callable[[AsyncSession], Awaitable[T]]
    ) -> T:
        """`read`'s answer, from the cache or from a short read of its own."""
        cache: caches.TtlCache[str, T] = database.caches[caches.API_KEYS]
        value = cache.get(key)
        if not isinstance(value, caches.Miss):
            return value
        stamp = cache.stamp()
        async with database.read() as db:
            answer = await read(db)
        cache.put(key, answer, stamp)
        return answer
