"""The tests' fake Messages API in a process of its own, answering every request by one rule.

    python -m bench.fake_llm --delay 0.2     # prints its base URL, serves until killed

Benchmarks run it apart from what they measure, so its work never shares a GIL with
Strata's: the SDK talks to it over loopback exactly as it would to the real API. Its
sockets send without delay (TCP_NODELAY, see `FakeMessagesAPI.start`): with Nagle on,
every answer on a reused connection would arrive ~40 ms late, in every figure.

The parent reads the fake's view of the conversation over the child's stdin/stdout:
a line `take` is answered by one JSON line, the (request arrived, answer written)
moments of the requests answered since the last `take` (`FakeLLM.take_exchanges`);
`keyed` answers the same moments by conversation, and the first request of each
(`FakeLLM.take_conversations`).

A conversation names itself and what it wants in its first user message (`marker`):
`[conv NAME loop N]` is answered with a tool call for its first N - 1 requests and a
text on the N-th (a tool loop of N requests); `[conv NAME calls K TOOL]` with K parallel
calls of TOOL on its first request, then a text. Several conversations may run at once:
their moments are kept apart by the name, so each has its own step gaps.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, tool_use

ONE_REQUEST = "Just answer."
"""A user message with this text is answered without a tool call, even when the fake
calls a tool otherwise: a one-request turn beside the many-request ones."""


def _last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if not messages:
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


_MARKER = re.compile(r"\[conv (\S+) (loop (\d+)|calls (\d+) (\S+))\]")


@dataclass(frozen=True)
class Script:
    """What a conversation's marker asks for (see the module's docstring)."""

    name: str
    loop: int = 0  # requests of the tool loop (0: not a loop)
    calls: int = 0  # parallel tool calls on the first request
    tool: str = ""


def marker(name: str, *, loop: int = 0, calls: int = 0, tool: str = "") -> str:
    """The text a conversation's first user message carries to be scripted so."""
    return f"[conv {name} loop {loop}]" if loop else f"[conv {name} calls {calls} {tool}]"


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return " ".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))
    return ""


def script_of(body: dict[str, Any]) -> Script | None:
    found = _MARKER.search(_first_user_text(body))
    if found is None:
        return None
    if found[3]:
        return Script(found[1], loop=int(found[3]))
    return Script(found[1], calls=int(found[4]), tool=found[5])


def tool_steps(body: dict[str, Any]) -> int:
    """The assistant messages of the conversation that called a tool: the steps so far."""
    return sum(
        1
        for m in body.get("messages") or []
        if m.get("role") == "assistant"
        and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in m["content"])
    )


def scripted(script: Script, body: dict[str, Any], text: str, tool: str | None) -> Step:
    steps = tool_steps(body)
    if script.loop:
        if steps < script.loop - 1 and tool is not None:
            return reply(text, tool_use(tool, {}), chunk_text=False)
        return reply(text, chunk_text=False)
    if steps == 0:
        return reply(
            text, *(tool_use(script.tool, {}) for _ in range(script.calls)), chunk_text=False
        )
    return reply(text, chunk_text=False)


def answer(body: dict[str, Any], text: str, tool: str | None, delay: float) -> Step:
    script = script_of(body)
    if script is not None:  # scripted conversations are answered at once
        return scripted(script, body, text, tool)
    if tool is None or ONE_REQUEST in _last_user_text(body):
        return reply(text, delay=delay, chunk_text=False)
    # the agent keeps calling `tool`: one turn makes as many requests as it may
    return reply(text, tool_use(tool, {}), delay=delay, chunk_text=False)


