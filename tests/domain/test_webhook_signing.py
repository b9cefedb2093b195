"""Standard Webhooks signing: the upstream vectors, the reference library, the docs' examples."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError
from standardwebhooks import Webhook

from app.domain.webhook_signing import (
    WebhookVerificationError,
    generate_secret,
    secret_key,
    sign,
    signed_headers,
    verify,
)
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = json.loads(
    (ROOT / "tests/fixtures/webhooks/standard_webhooks_vectors.json").read_text("utf-8")
)
VECTORS: list[dict[str, str]] = FIXTURE["vectors"]
NEGATIVE: list[dict[str, str]] = FIXTURE["negative"]


def _headers(vector: dict[str, str], signature: str | None = None) -> dict[str, str]:
    return {
        "webhook-id": vector["webhook-id"],
        "webhook-timestamp": vector["webhook-timestamp"],
        "webhook-signature": signature or vector["webhook-signature"],
    }


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["webhook-id"])
def test_sign_matches_the_vectors(vector: dict[str, str]) -> None:
    signature = sign(
        vector["secret"], vector["webhook-id"], int(vector["webhook-timestamp"]), vector["body"]
    )

    assert signature == vector["webhook-signature"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["webhook-id"])
def test_the_reference_library_signs_the_same(vector: dict[str, str]) -> None:
    at = datetime.fromtimestamp(int(vector["webhook-timestamp"]), UTC)

    expected = Webhook(vector["secret"]).sign(vector["webhook-id"], at, vector["body"])

    assert expected == vector["webhook-signature"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["webhook-id"])
def test_verify_accepts_the_vectors_at_their_time(vector: dict[str, str]) -> None:
    now = int(vector["webhook-timestamp"])

    verify(vector["secret"], _headers(vector), vector["body"].encode(), now=now)
    verify(vector["secret"], _headers(vector), vector["body"], now=now + 299)


@pytest.mark.parametrize("negative", NEGATIVE, ids=lambda n: n["why"])
def test_verify_rejects_the_negative_signatures(negative: dict[str, str]) -> None:
    vector = VECTORS[0]
    headers = _headers(vector, negative["webhook-signature"])

    with pytest.raises(WebhookVerificationError):
        verify(vector["secret"], headers, vector["body"], now=int(vector["webhook-timestamp"]))


def test_verify_accepts_any_matching_signature_of_several() -> None:
    vector = VECTORS[0]
    several = f"v2,abc v1,{base64.b64encode(b'x' * 32).decode()} {vector['webhook-signature']}"

    verify(
        vector["secret"],
        _headers(vector, several),
        vector["body"],
        now=int(vector["webhook-timestamp"]),
    )


@pytest.mark.parametrize(
    ("change", "offset"),
    [
        ({"body": '{"test": 2432232315}'}, 0),
        ({"webhook-id": "msg_other"}, 0),
        ({"secret": "whsec_" + base64.b64encode(b"k" * 24).decode()}, 0),
        ({}, 301),
        ({}, -301),
    ],
    ids=["body", "id", "secret", "too-old", "too-new"],
)
def test_verify_rejects_a_changed_message_or_a_stale_timestamp(
    change: dict[str, str], offset: int
) -> None:
    vector = {**VECTORS[0], **change}

    with pytest.raises(WebhookVerificationError):
        verify(
            vector["secret"],
            _headers(VECTORS[0]) | {k: v for k, v in change.items() if k.startswith("webhook")},
            vector["body"],
            now=int(vector["webhook-timestamp"]) + offset,
        )


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_verify_needs_the_three_headers(missing: str) -> None:
    vector = VECTORS[0]
    headers = {k: v for k, v in _headers(vector).items() if k != missing}

    with pytest.raises(WebhookVerificationError, match="missing"):
        verify(vector["secret"], headers, vector["body"], now=int(vector["webhook-timestamp"]))


def test_generated_secrets_are_whsec_and_24_random_bytes() -> None:
    first, second = generate_secret(), generate_secret()

    assert first.startswith("whsec_") and first != second
    assert len(secret_key(first)) == 24
    assert len(base64.b64decode(first.removeprefix("whsec_"), validate=True)) == 24


def test_the_reference_library_verifies_what_we_sign() -> None:
    secret = generate_secret()
    body = b'{"type":"webhook.test","timestamp":"2026-01-01T00:00:00Z","data":{}}'
    now = int(datetime.now(UTC).timestamp())

    headers = signed_headers(secret, "msg_1", now, body)

    assert Webhook(secret).verify(body, headers)["type"] == "webhook.test"
    verify(secret, headers, body)


@pytest.mark.parametrize("secret", ["whsec_", "whsec_not*base64"])
def test_a_malformed_secret_is_refused(secret: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        secret_key(secret)


# --- the retry schedule setting -------------------------------------------------------


def test_retry_schedule_defaults_to_five_attempts_within_an_hour() -> None:
    delays = Settings(_env_file=None).webhook_retry_delays

    assert len(delays) == 5
    assert delays[0] == 0
    assert 45 * 60 <= sum(delays) <= 60 * 60


@pytest.mark.parametrize("schedule", ["", "0,,1", "1,-2", "soon", "0,nan", "0,inf"])
def test_a_malformed_retry_schedule_is_refused(schedule: str) -> None:
    with pytest.raises(ValidationError, match="webhook_retry_schedule"):
        Settings(_env_file=None, webhook_retry_schedule=schedule)


# --- the webhooks page's verification examples work -------------------------------------------


def _readme_block(language: str) -> str:
    section = (ROOT / "docs" / "webhooks.md").read_text("utf-8")
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"docs/webhooks.md has no {language} block"
    return match.group(1)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["webhook-id"])
def test_readme_python_example_verifies(vector: dict[str, str]) -> None:
    namespace: dict[str, Any] = {}
    exec(_readme_block("python"), namespace)
    namespace["time"] = SimpleNamespace(time=lambda: int(vector["webhook-timestamp"]))
    body = vector["body"].encode()

    assert namespace["verify"](vector["secret"], _headers(vector), body) is True
    forged = _headers(vector, NEGATIVE[0]["webhook-signature"])
    assert namespace["verify"](vector["secret"], forged, body) is False


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")
@pytest.mark.parametrize("good", [True, False], ids=["valid", "forged"])
def test_readme_shell_example_verifies(tmp_path: Path, good: bool) -> None:
    vector = VECTORS[1]
    (tmp_path / "body.json").write_bytes(vector["body"].encode())
    signature = vector["webhook-signature"] if good else NEGATIVE[0]["webhook-signature"]
    env = {
        "PATH": "/usr/bin:/bin",
        "SECRET": vector["secret"],
        "WEBHOOK_ID": vector["webhook-id"],
        "WEBHOOK_TIMESTAMP": vector["webhook-timestamp"],
        "WEBHOOK_SIGNATURE": f"v1,AAAA {signature}",
    }

    done = subprocess.run(
        ["bash", "-c", _readme_block("bash")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )

    assert (done.returncode, done.stdout.strip()) == ((0, "signature ok") if good else (1, ""))
