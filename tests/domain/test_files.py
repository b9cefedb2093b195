"""What a file is, told from its bytes (`app.domain.files`)."""

from __future__ import annotations

import pytest

from app.domain.files import Limits, Unprocessable, UnsupportedType, image_tokens, inspect
from tests.fakes import media

LIMITS = Limits(max_pixels=8000, max_pages=100)


def test_the_magic_bytes_decide_an_images_type_whatever_was_declared() -> None:
    found = inspect(media.jpeg(30, 40), "image/png", "x.png", LIMITS)

    assert (found.media_type, found.width, found.height) == ("image/jpeg", 30, 40)


def test_a_file_named_markdown_without_a_declared_type_is_markdown() -> None:
    assert inspect(b"# hi", None, "notes.md", LIMITS).media_type == "text/markdown"


def test_undeclared_bytes_of_no_known_type_are_unsupported() -> None:
    with pytest.raises(UnsupportedType):
        inspect(b"hello", "application/octet-stream", "x.bin", LIMITS)


def test_a_truncated_png_header_is_unprocessable() -> None:
    with pytest.raises(Unprocessable):
        inspect(media.png()[:12], "image/png", None, LIMITS)


def test_an_images_tokens_are_counted_after_scaling_to_its_long_edge() -> None:
    assert image_tokens(1568, 1568) == image_tokens(8000, 8000) == 3279
    assert image_tokens(750, 1) == 1
