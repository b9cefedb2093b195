"""The pages of an MCP answer: never past the cap, nothing lost, a last line saying how
to read on."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.api.mcp import paged

CAP = 2_000


def _pages(lines: list[str]) -> list[str]:
    first = paged(lines, cap=CAP, page=1, again="call it again with")
    count = int(first.splitlines()[-1].split(" of ")[1].split(";")[0].split(":")[0])
    return [paged(lines, cap=CAP, page=n, again="call it again with") for n in range(1, count + 1)]


@given(st.lists(st.text(alphabet="ab c", max_size=5_000), max_size=30))
def test_every_page_is_within_the_cap_and_together_they_hold_every_line(lines: list[str]) -> None:
    pages = _pages(lines)

    assert all(len(page) <= CAP for page in pages)
    bodies = ["\n".join(page.splitlines()[:-1]) for page in pages]
    assert "".join(b.replace("\n", "") for b in bodies) == "".join(lines)


def test_a_page_before_the_last_says_which_page_comes_next() -> None:
    pages = _pages(["x" * 1_500, "y" * 1_500])

    assert [page.splitlines()[-1] for page in pages] == [
        "(page 1 of 2; call it again with page=2 to read on)",
        "(page 2 of 2: the end)",
    ]


def test_a_page_past_the_last_says_so() -> None:
    assert paged(["one line"], cap=CAP, page=3, again="x") == "(page 3 is past the last page, 1)"
