"""Every tunable number of Strata, with the seeds' defaults.

One place so that operators find every knob in `.env.example` and tests build a
`Settings` object instead of patching module constants. Nothing here is read at
import time: `create_app(settings)` and the CLI pass an instance down.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


@dataclass(frozen=True)
class ConfiguredKey:
    """An API key listed in settings: plain text or already hashed (`sha256:<hex>`)."""

    tenant: str
    secret: str


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="STRATA_",
        env_file=".env",
        env_file_encoding="utf-8",
        # `ANTHROPIC_API_KEY=` (as in .env.example or `docker run -e NAME=`) means unset,
        # not an empty key that would count as a configured LLM.
        env_ignore_empty=True,
        extra="ignore",
    )

    # --- server and storage -------------------------------------------------
    # Address `strata serve` binds.
    host: str = "127.0.0.1"
    # Port to listen on; `PORT`, as hosting platforms set it, is read too.
    port: int = Field(default=8000, validation_alias=AliasChoices("STRATA_PORT", "PORT"))
    # SQLAlchemy URL: SQLite, or PostgreSQL as `postgresql+psycopg://user:pass@host:5432/db`.
    database_url: str = "sqlite:///./data/strata.db"
    # Where Strata keeps files (job workspaces).
    data_dir: Path = Path("./data")
    # How long a SQLite writer waits for the lock.
    sqlite_busy_timeout_ms: int = 5000
    # How long a SQLite read waits for a lock, in milliseconds: reads run on the event loop;
    # in WAL mode they wait only in rare moments (recovery)
    sqlite_read_busy_timeout_ms: int = 100
    # read connections kept open (SQLite): each read unit in progress holds one, and one
    # opened past these is closed after use, which costs more than the read itself
    sqlite_read_connections: int = Field(default=32, ge=1)
    # write units of work queued together are committed by one transaction (group commit)
    db_write_batch_max: int = 64
    # a request that meets a locked or unreachable database gets 503 with this Retry-After
    db_unavailable_retry_after_seconds: int = 2
    # background loops retrying through a database outage wait at most this long between tries
    db_retry_max_seconds: float = 5.0
    # PostgreSQL: a pooled connection idle this long is pinged before use (one round trip); a
    # connection the server closed is replaced whatever its idle time (its socket says so)
    db_ping_idle_seconds: float = Field(default=1.0, ge=0)
    # /readyz is 503 when the runner or webhook dispatcher has not come round for this long
    background_stall_seconds: float = 15.0
    # Entries each in-process cache (API keys, webhook subscriptions, task lists) keeps at most.
    cache_max_entries: int = Field(default=10_000, ge=1)
    # Log level.
    log_level: str = "info"
    # `json`: one JSON object per log line, with the request, session and job ids it concerns
    log_format: Literal["text", "json"] = "text"

    # --- tenants and keys ---------------------------------------------------
    # Comma-separated `tenant:key` pairs; a key may be given as `sha256:<hex>` so
    # that the deployment's environment never holds the key itself.
    api_keys: str = ""
    # How long a process trusts what it read about a key (its tenant, or that it does not
    # exist, or that no key exists at all), in seconds. Keys created in this process count
    # at once; keys created elsewhere (`strata keys create`) after this long at most.
    api_key_cache_seconds: float = Field(default=5.0, ge=0)

    # --- HTTP limits --------------------------------------------------------
    # Request body limit (413 above).
    max_body_bytes: int = 1024 * 1024
    # Body limit of `POST /hooks/claude-code` (whole transcripts).
    hook_max_body_bytes: int = 64 * 1024 * 1024
    # Let POST /hooks/claude-code read `transcript_path` itself (same machine only).
    hook_read_transcript_path: bool = False
    # The only folders (and their subfolders) it may read transcripts from, separated by
    # commas; any other path is refused with 403, so an API client cannot make the server
    # read an arbitrary file of its machine.
    hook_transcript_roots: str = "~/.claude/projects"
    # A Claude Code transcript is imported in write transactions of at most this many
    # items, so no import holds SQLite's write lock for long: a chunk of 20 real transcript
    # items is tens of milliseconds on the writer thread, and the chunk that completes a turn
    # also projects it.
    import_chunk_items: int = Field(default=20, ge=1)
    # How long an `Idempotency-Key` is remembered.
    idempotency_ttl_seconds: float = 24 * 3600
    # Items of a list page when the request names no `limit`.
    page_limit_default: int = 50
    # The largest `limit` a list request may ask for.
    page_limit_max: int = 200
    # Jobs one tenant may have queued or running at once (plus its transcript imports
    # running in this process): a new message, job, draft start or import past it gets
    # 429. Room for a few hundred busy sessions; 0: no cap.
    tenant_max_active_jobs: int = Field(default=1000, ge=0)
    # Bytes of hook bodies this process holds at once, all tenants together: four bodies
    # of STRATA_HOOK_MAX_BODY_BYTES. One more gets 503. 0: no budget; else at least
    # STRATA_HOOK_MAX_BODY_BYTES, so that every body the limit lets in can fit.
    hook_body_budget_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    # The Retry-After of those 429 and 503, in whole seconds.
    admission_retry_after_seconds: int = Field(default=2, ge=0)

    # --- LLM ----------------------------------------------------------------
    # The Anthropic key (a secret, never logged).
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("STRATA_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    )
    # Messages API base URL (tests point it at a fake server).
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("STRATA_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
    )
    # The agent model.
    model: str = "claude-sonnet-4-5"
    # The cheap model for summaries and compaction.
    summary_model: str = "claude-haiku-4-5-20251001"
    # `max_tokens` per request.
    llm_max_tokens: int = 8192
    # Per-request timeout.
    llm_timeout_seconds: float = 600.0
    # SDK retries on 429/529/5xx/timeouts.
    llm_max_retries: int = 2
    # LLM requests in flight on one client's connection pool at most; past it a request
    # takes the next client (each request looks through its pool's connections, so one
    # pool of a thousand costs every request a thousand checks)
    llm_requests_per_pool: int = Field(default=64, ge=1)
    # The model's context window (a smaller one the API names in a refusal wins).
    context_window_tokens: int = 200_000
    # LLM calls per agent loop before the job fails.
    agent_max_iterations: int = 50

    # --- task reminder (seed 000) -------------------------------------------
    # Task reminder: N requests without TaskCreate/TaskUpdate.
    reminder_requests_since_task_write: int = 8  # N
    # Task reminder: cooldown M.
    reminder_requests_between_reminders: int = 8  # M
    # the reminder's task lines at most, in characters (a longer list ends saying how many
    # active tasks it leaves out): everything that enters a request has a budget
    reminder_max_chars: int = Field(default=4_000, ge=200)
    # the task list a compacted segment opens with, and a movement's prompt carries
    task_snapshot_max_chars: int = Field(default=8_000, ge=200)
    # a rebuild of the task list in a write that replayed more task operations than this
    # leaves a checkpoint, where the next rebuild starts (a rebuild stays well under 0.5 s)
    task_checkpoint_ops: int = Field(default=1_000, ge=1)
    # what the process read of a session's log (its segment, task list and request
    # messages: its view) is kept between its readers (chat turns, REST task routes) this
    # long (seconds; 0 keeps none), so the next one reads only what the log gained since
    # instead of the whole segment; at most this many sessions' views (each holds its
    # session's current segment, ~1 MB of text near the context window; a view is taken by
    # its reader, so fewer entries than sessions turning at once in the process makes every
    # turn miss), and at most this many items in all (a segment grows with every turn until
    # compaction: the oldest views go first)
    job_session_cache_seconds: float = Field(default=60.0, ge=0)
    # Sessions whose views are kept at most, the oldest going first: each holds its session's
    # segment (~1 MB of text near the context window); fewer than the sessions turning at once in
    # the process makes every turn miss.
    job_session_cache_entries: int = Field(default=1_000, ge=1)
    # Log items those kept views hold in all, the oldest views going first (a segment grows with
    # every turn until compaction, so this bounds their memory; a segment longer than this is not
    # kept).
    job_session_cache_items: int = Field(default=5_000, ge=1)
    # net allocations of container objects between two collections of the cyclic garbage
    # collector's youngest generation in `strata serve` / `strata worker` (Python's default is
    # 700, at which a worker spends a large share of its CPU collecting)
    gc_threshold: int = Field(default=50_000, ge=700)

    # --- layered memory (seed 003) ------------------------------------------
    # Turns kept as L2 in the memory block, at most.
    memory_l2_window_turns: int = 20
    # The memory block's length in characters, at most: Claude Code inlines a SessionStart
    # `additionalContext` only up to 10,000 characters (a longer one becomes a file the
    # model is only pointed at), so the block stays under that. Also the default of
    # GET /sessions/{id}/memory?max_chars=.
    memory_block_max_chars: int = Field(default=9_500, ge=1_000)
    # The share of the block the newest turns (L2) may fill when older turns follow, so
    # that long recent turns cannot crowd out every older turn's summary line.
    memory_block_l2_ratio: float = Field(default=0.7, gt=0, le=1)
    # A turn's end cleans its texts for its memory before the transaction that stores it;
    # past this many characters on a thread of its own, so that the worker's event loop
    # serves its other jobs meanwhile (below it, the hand-off costs more than the cleaning).
    memory_clean_thread_chars: int = Field(default=4_000, ge=0)
    # One page of a detail look-up (GET /sessions/{id}/detail/{time}), in characters, when
    # the request names no `max_chars`: one turn's detail is 250-590 KB on some real
    # transcripts.
    detail_page_max_chars: int = Field(default=8_000, ge=1_000)
    # A merge's turns move in write transactions of at most this many turns, after one
    # small transaction has decided the merge: a chunk of 1,000 turns of 1 KB holds SQLite's
    # write lock for tens of milliseconds, commit included.
    merge_chunk_turns: int = Field(default=1000, ge=1)
    # Full-text search of memory (GET /memory/search, the MCP tool `memory_search`): hits
    # per answer when the request names no `limit`.
    memory_search_limit_default: int = Field(default=10, ge=1)
    # The most hits a memory search answers, whatever `limit` it names.
    memory_search_limit_max: int = Field(default=50, ge=1)
    # Words and phrases of a query that are searched for (the first ones): each is one more
    # condition on the index.
    memory_search_max_terms: int = Field(default=16, ge=1)
    # A hit's line, in characters at most, cut around its first match.
    memory_search_line_chars: int = Field(default=240, ge=40)
    # Matches a search ranks at most, in turns and in L3 entries each: the newest ones.
    # Ranking costs in proportion to the matches (~5 us each on SQLite), so a word most
    # turns hold is ranked among the newest, not among a million.
    memory_search_rank_window: int = Field(default=2_000, ge=1)
    # On SQLite, a hit ranks by how often its text holds the query's words, counted in the
    # first this many characters of each of its texts (a window of long tool outputs
    # would otherwise be read whole).
    memory_search_rank_chars: int = Field(default=4_000, ge=100)
    # Every answer of the MCP server at /mcp, in characters at most, its last line saying how
    # to read on: ~8,000 tokens at ~4 characters a token (Claude Code refuses a tool output
    # over 25,000 tokens).
    mcp_answer_max_chars: int = Field(default=32_000, ge=2_000)
    # Turns a `memory_timeline` call shows on each side of its point, at most.
    mcp_timeline_max_turns: int = Field(default=20, ge=1)
    # The MCP server's write tools (task_create, task_update, job_submit, job_status,
    # job_comment); off: it only reads.
    mcp_write_tools: bool = False
    # L1 summary length, 1/5 of L2.
    summary_target_ratio: float = 0.2  # 1/5 of the L2 length
    # An L1 request's `max_tokens` per character of the summary's target length: a line
    # averages ~4 characters a token, so 1 leaves room for one that runs long or a denser
    # language, and never reserves 8,192 tokens for a 40-token line.
    summary_max_tokens_per_char: float = Field(default=1.0, gt=0)
    # Retries before L2 is stored as L1.
    summary_retries: int = 2
    # L1 summaries at once.
    summary_concurrency: int = 2
    # Zone of `HH:MM:SS` times.
    display_timezone: str = "UTC"
    # GET /sessions/{id}/turns shows each turn's L1, else the start of its user text, cut
    # to this many characters: a timeline to pick a time from, not the turns themselves
    turn_preview_chars: int = Field(default=200, ge=20)
    # A job's `waiting_on` says what a subtask held on tool calls waits for: each call's
    # tool and its input on one line, the input cut to this many characters
    waiting_call_input_chars: int = Field(default=200, ge=20)

    # --- the console (/console) ----------------------------------------------
    # Serve the web console at /console (a client of this same API; off: no /console route).
    console_enabled: bool = True
    # Rows per page of the console's lists (sessions, jobs, webhooks, deliveries) and of a
    # session's turns timeline and usage table.
    console_page_size: int = Field(default=25, ge=1, le=200)
    # A page's live stream that ends reads the regions it could not read (the API busy or
    # away for a moment) again, this many times, this many seconds apart.
    console_stream_last_tries: int = Field(default=3, ge=1)
    # How far apart those tries are, in seconds.
    console_stream_last_try_seconds: float = Field(default=0.2, ge=0)
    # Messages of a streamed API answer (a page's live events, a download) the console
    # holds for its browser; a browser that reads slower stops the API's stream there.
    console_stream_buffer: int = Field(default=64, ge=1)
    # Each log item is cut to this length in the compaction summary's transcript.
    compaction_item_max_chars: int = 4000

    # --- jobs, comments, lessons (seed 004) ---------------------------------
    # Comments in a job's enriched instruction.
    job_comments_in_prompt: int = 5
    # Characters per comment in that instruction.
    job_comment_max_chars: int = 500
    # paths of `input/` and of `output/` listed in a movement's prompt, each (~9 tokens a
    # path); the rest is counted, for the model to Glob
    job_files_in_prompt: int = Field(default=200, ge=1)
    # Lessons handed to the next movement.
    lessons_max_chars: int = 2000
    # feedback a checking movement sends back to an earlier one, capped like the lessons
    feedback_max_chars: int = Field(default=2000, ge=100)
    # movements a piece job may run (its piece's `max_movements` wins); then it is aborted
    job_max_movements: int = Field(default=30, ge=1)
    # subtasks one job may start with spawn_subtask (a job tree's movements all count
    # against its root's movement budget)
    job_max_subtasks: int = Field(default=10, ge=0)
    # Levels of subtasks below a job tree's root (at most 16, the depth cancels and waiting
    # questions are followed to); a subtask at the deepest level cannot start one.
    job_max_subtask_depth: int = Field(default=3, ge=0, le=16)
    # the checklists of logs/checklists/*.json shown to the next movement, in characters
    checklists_max_chars: int = Field(default=2000, ge=100)
    # the outcomes of finished subtasks shown to the movement that waited for them, in
    # characters; the rest is counted
    subtask_outcomes_max_chars: int = Field(default=4000, ge=100)
    # the `git status` / diff excerpt handed on after a verify movement, in characters
    git_excerpt_max_chars: int = Field(default=2000, ge=100)
    # the entries the excerpt looks at, of HEAD's tree, the index and the folders (it is
    # computed in Python, git never runs; it says where it stopped)
    git_excerpt_max_files: int = Field(default=100_000, ge=1)
    # Bytes the excerpt reads at most from the repository and its files, characters matched against
    # `.gitignore` patterns included (128 MiB).
    git_excerpt_max_read_bytes: int = Field(default=128 * 1024**2, ge=1024)
    # Lines of a changed region (between a file's unchanged start and end) the excerpt aligns
    # line by line (difflib's time grows with their square); a longer region is shown
    # removed, then added.
    git_excerpt_diff_max_lines: int = Field(default=1000, ge=1)
    # A claimed job's lease; a dead runner's job is resumed after it expires.
    job_lease_seconds: float = 30.0
    # How often a runner renews its leases and looks for cancel requests.
    job_heartbeat_seconds: float = 10.0

    # --- pieces and workspaces (seed 004) -----------------------------------
    # A folder of extra piece YAML files.
    pieces_dir: Path | None = None
    # Offer the `Bash` tool to movements that allow it.
    bash_tool_enabled: bool = False
    # Longest run of one `Bash` command.
    bash_timeout_seconds: float = 60.0
    # CPU seconds of each process a `Bash` command starts (0: unlimited)
    bash_cpu_seconds: int = Field(default=60, ge=0)
    # Address space of each process a `Bash` command starts (2 GiB; 0: unlimited).
    bash_memory_bytes: int = Field(default=2 * 1024**3, ge=0)
    # Largest file a `Bash` command may write (256 MiB; 0: unlimited).
    bash_file_size_bytes: int = Field(default=256 * 1024**2, ge=0)
    # Processes of the server's user a `Bash` command may run (Linux does not apply it to root; 0:
    # unlimited).
    bash_max_processes: int = Field(default=256, ge=0)
    # "auto": bubblewrap when it works here, else limits only; "bwrap": refuse to run
    # Bash without it; "none": never
    bash_sandbox: Literal["auto", "bwrap", "none"] = "auto"
    # let a bubblewrap-confined command use the network
    bash_network: bool = False
    # Largest file `PUT` into a job's `input/`.
    max_workspace_file_bytes: int = 16 * 1024 * 1024
    # Snapshots of a job's workspace (one per movement start and chat turn start, for a
    # rewind with `files: true`) kept per job; the oldest go first.
    snapshot_max_per_job: int = Field(default=50, ge=1)
    # A workspace larger than this (its files' bytes) is not snapshotted: the snapshot's
    # record says so, and a rewind to that point is refused.
    snapshot_max_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    # The bytes of a tenant's snapshot store (each distinct content once) at most; a
    # snapshot that would pass it is recorded as not kept, as above.
    snapshot_tenant_max_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=0)

    # --- files (POST /files) and their use in messages ----------------------
    # Largest file `POST /files` stores, in bytes (the Messages API takes 32 MB a request).
    file_max_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    # An image's longest side at most, in pixels: the Messages API's own limit, so an image
    # Strata stores is never refused when a request carries it.
    file_image_max_pixels: int = Field(default=8000, ge=1)
    # A PDF's pages at most: the Messages API's own limit, as for images.
    file_pdf_max_pages: int = Field(default=100, ge=1)
    # The tokens a PDF page is estimated at (its text and its picture: ~1,500 to 3,000).
    file_pdf_page_tokens: int = Field(default=2000, ge=1)
    # Files one tenant may keep (uploads and the images tool results carry); past it a new
    # file is refused (413 `storage-quota`) until the tenant deletes some.
    file_tenant_max_count: int = Field(default=10_000, ge=1)
    # Bytes of files one tenant may keep, counted per file even where identical bytes
    # share one stored copy (10 GiB); past it, as for the count.
    file_tenant_max_bytes: int = Field(default=10 * 1024**3, ge=1)
    # Images and documents one LLM request carries at most: past this (or the bytes below),
    # a chat compacts first, and what still does not fit is sent as a placeholder naming
    # the file, the oldest first.
    request_media_max_count: int = Field(default=20, ge=0)
    # The bytes of the images and documents one LLM request carries at most, before base64
    # (which adds a third); as for their count.
    request_media_max_bytes: int = Field(default=20 * 1024 * 1024, ge=0)
    # Stored files one `POST /jobs` copies into the job's input/ folder (`files`) at most.
    job_files_max_count: int = Field(default=20, ge=0)
    # The bytes of the stored files one `POST /jobs` copies into input/ at most, together.
    job_files_max_bytes: int = Field(default=128 * 1024 * 1024, ge=0)
    # Send images and PDFs as ids of the Anthropic Files API (beta `files-api-2025-04-14`),
    # each file uploaded once per API key and base URL, instead of their bytes in base64 in
    # every request; off: every request carries the bytes.
    llm_use_files_api: bool = False

    # --- tool policies -------------------------------------------------------
    # A JSON file holding a list of tool policy rules, the operator's layer over every
    # tenant's calls; one that cannot be read or holds a bad rule stops the process at
    # its start, naming the rule. Unset: no operator rules.
    tool_policy_file: Path | None = None
    # Rules one layer may hold: the operator's file, a tenant's, a session's, a movement's.
    tool_policy_max_rules: int = Field(default=100, ge=1)
    # Pending actions whose `expires_in` passed are resolved by their `on_timeout` this
    # often (seconds), by the webhook dispatcher's loop.
    action_sweep_seconds: float = Field(default=5.0, gt=0)
    # Expired pending actions one look of that sweep resolves at most.
    action_sweep_batch: int = Field(default=100, ge=1)
    # Client-executed tools one session may offer (`client_tools`).
    client_tools_max: int = Field(default=64, ge=1)

    # --- MCP servers (the `mcp` extra) ---------------------------------------
    # A JSON file naming the operator's stdio MCP servers: {"name": {"command": "...",
    # "args": [...], "env": {...}, "cwd": "..."}}; each runs under the Bash tool's
    # confinement, one process per job. Unset: none.
    mcp_servers_file: Path | None = None
    # let a tenant's MCP server URLs point at private, loopback, link-local, multicast or
    # reserved addresses
    mcp_allow_private: bool = False
    # longest wait for a server's handshake and tool list, in seconds
    mcp_connect_timeout_seconds: float = Field(default=10.0, gt=0)
    # a server's `timeout_s` when it names none: longest wait for one tool call
    mcp_call_timeout_seconds: float = Field(default=60.0, gt=0)
    # the most a server's `timeout_s` may be
    mcp_max_call_timeout_seconds: float = Field(default=600.0, gt=0)
    # tools one session, job or movement may be offered from its MCP servers, all summed
    mcp_max_tools: int = Field(default=128, ge=1)
    # MCP servers one tenant may register
    mcp_max_servers: int = Field(default=50, ge=1)

    # --- the runner (ours) --------------------------------------------------
    # Run a job runner inside `strata serve` (false: only `strata worker` processes run jobs).
    run_worker_in_server: bool = True
    # Jobs one runner runs at once.
    worker_concurrency: int = 32
    # How often an idle runner looks for new rows.
    worker_poll_seconds: float = 0.5
    # On shutdown, how long running jobs may finish their step before they are handed back.
    worker_shutdown_grace_seconds: float = 2.0
    # Default longest wait of `POST /sessions/{id}/messages?wait=true`.
    chat_wait_seconds: float = 60.0
    # Keep-alive comment interval on event streams.
    sse_keepalive_seconds: float = 15.0
    # on SQLite, how often event streams and waiting requests look for what another
    # process committed (never while this process is the database's only writer)
    live_poll_seconds: float = Field(default=0.5, gt=0)
    # how often an open event stream asks again whether its key is still valid
    sse_key_check_seconds: float = Field(default=5.0, gt=0)

    # --- browsers and operations --------------------------------------------
    # Origins allowed to call the API from a browser (CORS), comma-separated, e.g.
    # `http://localhost:5173`; `*` allows any origin. Empty: no CORS headers at all.
    cors_origins: str = ""
    # How long a browser may cache a CORS preflight answer, in seconds.
    cors_max_age_seconds: int = Field(default=600, ge=0)
    # Host names this server answers under besides loopback names (`localhost`, 127.0.0.1,
    # ::1) and its bind address (`host`), comma-separated, e.g. `strata.example.com`; `*`
    # allows any. A request naming another Host gets 403 `host-not-allowed`: a DNS-rebinding
    # page sends a name of its own. A server reached by a public name or address (a
    # container bound to 0.0.0.0, a proxy that keeps the client's Host) lists it here.
    allowed_hosts: str = ""
    # A folder shared by the processes of one machine (API and workers) where each writes its
    # metrics, so `GET /metrics` of any of them counts them all (prometheus-client's
    # multiprocess mode). Unset: each process reports only itself.
    metrics_dir: Path | None = None
    # Jobs whose last LLM answer a process remembers for `strata_step_gap_seconds`, the
    # oldest forgotten first: at least the jobs it runs at once, or their gaps go uncounted.
    step_gap_jobs: int = Field(default=4096, ge=1)
    # Expired Idempotency-Key rows are deleted this often (seconds) by the webhook dispatcher
    # loop, besides being replaced when their key is reused.
    idempotency_purge_seconds: float = Field(default=3600.0, gt=0)
    # Trace requests and jobs (a job's LLM calls, tools and SQL) with OpenTelemetry (needs
    # `strata[otel]`; the exporter is configured by the standard OTEL_* variables).
    otel_enabled: bool = False

    # --- outbound webhooks --------------------------------------------------
    # Let subscriptions target private, loopback, link-local or reserved addresses.
    webhook_allow_private: bool = False
    # Longest wait for a webhook receiver's answer.
    webhook_timeout_seconds: float = 10.0
    # Delays before each attempt, in seconds: the first from the event, each next one
    # from the previous attempt. Its length is the number of attempts.
    webhook_retry_schedule: str = "0,30,120,600,2700"
    # A subscription failing this long without a success is disabled when a delivery fails
    # for good.
    webhook_disable_after_hours: float = 24.0
    # How often the webhook dispatcher looks for due deliveries.
    webhook_poll_seconds: float = 1.0
    # How long a process reuses a tenant's enabled subscriptions when queueing events, in
    # seconds; changes made in this process count at once, others after this long at most.
    webhook_cache_seconds: float = Field(default=5.0, ge=0)
    # After a secret is rotated, deliveries carry a signature with the old secret too for
    # this long, in seconds, so a receiver can switch secrets without rejecting one.
    webhook_secret_overlap_seconds: float = Field(default=86_400.0, ge=0)

    # --- context manager thresholds (seed 004) ------------------------------
    # Context use that emits a `warn` event.
    context_warn_ratio: float = 0.70
    # Context use that asks the agent to wrap up.
    context_prompt_ratio: float = 0.85
    # Context use that forces a transition (compaction in chat).
    context_force_ratio: float = 0.95
    # Context use at which a request is never sent (`context-exhausted`).
    context_exhausted_ratio: float = 0.99

    # --- tool-output truncation (seed 004) ----------------------------------
    # Share of the available tokens the tool results of one response may use together.
    tool_result_budget_ratio: float = 0.5
    # That budget's cap, in tokens.
    tool_result_max_tokens: int = 60_000
    # The floor of each tool result within that budget, in tokens.
    tool_result_min_tokens: int = 1_000

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _valid_retry_schedule(cls, value: str) -> str:
        _retry_delays(value)
        return value

    @field_validator("display_timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        # Checked at start-up rather than at render time. ZoneInfoNotFoundError is a
        # KeyError, which pydantic would not turn into a ValidationError naming the field.
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r}") from exc
        return value

    @model_validator(mode="after")
    def _hook_body_fits_its_budget(self) -> Settings:
        # a body the size limit lets in but the budget never could would be told to
        # retry forever
        if 0 < self.hook_body_budget_bytes < self.hook_max_body_bytes:
            raise ValueError(
                "STRATA_HOOK_BODY_BUDGET_BYTES must be 0 or at least STRATA_HOOK_MAX_BODY_BYTES"
            )
        return self

    @property
    def configured_keys(self) -> list[ConfiguredKey]:
        keys: list[ConfiguredKey] = []
        for raw in self.api_keys.split(","):
            entry = raw.strip()
            if not entry:
                continue
            tenant, sep, secret = entry.partition(":")
            if not sep or not tenant.strip() or not secret.strip():
                raise ValueError(f"STRATA_API_KEYS entry {entry[:12]!r}… is not 'tenant:key'")
            keys.append(ConfiguredKey(tenant=tenant.strip(), secret=secret.strip()))
        return keys

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]

    @property
    def allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.allowed_hosts.split(",") if host.strip()]

    @property
    def transcript_roots(self) -> list[Path]:
        """`hook_transcript_roots` as absolute folders (`~` expanded, symlinks resolved)."""
        parts = (part.strip() for part in self.hook_transcript_roots.split(","))
        return [Path(part).expanduser().resolve() for part in parts if part]

    @property
    def webhook_retry_delays(self) -> tuple[float, ...]:
        return _retry_delays(self.webhook_retry_schedule)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.display_timezone)

    @property
    def llm_configured(self) -> bool:
        return self.anthropic_api_key is not None or self.anthropic_base_url is not None


def _retry_delays(schedule: str) -> tuple[float, ...]:
    """`"0,30,120"` → (0.0, 30.0, 120.0): at least one attempt, no negative delay."""
    try:
        delays = tuple(float(part) for part in schedule.split(","))
    except ValueError as exc:
        raise ValueError(f"not comma-separated seconds: {schedule!r}") from exc
    if any(not math.isfinite(delay) or delay < 0 for delay in delays):
        raise ValueError(f"delays must be finite, zero or positive: {schedule!r}")
    return delays


def is_loopback_host(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# `STRATA_` variables that are not server settings: the Claude Code kit's hook scripts and
# the test suite read these, so a shell that has them set is no typo.
CLIENT_VARIABLES = frozenset(
    {"STRATA_URL", "STRATA_API_KEY", "STRATA_SESSION_ID", "STRATA_HOOK_STATE"}
)
_CLIENT_PREFIXES = ("STRATA_TEST_",)


def setting_variable_fields() -> dict[str, str]:
    """Every environment variable a setting is read from, with the setting's field name: a
    field's aliases first, in their order, then `STRATA_<FIELD>`, so a field's first entry is
    the variable to name to an operator."""
    fields: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            for choice in alias.choices:
                fields.setdefault(str(choice), name)
        elif isinstance(alias, str):
            fields.setdefault(alias, name)
        fields.setdefault(f"STRATA_{name.upper()}", name)
    return fields


def setting_variables() -> frozenset[str]:
    """Every environment variable a setting is read from."""
    return frozenset(setting_variable_fields())


def unknown_variables(names: Iterable[str]) -> dict[str, str | None]:
    """The `STRATA_` names among `names` that no setting reads (a typo, or a setting that
    was renamed), each with the closest setting's variable when one is close: such a
    variable is otherwise ignored without a word, and its value silently not applied."""
    known = setting_variables()
    unknown: dict[str, str | None] = {}
    for name in sorted(set(names)):
        upper = name.upper()
        if not upper.startswith("STRATA_") or upper in known or upper in CLIENT_VARIABLES:
            continue
        if upper.startswith(_CLIENT_PREFIXES):
            continue
        close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.75)
        unknown[name] = close[0] if close else None
    return unknown


def configured_variables(environ: Mapping[str, str], env_file: Path | None) -> set[str]:
    """The variable names set in the environment and in the `.env` file a `Settings`
    reads."""
    names = set(environ)
    if env_file is not None and env_file.is_file():
        from dotenv import dotenv_values

        names.update(dotenv_values(env_file))
    return names


@lru_cache
def get_settings() -> Settings:
    return Settings()
