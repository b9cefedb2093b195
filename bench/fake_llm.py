"""The tests' fake Messages API in a process of its own, answering every request alike.

    python -m bench.fake_llm --delay 0.2     # prints its base URL, serves until killed

Benchmarks run it apart from what they measure, so its work never shares a GIL with
Strata's: the SDK talks to it over loopback exactly as it would to the real API.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

from tests.fakes.messages_api import FakeMessagesAPI, reply, tool_use


def serve(delay: float, text: str, tool: str | None) -> None:
    fake = FakeMessagesAPI(validate_requests=False)
    if tool is None:
        fake.always(lambda body: reply(text, delay=delay, chunk_text=False))
    else:  # the agent keeps calling `tool`: one turn makes as many requests as it may
        fake.always(lambda body: reply(text, tool_use(tool, {}), delay=delay, chunk_text=False))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with fake:
        print(fake.url, flush=True)
        while not stop.wait(0.5):
            with fake._lock:  # nobody reads the records; don't let them grow without end
                fake._requests.clear()


@contextlib.contextmanager
def running(delay: float = 0.0, text: str = "ok", tool: str | None = None) -> Iterator[str]:
    """Start the fake in a child process; yields its base URL for `ANTHROPIC_BASE_URL`."""
    command = [sys.executable, "-m", "bench.fake_llm", "--delay", str(delay), "--text", text]
    command += ["--tool", tool] if tool else []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the fake Messages API did not start")
        yield url
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