class Requests:
    """The requests answered since the last look, by their number of messages: the last
    body of each length, and how many came of each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: dict[int, dict[str, Any]] = {}
        self._counts: Counter[int] = Counter()

    def saw(self, body: dict[str, Any]) -> None:
        length = len(body.get("messages") or [])
        with self._lock:
            self._bodies[length] = body
            self._counts[length] += 1

    def take_typical(self) -> dict[str, Any] | None:
        """A body of the median length of those seen, which are then forgotten (the
        next look covers what came after)."""
        with self._lock:
            lengths = sorted(self._counts.elements())
            body = self._bodies[lengths[len(lengths) // 2]] if lengths else None
            self._bodies, self._counts = {}, Counter()
        return body


_conversation: contextvars.ContextVar[str] = contextvars.ContextVar("conversation", default="")
"""The conversation of the request being answered: set when its step is chosen, in the
request's task, whose context the streamed answer's body runs in."""


class KeyedFake(FakeMessagesAPI):
    """The fake, also keeping each answered request's moments under its conversation's
    name, and the first request of each conversation."""

    def __init__(self) -> None:
        super().__init__(validate_requests=False)
        self._keyed: dict[str, list[tuple[float, float]]] = {}
        self._first: dict[str, dict[str, Any]] = {}

    def chose(self, body: dict[str, Any]) -> None:
        script = script_of(body)
        if script is None:
            return
        _conversation.set(script.name)
        with self._lock:
            self._first.setdefault(script.name, body)

    def _answered(self, arrived: float) -> None:
        super()._answered(arrived)
        name = _conversation.get()
        if name:
            with self._lock:
                self._keyed.setdefault(name, []).append((arrived, time.perf_counter()))

    def take_keyed(self) -> dict[str, Any]:
        with self._lock:
            keyed, self._keyed = self._keyed, {}
            first, self._first = self._first, {}
        return {"exchanges": keyed, "first": first}

    def answering(self, text: str, tool: str | None, delay: float, seen: Requests) -> None:
        """Answer every request as `answer` does, noting it in `seen` and by conversation."""

        def answered(body: dict[str, Any]) -> Step:
            seen.saw(body)
            self.chose(body)
            return answer(body, text, tool, delay)

        self.always(answered)


def serve(delay: float, text: str, tool: str | None) -> None:
    fake = KeyedFake()
    seen = Requests()
    fake.answering(text, tool, delay, seen)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def commands() -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "take":
                print(json.dumps(fake.take_exchanges()), flush=True)
            elif command == "typical":
                print(json.dumps(seen.take_typical()), flush=True)
            elif command == "keyed":
                print(json.dumps(fake.take_keyed()), flush=True)
        stop.set()  # the parent is gone

    with fake:
        print(fake.url, flush=True)
        threading.Thread(target=commands, daemon=True).start()
        while not stop.wait(0.5):
            with fake._lock:  # nobody reads the records; don't let them grow without end
                fake._requests.clear()


class FakeLLM:
    """The running child: its base URL, and its view of the requests it answered."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self._proc = proc
        self.url = url

    def take_exchanges(self) -> list[tuple[float, float]]:
        """(arrived, written) of the requests answered since the last call, in the
        child's `perf_counter` seconds (only differences between them mean anything)."""
        return [(a, w) for a, w in json.loads(self._ask("take"))]

    def take_conversations(
        self,
    ) -> tuple[dict[str, list[tuple[float, float]]], dict[str, dict[str, Any]]]:
        """Of the scripted conversations answered since the last call: each one's
        (arrived, written) moments, and its first request's body (see the docstring)."""
        taken = json.loads(self._ask("keyed"))
        exchanges = {k: [(a, w) for a, w in v] for k, v in taken["exchanges"].items()}
        return exchanges, taken["first"]

    def take_typical_request(self) -> dict[str, Any] | None:
        """The body of a request of median length (in messages) among those answered
        since the last call (taken: the next call covers what came after); None when none
        was."""
        found: dict[str, Any] | None = json.loads(self._ask("typical"))
        return found

    def _ask(self, command: str) -> str:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        return self._proc.stdout.readline()


@contextlib.contextmanager
def running(delay: float = 0.0, text: str = "ok", tool: str | None = None) -> Iterator[FakeLLM]:
    """Start the fake in a child process; yields it (`.url` for `ANTHROPIC_BASE_URL`)."""
    command = [sys.executable, "-m", "bench.fake_llm", "--delay", str(delay), "--text", text]
    command += ["--tool", tool] if tool else []
    # as a context, the process's pipes are closed once it ended
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            if not url.startswith("http"):
                raise RuntimeError("the fake Messages API did not start")
            yield FakeLLM(proc, url)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a fake Messages API for benchmarks")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--text", default="ok", help="the answer's text")
    parser.add_argument("--tool", help="also call this tool (with no input) in every answer")
    args = parser.parse_args()
    serve(args.delay, args.text, args.tool)
