"""The TypeScript client's tools, as clients/typescript/package-lock.json pins them.

`make test` installs them (the `ts-tools` target runs `npm ci`), never a test: a tool that is
missing fails the test that needs it, saying what to run. `generate_schema()` rewrites
clients/typescript/generated/schema.ts, which every TypeScript check compiles against, so
the tests that call it share one xdist group (`XDIST_GROUP`) and never race on that file.
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
XDIST_GROUP = "typescript-client"
# A field with a default is optional in a request (the server fills it in), so its type must
# not be required; answers list every field as required in the document itself.
GENERATE_OPTIONS = ("--default-non-nullable", "false")


def tool(name: str) -> Path:
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


def run(*command: str | Path, within: float = RUN_WITHIN) -> str:
    """What `command` printed (stdout, then stderr), run in clients/typescript; it must exit 0."""
    done = subprocess.run(
        [str(part) for part in command],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=within,
        check=False,
    )
    output = f"{done.stdout}\n{done.stderr}".strip()
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))} exited {done.returncode}:\n{output}"
    )
    return output


def generate_schema() -> str:
    """Regenerate generated/schema.ts from openapi/openapi.json (never a previous run's types);
    what openapi-typescript printed."""
    generate = tool("openapi-typescript")
    SCHEMA.unlink(missing_ok=True)
    output = run(
        generate,
        "../../openapi/openapi.json",
        *GENERATE_OPTIONS,
        "-o",
        SCHEMA.relative_to(CLIENT_DIR),
    )
    assert SCHEMA.is_file(), output
    return output
