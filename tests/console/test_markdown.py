"""Agent text in the console: Markdown rendered, and nothing in it can run or load."""

from __future__ import annotations

import re

from app.console.markdown import render_markdown


def test_emphasis_lists_and_inline_code_render_as_html() -> None:
    html = render_markdown("**bold**, *it* and `code`\n\n- one\n- two")

    assert "<strong>bold</strong>" in html
    assert "<em>it</em>" in html
    assert "<code>code</code>" in html
    assert "<li>one</li>" in html


def test_a_fenced_block_of_a_known_language_is_highlighted_with_class_names_only() -> None:
    html = render_markdown('```python\nprint("<hi>")\n```')

    assert '<span class="hl-nb">print</span>' in html
    assert "&lt;hi&gt;" in html
    assert "style=" not in html


def test_raw_html_in_an_answer_is_shown_as_text() -> None:
    html = render_markdown('<script>alert(1)</script>\n\n<img src=x onerror="alert(1)">')

    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;" in html


def test_a_javascript_link_is_not_a_link() -> None:
    html = render_markdown("[click](javascript:alert(1)) [data](data:text/html,hi)")

    assert "href" not in html


def test_links_leave_without_the_pages_opener_or_referrer() -> None:
    html = render_markdown("[docs](https://example.com/a?b=1&c=2)")

    assert 'href="https://example.com/a?b=1&amp;c=2"' in html
    assert 'rel="noopener noreferrer nofollow"' in html


def test_an_image_is_a_link_to_it_never_loaded() -> None:
    html = render_markdown('![a" onerror="x](https://example.com/i.png)')

    assert "<img" not in html
    assert re.findall(r"<a ([^>]*)>", html) == [
        'href="https://example.com/i.png" rel="noopener noreferrer nofollow"'
    ]


def test_a_table_renders_without_inline_styles_the_pages_policy_would_block() -> None:
    html = render_markdown("| a | b |\n|:--|--:|\n| 1 | 2 |")

    assert "<table>" in html
    assert "<td>1</td>" in html
    assert "style" not in html
