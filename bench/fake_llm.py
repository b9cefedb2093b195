"""The tests' fake Messages API in a process of its own, answering every request alike.

    python -m bench.fake_llm --delay 0.2     # prints its base URL, serves until killed

Benchmarks run it apart from what they measure, so its work never shares a GIL with
Strata's: the SDK talks to it over loopback exactly as it would to the real API. Its
sockets send without delay (TCP_NODELAY, see `FakeMessagesAPI.start`): with Nagle on,
every answer on a reused connection would arrive ~40 ms late, in every figure.

The parent reads the fake's view of the conversation over the child's stdin/stdout:
a line `take` is answered by one JSON line, the (request arrived, answer written)
moments of the requests answered since the last `take` (`FakeLLM.take_exchanges`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
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


def answer(body: dict[str, Any], text: str, tool: str | None, delay: float) -> Step:
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


def serve(delay: float, text: str, tool: str | None) -> None:
    fake = FakeMessagesAPI(validate_requests=False)
    seen = Requests()

    def answered(body: dict[str, Any]) -> Step:
        seen.saw(body)
        return answer(body, text, tool, delay)

    fake.always(answered)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def commands() -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "take":
                print(json.dumps(fake.take_exchanges()), flush=True)
            elif command == "typical":
                print(json.dumps(seen.take_typical()), flush=True)
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
