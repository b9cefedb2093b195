"""TypeScript types generated from openapi/openapi.json type the hand-written client.

`openapi-typescript` writes clients/typescript/generated/schema.ts (gitignored, rewritten on
every run) and `tsc` checks clients/typescript/client.ts against it in strict mode, together
with wrong-usage.ts, whose mistakes must each be a type error (`@ts-expect-error`): a
document whose types no longer fit the client, or whose types degraded to `any`, fails here.

The tools come from clients/typescript/package-lock.json, installed by `make test` (the
`ts-tools` target runs `npm ci`), never by the test. Marked `sqlite_only`: nothing here
touches a database, so the PostgreSQL run of the suite would only repeat it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO_ROOT / "clients" / "typescript"
BIN = CLIENT_DIR / "node_modules" / ".bin"
SCHEMA = CLIENT_DIR / "generated" / "schema.ts"
RUN_WITHIN = 120.0  # seconds; each tool takes about 2 s on an idle machine

pytestmark = pytest.mark.sqlite_only


def _tool(name: str) -> Path:
    """A tool from node_modules; missing means npm ci never ran, which is a failure (the check
    would otherwise silently not happen), with what to run."""
    path = BIN / name
    if not path.exists():
        pytest.fail(
            f"{path.relative_to(REPO_ROOT)} is missing: install the TypeScript tools with "
            "`make ts-tools` (`make test` does it), i.e. `npm ci` in clients/typescript",
            pytrace=False,
        )
    return path


def _run(*command: str | Path) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=RUN_WITHIN,
        check=False,
    )
    output = f"{done.stdout}\n{done.stderr}".strip()
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))} exited {done.returncode}:\n{output}"
    )
    return output


def test_generated_types_type_check_the_typescript_client() -> None:
    generate = _tool("openapi-typescript")
    tsc = _tool("tsc")
    SCHEMA.unlink(missing_ok=True)  # never check against a previous run's types

    output = _run(generate, "../../openapi/openapi.json", "-o", SCHEMA.relative_to(CLIENT_DIR))

    assert SCHEMA.is_file(), output
    assert "warn" not in output.lower(), f"openapi-typescript warned:\n{output}"
    _run(tsc, "--noEmit", "-p", ".")
