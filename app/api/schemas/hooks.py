"""Claude Code hooks: the payload a hook posts and what Claude Code reads back."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class ClaudeCodeHook(BaseModel):
    """A Claude Code hook payload as it arrives on a hook's stdin or an `http` hook's body,
    plus Strata's optional `transcript` (the new JSONL lines) for command hooks."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "hook_event_name": "SessionStart",
                    "session_id": "9f0c2a7e-4b1d-4c8e-9a51-3d2f6b7c8e10",
                    "cwd": "/home/me/project",
                    "source": "startup",
                    "transcript_path": "/home/me/.claude/projects/project/9f0c2a7e.jsonl",
                }
            ]
        },
    )

    hook_event_name: str = Field(max_length=100)
    session_id: str = Field(min_length=1, max_length=150)
    cwd: str | None = Field(default=None, max_length=4096)
    project_root: str | None = Field(
        default=None,
        max_length=4096,
        description=(
            "The git root of `cwd`, sent by Strata's hook script: sessions started in "
            "different folders of one repository share a chain."
        ),
    )
    kit_mode: Literal["plugin", "settings"] | None = Field(
        default=None,
        description=(
            "Sent by Strata's hook script with `SessionStart`: `plugin` when the kit runs as "
            "the Claude Code plugin (its command is `/strata:sc-detail`), `settings` when "
            "`strata claude-code install` installed it (`/sc-detail`, also the default)."
        ),
    )
    kit_mcp: StrictBool = Field(
        default=False,
        description=(
            "Sent by Strata's hook script with `SessionStart`: whether Claude Code has "
            "Strata's MCP server `strata`; the memory block then names its "
            "`memory_detail` tool instead of the slash command."
        ),
    )
    source: str | None = Field(default=None, max_length=50)
    transcript_path: str | None = Field(default=None, max_length=4096)
    agent_transcript_path: str | None = Field(default=None, max_length=4096)
    transcript: str | None = Field(default=None, description="New transcript lines (JSONL).")
    transcript_first_line: int = Field(
        default=1, ge=1, le=2**31, description="Line number of the first."
    )


class HookSpecificOutput(BaseModel):
    hookEventName: str
    additionalContext: str


class HookAnswer(BaseModel):
    """What Claude Code reads back: SessionStart context, or a message about skipped lines."""

    hookSpecificOutput: HookSpecificOutput | None = None
    systemMessage: str | None = None
