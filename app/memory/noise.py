"""The noise rules shared by every memory layer (seed 003, "ノイズ除去ルール").

Memory is a subtraction from what the model would have seen anyway, so text that carries no
meaning is stored in neither L2 nor L3: terminal escape sequences, lines a progress display
redrew with `\\r`, progress bars and bare percentages, blank and whitespace-only lines, and
`<system-reminder>` blocks (harness boilerplate repeated every turn). Everything else is kept
*whole*: pasted logs, stack traces, JSON dumps and task lists are part of the conversation, and
fenced code blocks are kept line for line, blank lines included, because their layout is their
meaning.

`clean` is idempotent (`clean(clean(x)) == clean(x)`): memory is re-projected whenever a turn is
processed again, and a second pass must not change what was stored.

`Boilerplate` remembers system texts already seen so that a message repeated every turn (the same
hook output, the same reminder) is stored once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable

__all__ = [
    "Boilerplate",
    "CleanedTexts",
    "clean",
    "fingerprint",
    "is_progress_line",
    "strip_ansi",
]

# --- ANSI and other terminal control -------------------------------------------------------

_ANSI = re.compile(
    "|".join(
        (
            # OSC: window titles and OSC 8 hyperlinks, ended by BEL or ST (ESC \).
            r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?",
            # DCS, SOS, PM and APC strings, ended the same way.
            r"(?:\x1b[P^_X]|[\x90\x98\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?",
            # CSI: colours, cursor movement, erase in line/display.
            r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]",
            # Two-character and nF escapes: ESC 7, ESC =, ESC ( B, ...
            r"\x1b[ -/]*[0-~]",
            # Whatever is left: a truncated introducer, BEL, backspace, other C0/C1 controls.
            r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]",
        )
    )
)


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (CSI, OSC incl. hyperlinks, single-character escapes)
    and stray control characters, keeping tabs, newlines and carriage returns.

    The visible text of an OSC 8 hyperlink stays; only its invisible target goes. The result
    contains no ESC at all, so stripping twice changes nothing.
    """
    return _ANSI.sub("", text)


# --- progress displays ---------------------------------------------------------------------

_BLOCKS = "█▓▒░▏▎▍▌▋▊▉■□━╸╺╾╼"
_NUM = r"\d+(?:[.,]\d+)*"
_UNIT = r"(?:[kKMGTP]i?B|[kKMGTP]i?|bytes|B|it)"
_TOKENS = "|".join(
    (
        r"\[[\d:]+<[\d:?]+(?:,[^\]]*)?\]",  # tqdm's [00:01<00:02, 30.12it/s]
        rf"{_NUM}\s?{_UNIT}?\s?/\s?{_NUM}(?:\s?{_UNIT})?",  # counters: 12/40, 1.2/4.5 MB
        rf"{_NUM}\s?(?:{_UNIT}/s|s/it)",  # rates: 3.4 MB/s, 30.12it/s, 1.2s/it
        r"\d{1,3}(?:[.,]\d+)?\s?%",  # percentages
        r"(?:eta|ETA|Eta):?\s?[\d:]+s?",  # eta 0:00:03
        r"\d+:\d{2}(?::\d{2})?",  # elapsed 00:01
        rf"{_NUM}(?:\s?{_UNIT})?",  # sizes and bare numbers
        rf"\[[=#>\-.\s{_BLOCKS}]*\]",  # [=====>    ]
        rf"[{_BLOCKS}]+",  # ████░░
        r"[=#\-]*[=#>]",  # =====> (only counts next to a percentage or a real bar)
    )
)
# Atomic tokens and a possessive repetition: no backtracking blow-up on long digit runs.
_BODY = rf"(?:(?>{_TOKENS})|[\s|,()]+)++"
_PROGRESS = re.compile(_BODY)
_LABELLED = re.compile(
    rf"(?P<label>(?:.{{0,60}}?(?:\.\.\.|…|:)\s*)?(?:[^\W\d_][\w-]*(?:\.\.\.|…)?\s+)?)"
    rf"(?P<body>{_BODY})"
)
_BAR = re.compile(rf"[{_BLOCKS}]|\[[^\]]*[=#>][^\]]*\]")
_ING_WORD = re.compile(r"[^\W\d_]+ing", re.IGNORECASE)
_MAX_PROGRESS_LINE = 400


