"""TypeScript types generated from openapi/openapi.json type the hand-written client.

`openapi-typescript` writes clients/typescript/generated/schema.ts (gitignored, rewritten on
every run) and `tsc` checks the client (client.ts, events.ts, smoke.ts) against it in strict
mode, together with wrong-usage.ts, whose mistakes must each be a type error
(`@ts-expect-error`): a document whose types no longer fit the client, or whose types
degraded to `any`, fails here.

The tools come from clients/typescript/package-lock.json, installed by `make test` (the
`ts-tools` target runs `npm ci`), never by the test. Marked `sqlite_only`: nothing here
touches a database, so the PostgreSQL run of the suite would only repeat it.
"""

from __future__ import annotations

import pytest

from tests.clients.typescript import XDIST_GROUP, generate_schema, run, tool

pytestmark = [pytest.mark.sqlite_only, pytest.mark.xdist_group(XDIST_GROUP)]


def test_generated_types_type_check_the_typescript_client() -> None:
    output = generate_schema()

    assert "warn" not in output.lower(), f"openapi-typescript warned:\n{output}"
    run(tool("tsc"), "--noEmit", "-p", ".")
