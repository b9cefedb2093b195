"""What a stored file is, told from its bytes: its media type, its size in pixels or pages,
and the tokens a request that carries it costs (pure; PDFs are read with `pypdf`).

The type is sniffed from the content, never taken from the client's `Content-Type` alone:
an image or a PDF is what its magic bytes say, whatever was declared; text is accepted
only when it was declared as `text/plain` or `text/markdown` (or named `.txt` / `.md`)
and is UTF-8 without NUL characters. Anything else is `UnsupportedType` (415).

The limits are the Messages API's own, so a file Strata stores is never refused when a
request carries it: an image at most `max_pixels` on either side, a PDF of at most
`max_pages` pages and not encrypted (`Unprocessable`, 422).
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from app.domain.errors import InvalidInput, UnsupportedMediaType
from app.domain.items import DocumentBlock, ImageBlock

IMAGE_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF_TYPE: Final = "application/pdf"
TEXT_TYPES: Final = ("text/plain", "text/markdown")
MEDIA_TYPES: Final = (*IMAGE_TYPES, PDF_TYPE, *TEXT_TYPES)

IMAGE_LONG_EDGE_PIXELS: Final = 1568
"""The Messages API scales an image down to at most this on its long edge before reading it."""
IMAGE_PIXELS_PER_TOKEN: Final = 750
"""An image costs about its width times its height / 750 tokens (after that scaling)."""
TEXT_CHARS_PER_TOKEN: Final = 4
TIMES: Final = "\N{MULTIPLICATION SIGN}"
_TEXT_SUFFIXES: Final = {".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown"}
# a PDF's header may follow some bytes of junk; readers look for it in the first kilobyte
_PDF_HEADER_WITHIN: Final = 1024


class UnsupportedType(UnsupportedMediaType):
    """Content of none of the types Strata stores (415)."""


class Unprocessable(InvalidInput):
    """A file of a stored type that the Messages API would refuse, or that cannot be
    read (422)."""

    slug = "file-unprocessable"
    title = "File not usable"


@dataclass(frozen=True)
class Inspection:
    """What the bytes say: the media type, and the pixels or pages where they apply."""

    media_type: str
    width: int | None = None
    height: int | None = None
    pages: int | None = None


@dataclass(frozen=True)
class Limits:
    max_pixels: int
    max_pages: int


def inspect(data: bytes, declared: str | None, filename: str | None, limits: Limits) -> Inspection:
    """The file's type and size; `UnsupportedType` or `Unprocessable` say why it is not stored."""
    image = _image_type(data)
    if image is not None:
        width, height = _image_size(image, data)
        if max(width, height) > limits.max_pixels:
            raise Unprocessable(
                f"the image is {width}{TIMES}{height} pixels; the Messages API takes at most "
                f"{limits.max_pixels} pixels on either side"
            )
        return Inspection(image, width=width, height=height)
    if b"%PDF-" in data[:_PDF_HEADER_WITHIN]:
        return Inspection(PDF_TYPE, pages=_pdf_pages(data, limits.max_pages))
    text_type = _declared_text_type(declared, filename)
    if text_type is not None:
        if b"\x00" in data:
            raise UnsupportedType(f"the content declared {text_type} holds NUL bytes")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnsupportedType(f"the content declared {text_type} is not UTF-8") from exc
        return Inspection(text_type)
    raise UnsupportedType(
        f"the content (declared {declared or 'without a type'}) is none of {', '.join(MEDIA_TYPES)}"
    )


def _declared_text_type(declared: str | None, filename: str | None) -> str | None:
    base = (declared or "").split(";", 1)[0].strip().lower()
    if base in TEXT_TYPES:
        return base
    if base in ("", "application/octet-stream") and filename:
        return _TEXT_SUFFIXES.get(PurePosixPath(filename).suffix.lower())
    return None


def image_type(data: bytes) -> str | None:
    """The image type the bytes are, by their magic bytes; None when none of IMAGE_TYPES."""
    return _image_type(data)


def _image_type(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _image_size(media_type: str, data: bytes) -> tuple[int, int]:
    """Width and height from the image's header; a header too short or inconsistent to
    say is `Unprocessable`."""
    try:
        size = _SIZE_READERS[media_type](data)
    except (struct.error, IndexError, ValueError) as exc:
        raise Unprocessable(f"the {media_type} image's header cannot be read") from exc
    if size is None or min(size) <= 0:
        raise Unprocessable(f"the {media_type} image's header cannot be read")
    return size


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _gif_size(data: bytes) -> tuple[int, int] | None:
    width, height = struct.unpack("<HH", data[6:10])
    return int(width), int(height)


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        if data[20] != 0x2F:
            return None
        b0, b1, b2, b3 = data[21:25]
        width = 1 + (b0 | (b1 & 0x3F) << 8)
        height = 1 + (b1 >> 6 | b2 << 2 | (b3 & 0x0F) << 10)
        return width, height
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    return None


# JPEG start-of-frame markers (baseline, progressive, lossless ...): not DHT, JPG or DAC
_SOF_MARKERS: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill bytes before a marker
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _SOF_MARKERS:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return int(width), int(height)
        at += 2 + length
    return None


_SIZE_READERS = {
    "image/png": _png_size,
    "image/jpeg": _jpeg_size,
    "image/gif": _gif_size,
    "image/webp": _webp_size,
}


def _pdf_pages(data: bytes, max_pages: int) -> int:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Unprocessable("the PDF is encrypted; the Messages API reads no encrypted PDF")
        pages = len(reader.pages)
    except Unprocessable:
        raise
    except Exception as exc:  # a parser of untrusted bytes fails in many ways; none is ours
        raise Unprocessable(f"the PDF cannot be read: {type(exc).__name__}") from exc
    if pages < 1:
        raise Unprocessable("the PDF has no page")
    if pages > max_pages:
        raise Unprocessable(
            f"the PDF has {pages} pages; the Messages API takes at most {max_pages}"
        )
    return pages


def image_tokens(width: int, height: int) -> int:
    """The tokens an image costs once the API scaled it to its long edge."""
    scale = min(1.0, IMAGE_LONG_EDGE_PIXELS / max(width, height))
    return max(1, math.ceil(round(width * scale) * round(height * scale) / IMAGE_PIXELS_PER_TOKEN))


def estimated_tokens(found: Inspection, size: int, pdf_page_tokens: int) -> int:
    """The tokens a request that carries the file costs, about."""
    if found.width is not None and found.height is not None:
        return image_tokens(found.width, found.height)
    if found.pages is not None:
        return found.pages * pdf_page_tokens
    return max(1, math.ceil(size / TEXT_CHARS_PER_TOKEN))


def placeholder(
    kind: str, filename: str, width: int | None, height: int | None, pages: int | None
) -> str:
    """The text that stands for a file a request does not carry: its kind, name and
    pixels or pages in brackets (`[image: plan.png 1200` TIMES `800]`)."""
    if width is not None and height is not None:
        return f"[{kind}: {filename} {width}{TIMES}{height}]"
    if pages is not None:
        return f"[{kind}: {filename} {pages} page{'s' if pages != 1 else ''}]"
    return f"[{kind}: {filename}]"


def block_placeholder(block: ImageBlock | DocumentBlock, *, why: str | None = None) -> str:
    """The text that stands for a block's file (or given content) a request does not carry."""
    ref = block.file
    kind = "image" if isinstance(block, ImageBlock) else "document"
    if ref is None:
        text = f"[{kind}]"
    else:
        text = placeholder(kind, ref.filename, ref.width, ref.height, ref.pages)
    return text if why is None else f"{text[:-1]} ({why})]"