def _percent_label_ok(label: str) -> bool:
    """A bare percentage after a label is progress only when the label says so.

    "Downloading... 73%" and "Installing: 45%" are progress; "Coverage: 73%" is a fact.
    """
    label = label.strip()
    if not label or label.endswith(("...", "…")):
        return True
    return _ING_WORD.fullmatch(label.rstrip(":").rstrip()) is not None


def is_progress_line(line: str) -> bool:
    """Whether a line is nothing but a progress display.

    A progress display is made of bars (`████░░`, `[=====>    ]`), percentages, counters
    (`12/40`, `1.2/4.5 MB`), rates, elapsed times and ETAs, optionally after a short label.
    It needs a bar or a percentage: `12/40` or `=====` alone are kept, since they may be
    content (a score, a Markdown heading underline). Markdown table rows are never progress.
    """
    s = line.strip()
    if not s or len(s) > _MAX_PROGRESS_LINE or s.startswith("|"):
        return False
    if _PROGRESS.fullmatch(s):
        return "%" in s or _BAR.search(s) is not None
    match = _LABELLED.fullmatch(s)
    if match is None:
        return False
    body = match["body"]
    if _BAR.search(body):
        return True
    return "%" in body and _percent_label_ok(match["label"])


# --- cleaning ------------------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})")
_REMINDER_OPEN = re.compile(r"[ \t]*<system-reminder(?:\s[^>]*)?>")
_REMINDER_CLOSE = re.compile(r"</system-reminder\s*>")


def _redrawn(line: str) -> str:
    """The final state of a line a terminal redrew with carriage returns.

    A progress display prints `10%\\r20%\\r100%`: only the last write was ever on screen.
    Trailing carriage returns (and writes of nothing but spaces, used to blank a line) do not
    count as the final state.
    """
    if "\r" not in line:
        return line
    for segment in reversed(line.split("\r")):
        if segment.strip():
            return segment
    return ""


def _closes_fence(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(stripped) >= len(fence) and stripped.startswith(fence) and set(stripped) == {fence[0]}
    )


