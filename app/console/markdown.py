"""Agent text as the console shows it: Markdown rendered, then sanitised.

What the model writes is untrusted: a transcript or a tool's output can put anything in
its answer. The text is rendered with raw HTML disabled (markdown-it-py's CommonMark, plus
tables and strikethrough), code fences are highlighted on the server (Pygments, as class
names the console's own stylesheet colours: no script and nothing from elsewhere, so the
Content-Security-Policy is unchanged; for the same reason a table's column alignment,
an inline style, is dropped), and the result goes through nh3 (the Rust `ammonia`
sanitiser) with an allow-list of tags, attributes and URL schemes. Links leave with
`rel="noopener noreferrer nofollow"`; images are not loaded (shown as their links), so a
page never fetches what an answer names.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererProtocol
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "span", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "span": {"class"},
    "code": {"class"},
    "pre": {"class"},
    "ol": {"start"},
}
SCHEMES = frozenset({"http", "https", "mailto"})


_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-")


def _highlight(code: str, language: str, _attrs: str) -> str:
    """A fence's code as Pygments spans, when its language is known; else plain (the
    renderer escapes it)."""
    if not language:
        return ""
    try:
        lexer = get_lexer_by_name(language.split()[0])
    except ClassNotFound:
        return ""
    return str(highlight(code, lexer, _FORMATTER))


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt(
        "commonmark", {"html": False, "linkify": False, "highlight": _highlight}
    ).enable(["table", "strikethrough"])
    # an image becomes a link to it: the page loads nothing an answer names
    parser.add_render_rule("image", _image_as_link)
    return parser


def _image_as_link(
    self: RendererProtocol, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = token.content or src
    return f'<a href="{escape(src)}">{escape(alt)}</a>'


def render_markdown(text: str) -> Markup:
    """`text` as safe HTML for a page."""
    html = _parser().render(text)
    return Markup(
        nh3.clean(
            html,
            tags=set(TAGS),
            attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
            url_schemes=set(SCHEMES),
            link_rel="noopener noreferrer nofollow",
        )
    )
