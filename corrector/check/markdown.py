"""Markdown through a real parser (markdown-it-py, CommonMark with tables and strikethrough,
front matter by mdit-py-plugins): only the text of paragraphs, headings and table cells is prose.

Fenced and indented code, HTML blocks and inline HTML, front matter, inline code, link and image
addresses and autolinks never reach the corrector. markdown-it gives block tokens their lines but
inline tokens no columns, so positions are found in two steps:

1. each line of an inline token's `content` (the block's source with its line prefixes — `> `,
   list markers, indentation, `#` — taken off) is found in its source line: an offset per
   character of `content`;
2. the inline children are walked in order along `content`, as the inline parser consumed it:
   a text character is matched at the cursor after markup characters (`*`, `[`, spaces ...),
   an escaping backslash or an entity; code spans, inline HTML, images and link destinations are
   skipped whole when their token comes.

A character that cannot be matched so gets no anchor and is never reported, and a CJK character is
only ever matched to the same character with no other CJK character skipped on the way: a
mismatch can cost a finding, never misplace one.

`<!-- corrector: ignore -->` on its own line skips the block after it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..text.tokenization import is_cjk
from .documents import PLACEHOLDER, Segment, SegmentBuilder, TextLocator, lines_of

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

IGNORE = re.compile(r"<!--\s*corrector:\s*ignore\s*-->\s*$")
MARKUP = frozenset(" \t\n*_~`[]!<>#|\\=+-")  # consumed by the inline parser without leaving text
ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
RESYNC = 8  # how far past a mismatch a non-CJK character is looked for


def parser() -> MarkdownIt:
    """The Markdown parser: CommonMark, GFM tables and strikethrough, YAML front matter."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.front_matter import front_matter_plugin

    return MarkdownIt("commonmark").use(front_matter_plugin).enable(["table", "strikethrough"])


def markdown_segments(text: str) -> Iterator[Segment]:
    """One segment per paragraph, heading and table cell (their inline tokens)."""
    locator = TextLocator(text)
    lines = lines_of(text)
    cursors: dict[int, int] = {}  # per source line: where the last content found there ended
    skip_until = -1  # with `corrector: ignore`: the line where the ignored block ends
    tokens = parser().parse(text)
    for index, token in enumerate(tokens):
        if token.type == "html_block" and IGNORE.match(token.content.strip()):
            skip_until = _next_block_end(tokens, index)
            continue
        if token.type != "inline" or token.map is None or token.map[0] < skip_until:
            continue
        offsets = _content_offsets(token.content, token.map[0], lines, cursors)
        builder = SegmentBuilder()
        InlineWalk(token.content, offsets, builder).walk(token.children or [])
        if (segment := builder.build(locator)) is not None:
            yield segment


def _next_block_end(tokens: Sequence, index: int) -> int:
    """The line where the block after tokens[index] ends (the block `corrector: ignore` skips)."""
    for token in tokens[index + 1:]:
        if token.map is not None and token.nesting >= 0:
            return token.map[1]
    return -1


def _content_offsets(content: str, first_line: int, lines: list[tuple[int, str]],
                     cursors: dict[int, int]) -> list[int]:
    """The source offset of each character of an inline token's content (-1 where its line is
    not found in the source line: never reported). Content lines are their source lines less a
    prefix, and table cells sit side by side: each is looked for after the last one found on its
    line."""
    offsets: list[int] = []
    for k, part in enumerate(content.split("\n")):
        if k:
            offsets.append(-1)  # the "\n" between content lines
        number = first_line + k
        if number >= len(lines):
            offsets.extend([-1] * len(part))
            continue
        start, source = lines[number]
        column = source.find(part, cursors.get(number, 0)) if part else -1
        if column < 0:
            offsets.extend([-1] * len(part))
            continue
        cursors[number] = column + len(part)
        offsets.extend(range(start + column, start + column + len(part)))
    return offsets