class _Cleaner:
    """One pass of the noise rules over the lines of a text, as a small state machine.

    States: prose (all rules apply), inside a fenced code block (kept verbatim), inside a
    `<system-reminder>` block (dropped). A reminder opens only at the start of a line and only
    when a closing tag follows: harness-injected reminders always stand on their own lines,
    while a model merely *mentioning* the tag in a sentence must keep its sentence.
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.out: list[str] = []
        self.fence: str | None = None
        self.in_reminder = False
        closers = [i for i, line in enumerate(lines) if _REMINDER_CLOSE.search(line)]
        self.last_closer = closers[-1] if closers else -1

    def run(self) -> list[str]:
        for index, raw in enumerate(self.lines):
            if self.fence is not None:
                line = raw.rstrip()
                self.out.append(line)
                if _closes_fence(line, self.fence):
                    self.fence = None
            elif self.in_reminder:
                close = _REMINDER_CLOSE.search(raw)
                if close is not None:
                    self.in_reminder = False
                    self.prose(raw[close.end() :], index)
            else:
                self.prose(raw, index)
        while self.out and not self.out[-1].strip():
            self.out.pop()
        return self.out

    def prose(self, raw: str, index: int) -> None:
        line = _redrawn(raw).rstrip()
        while True:
            opener = _REMINDER_OPEN.match(line)
            if opener is None or index > self.last_closer:
                break
            close = _REMINDER_CLOSE.search(line, opener.end())
            if close is None:
                self.in_reminder = True
                return
            line = line[close.end() :].rstrip()
        fence = _FENCE_OPEN.match(line)
        if fence is not None:
            self.fence = fence.group(1)
            self.out.append(line)
        elif line.strip() and not is_progress_line(line):
            self.out.append(line)


def _clean_once(text: str) -> str:
    lines = strip_ansi(text).replace("\r\n", "\n").split("\n")
    return "\n".join(_Cleaner(lines).run())


def clean(text: str) -> str:
    """Apply the noise rules to a text (user, assistant, tool output or system text).

    Removes ANSI escapes, collapses `\\r`-redrawn lines to their final state, drops progress
    lines, blank and whitespace-only lines and `<system-reminder>` blocks, and strips trailing
    whitespace. Inside fenced code blocks every line is kept (only escapes are removed).

    Each rule only deletes characters, and a deletion can expose a new match (two halves of a
    tag meeting); repeating the pass until nothing changes makes `clean` idempotent, and it
    ends because every pass that changes the text makes it shorter.
    """
    current = text
    while True:
        cleaned = _clean_once(current)
        if cleaned == current:
            return cleaned
        current = cleaned


class CleanedTexts:
    """`clean` of texts cleaned ahead, looked up by their text; one not cleaned ahead is
    cleaned when asked (and kept).

    A turn's memory is projected inside the write transaction that ends the turn, on
    SQLite on the process's one writer thread: its texts are cleaned before that
    transaction, by whoever ends it, so that the projection there only looks
    them up. A cleaned text is its own cleaning (`clean` is idempotent), so cleaning it
    again (a fingerprint of a cleaned system text) is a look-up too.
    """

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._cleaned: dict[str, str] = {}
        for text in texts:
            self(text)

    def __call__(self, text: str) -> str:
        found = self._cleaned.get(text)
        if found is None:
            found = self._cleaned[text] = clean(text)
            self._cleaned.setdefault(found, found)
        return found

    def __len__(self) -> int:
        return len(self._cleaned)


TextCleaner = Callable[[str], str]
"""What cleans a text: `clean`, or texts cleaned ahead (`CleanedTexts`)."""


# --- repeated boilerplate ------------------------------------------------------------------


def fingerprint(text: str, cleaner: TextCleaner | None = None) -> str:
    """A hash of a text's meaning: cleaned (by `cleaner`, `clean` when None), whitespace
    runs collapsed.

    Two renderings of the same reminder that differ only in spacing or colour codes have the
    same fingerprint, so they count as one repeated message.
    """
    cleaned = clean(text) if cleaner is None else cleaner(text)
    normal = " ".join(cleaned.split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


class Boilerplate:
    """The system texts already stored, so one repeated every turn is stored once.

    Construct it with the fingerprints already known (from earlier turns); `seen` records new
    ones. A text first recorded under an `owner` (the item's key) is not a repeat for that same
    owner, so projecting the same turn twice with one `Boilerplate` gives the same result.
    """

    def __init__(self, known: Iterable[str] = (), cleaner: TextCleaner | None = None) -> None:
        """`cleaner` cleans the texts it fingerprints (`clean` when None)."""
        self._owners: dict[str, str | None] = dict.fromkeys(known)
        self._cleaner = cleaner

    @staticmethod
    def fingerprint(text: str) -> str:
        """See the module-level `fingerprint`."""
        return fingerprint(text)

    def seen(self, text: str, *, owner: str | None = None) -> bool:
        """True when the text was seen before (a repeat to drop); otherwise record it."""
        digest = fingerprint(text, self._cleaner)
        if digest in self._owners:
            first = self._owners[digest]
            return owner is None or first != owner
        self._owners[digest] = owner
        return False

    @property
    def hashes(self) -> frozenset[str]:
        """Every fingerprint known, for the caller to persist and pass back next time."""
        return frozenset(self._owners)

    def __len__(self) -> int:
        return len(self._owners)
