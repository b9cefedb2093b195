"""Standard Webhooks signatures: pure functions, no I/O.

A delivery carries three headers: `webhook-id` (the message id, the same on every
retry), `webhook-timestamp` (integer seconds since the epoch, of this attempt) and
`webhook-signature`: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed
with the base64-decoded part of the `whsec_…` secret. Several space-separated
signatures may be sent (key rotation); a verifier accepts any `v1` one that matches
and skips other versions. See https://www.standardwebhooks.com/.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping, Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 24
DEFAULT_TOLERANCE_SECONDS = 5 * 60


class WebhookVerificationError(Exception):
    """The headers are missing, stale or do not sign this body."""


def generate_secret() -> str:
    """`whsec_` followed by base64 of 24 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key: the base64-decoded part after `whsec_`."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("a webhook secret is `whsec_` followed by base64") from exc
    if not key:
        raise ValueError("a webhook secret may not be empty")
    return key


def _as_bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def sign(secret: str, msg_id: str, timestamp: int, body: bytes | str) -> str:
    """The `webhook-signature` value for one message: `v1,<base64>`."""
    content = f"{msg_id}.{timestamp}.".encode() + _as_bytes(body)
    digest = hmac.new(secret_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(
    secrets: str | Sequence[str], msg_id: str, timestamp: int, body: bytes | str
) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt; with several secrets (a rotation
    under way), one signature of each, space-separated, the first secret's first."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(key, msg_id, timestamp, body) for key in keys),
    }


def _decoded(signature: str) -> bytes | None:
    try:
        return base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return None


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    now: float | None = None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> None:
    """Raise `WebhookVerificationError` unless `headers` sign `body` with `secret`.

    The timestamp must lie within `tolerance_seconds` of `now` (replay protection).
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp")
    signatures = lowered.get("webhook-signature")
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or signature")
    try:
        timestamp = int(stamp)
    except ValueError as exc:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from exc
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    expected = _decoded(sign(secret, msg_id, timestamp, body).partition(",")[2])
    for candidate in signatures.split(" "):
        version, _, value = candidate.partition(",")
        if version != "v1":
            continue
        given = _decoded(value)
        if given is not None and expected is not None and hmac.compare_digest(expected, given):
            return
    raise WebhookVerificationError("no matching signature")
