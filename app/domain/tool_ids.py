"""Tool call ids in the one shape the Messages API accepts: `^[a-zA-Z0-9_-]+$`.

The API refuses a whole request whose `tool_use.id` or `tool_result.tool_use_id` holds any
other character, and the console puts the ids into element ids and CSS selectors. An id that
comes from elsewhere (a Claude Code transcript written against another endpoint, the answer
of a compatible endpoint) is rewritten where it enters Strata, by `api_tool_id`:

- an id of that shape is kept as it is;
- any other id keeps its allowed characters (each refused one becomes `_`, at most
  `KEPT_CHARS` of them), followed by `_` and a digest of the whole id.

The rewrite is a function of the id alone, so a call and its result that enter apart (two
transcript posts, an answer and the tool run after it) still name each other, importing the
same lines again finds the same ids, and two ids that differ only in refused characters stay
two ids.
"""

from __future__ import annotations

import hashlib
import re

TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")  # the whole id: fullmatch, as `$` allows a final "\n"
_REFUSED = re.compile(r"[^a-zA-Z0-9_-]")
KEPT_CHARS = 64  # of a rewritten id's own text: enough to recognise it, bounded
DIGEST_CHARS = 16  # hex digits of SHA-256: 64 bits, no two ids of one log collide


def is_api_tool_id(value: str) -> bool:
    return TOOL_ID.fullmatch(value) is not None


def api_tool_id(value: str) -> str:
    """`value` if the Messages API accepts it as a tool call id, else its rewrite."""
    if is_api_tool_id(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    kept = _REFUSED.sub("_", value[:KEPT_CHARS])
    return f"{kept}_{digest[:DIGEST_CHARS]}"
