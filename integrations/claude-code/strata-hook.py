#!/usr/bin/env python3
"""Claude Code hook -> Strata. Standard library only; copy it to ~/.claude/strata-hook.py.

SessionStart: posts the payload and prints Strata's answer, whose
`hookSpecificOutput.additionalContext` (the memory of earlier sessions of this
project) Claude Code adds to the new session. Stop / SubagentStop: posts the
transcript lines written since the last post (it remembers how far it got per
transcript file). Strata ingests idempotently, so a line sent twice is harmless.

Environment: STRATA_URL (default http://127.0.0.1:8000), STRATA_API_KEY (if the
server has keys), STRATA_HOOK_STATE (default ~/.cache/strata/claude-code).
The hook never blocks Claude Code: on any failure it says why on stderr and exits 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

TIMEOUT_SECONDS = 15


def post(payload: dict[str, object]) -> dict[str, object]:
    url = os.environ.get("STRATA_URL", "http://127.0.0.1:8000").rstrip("/") + "/hooks/claude-code"
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("STRATA_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        body = response.read()
    return json.loads(body) if body else {}


def state_file(transcript: Path) -> Path:
    root = Path(os.environ.get("STRATA_HOOK_STATE", "~/.cache/strata/claude-code")).expanduser()
    digest = hashlib.sha256(str(transcript.resolve()).encode()).hexdigest()[:32]
    return root / f"{digest}.lines"


def new_lines(transcript: Path) -> tuple[str, int, int]:
    """(text of the lines not sent yet, number of the first, total lines now)."""
    sent = 0
    marker = state_file(transcript)
    if marker.is_file():
        try:
            sent = int(marker.read_text().strip() or 0)
        except ValueError:
            sent = 0
    # Only "\n" ends a JSONL line (JSON strings may hold U+2028 and the like raw); the last
    # piece is "" or a line still being written, which is sent next time.
    lines = transcript.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]
    if sent > len(lines):  # the file was replaced: start over (ingestion is idempotent)
        sent = 0
    return "".join(line + "\n" for line in lines[sent:]), sent + 1, len(lines)


def main() -> int:
    payload = json.load(sys.stdin)
    event = payload.get("hook_event_name")
    if event == "SessionStart":
        answer = post(payload)
        print(json.dumps(answer))
        return 0
    if event not in ("Stop", "SubagentStop"):
        return 0
    path_text = payload.get("agent_transcript_path") if event == "SubagentStop" else None
    path_text = path_text or payload.get("transcript_path")
    if not path_text:
        return 0
    transcript = Path(str(path_text)).expanduser()
    text, first, total = new_lines(transcript)
    if not text:
        return 0
    post({**payload, "transcript": text, "transcript_first_line": first})
    marker = state_file(transcript)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(total))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, urllib.error.URLError) as exc:
        print(f"strata-hook: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(0)
