"""How stored content leaves the server over HTTP: always as a download, never as a page.

A workspace file is written by a client or by an agent, so its bytes are untrusted: an
`evil.html` or an `x.svg` opened on the server's origin would run its scripts with that
origin's cookies and API. Every route that serves such a file answers with the `Download` of
`download_policy`:

- `Content-Disposition: attachment` (the browser saves it instead of showing it);
- `Content-Type: application/octet-stream`, except for raster images a browser only ever
  shows as pictures (PNG, JPEG, GIF, WebP; not SVG, which is a document with scripts);
- `X-Content-Type-Options: nosniff`, so the type is not guessed from the bytes;
- `Content-Security-Policy: sandbox`, so a page opened anyway runs on no origin, without
  scripts, forms or the server's cookies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import quote

OCTET_STREAM = "application/octet-stream"
# raster images only: a browser renders them as pictures and nothing else
SAFE_IMAGE_TYPES: dict[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


@dataclass(frozen=True)
class Download:
    """The media type and headers a stored file is served with."""

    media_type: str
    headers: dict[str, str]


def media_type_of(name: str) -> str:
    return SAFE_IMAGE_TYPES.get(PurePosixPath(name).suffix.lower(), OCTET_STREAM)


def download_policy(path: str) -> Download:
    """For the file at `path` (its last segment names the download)."""
    name = PurePosixPath(path).name or "download"
    return Download(
        media_type=media_type_of(name),
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox",
        },
    )


def stored_file_download(filename: str, media_type: str) -> Download:
    """A stored file (`POST /files`) by its checked type: a raster image shown inline, a
    PDF or text file saved as an attachment; `nosniff` and the sandbox always."""
    disposition = "inline" if media_type in SAFE_IMAGE_TYPES.values() else "attachment"
    if media_type.startswith("text/"):
        media_type = f"{media_type}; charset=utf-8"
    return Download(
        media_type=media_type,
        headers={
            "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(filename, safe='')}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox",
        },
    )