class InlineWalk:
    """Walks an inline token's children along its content (see the module docstring)."""

    def __init__(self, src: str, offsets: list[int], builder: SegmentBuilder) -> None:
        self.src, self.offsets, self.builder = src, offsets, builder
        self.pos = 0
        self.in_autolink = False

    def walk(self, children: list) -> None:
        for child in children:
            kind = child.type
            if self.in_autolink:
                if kind == "link_close":
                    self.in_autolink = False
                continue
            if kind == "text":
                for char in child.content:
                    self.builder.add_char(char, self.match(char))
            elif kind == "softbreak":
                self._soft_break()
            elif kind == "hardbreak":
                self.builder.placeholder("\n")
            elif kind == "code_inline":
                self._skip_code(child.markup)
                self.builder.placeholder(child.content if child.content.isascii() else PLACEHOLDER)
            elif kind == "html_inline":
                self._skip_literal(child.content)
            elif kind == "image":
                self._skip_image()
            elif kind == "link_open" and child.markup in ("autolink", "linkify"):
                self._skip_autolink()
                self.in_autolink = True
            elif kind == "link_close":
                self._skip_destination()

    def _soft_break(self) -> None:
        """A line break inside a paragraph: nothing between Chinese text (as a renderer joins
        it), a space elsewhere."""
        if not is_cjk(self.builder.last_char()):
            self.builder.placeholder(" ")

    def match(self, char: str) -> int:
        """The source offset of `char`, the next text character, or -1."""
        src, p = self.src, self.pos
        while p < len(src):
            found = src[p]
            if found == "&" and (entity := ENTITY.match(src, p)) and html.unescape(entity.group()) == char:
                self.pos = entity.end()
                return -1  # written as an entity: not a character that can be replaced in place
            if found == char:
                self.pos = p + 1
                return self.offsets[p]
            if found == "\\" and p + 1 < len(src) and src[p + 1] == char:
                self.pos = p + 2
                return self.offsets[p + 1]
            if found not in MARKUP:
                break
            p += 1
        return self._resync(char)

    def _resync(self, char: str) -> int:
        """After a mismatch: `char` a little further on, with no CJK character passed over."""
        for p in range(self.pos, min(len(self.src), self.pos + RESYNC)):
            if self.src[p] == char:
                self.pos = p + 1
                return self.offsets[p]
            if is_cjk(self.src[p]):
                break
        return -1

    def _skip_code(self, fence: str) -> None:
        """Past a code span: its opening backticks and the first closing run of the same length."""
        run = re.compile(rf"(?<!`){re.escape(fence)}(?!`)")
        if (opening := run.search(self.src, self.pos)) and (closing := run.search(self.src, opening.end())):
            self.pos = closing.end()

    def _skip_literal(self, literal: str) -> None:
        if (at := self.src.find(literal, self.pos)) >= 0:
            self.pos = at + len(literal)

    def _skip_autolink(self) -> None:
        """Past `<scheme:...>`: the address is not prose."""
        at = self.src.find("<", self.pos)
        end = self.src.find(">", at + 1) if at >= 0 else -1
        if end >= 0:
            self.pos = end + 1

    def _skip_image(self) -> None:
        """Past `![alt](destination)` or `![alt][label]`: its alt text is not checked."""
        at = self.src.find("![", self.pos)
        if at >= 0:
            close = _matching(self.src, at + 1, "[", "]")
            if close >= 0:
                self.pos = close + 1
                self._skip_target()

    def _skip_destination(self) -> None:
        """At a link's end: past `]` and its `(destination "title")` or `[label]`."""
        p = self.pos
        while p < len(self.src) and self.src[p] != "]" and self.src[p] in MARKUP:
            p += 1
        if p < len(self.src) and self.src[p] == "]":
            self.pos = p + 1
            self._skip_target()

    def _skip_target(self) -> None:
        if self.src.startswith("(", self.pos):
            end = _matching(self.src, self.pos, "(", ")")
        elif self.src.startswith("[", self.pos):
            end = self.src.find("]", self.pos)
        else:
            return
        if end >= 0:
            self.pos = end + 1


def _matching(src: str, at: int, opening: str, closing: str) -> int:
    """The index of the bracket closing the one at `at` (nesting and backslash escapes counted),
    or -1."""
    depth, p = 0, at
    while p < len(src):
        char = src[p]
        if char == "\\":
            p += 2
            continue
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return p
        p += 1
    return -1
