"""The text of a rendered page's elements, without a browser: for tests that check a figure
in the element it belongs to, not just somewhere in the page."""

from __future__ import annotations

import base64
import lzma
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import orjson

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """Text content, whitespace collapsed (as a reader sees it, roughly)."""
        parts = [c if isinstance(c, str) else c.text for c in self.children]
        return " ".join(" ".join(parts).split())

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        out = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and (
                    cls is None or cls in c.attrs.get("class", "").split()
                ):
                    out.append(c)
                out += c.find_all(tag, cls)
        return out

    def by_id(self, ident: str) -> Node:
        found = [n for n in self.find_all() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id {ident!r}"
        return found[0]

    def rows(self) -> list[list[str]]:
        """A table's rows as lists of cell texts."""
        return [[c.text for c in tr.children if isinstance(c, Node)] for tr in self.find_all("tr")]

    def row(self, first_cell: str) -> list[str]:
        """The one row of a table whose first cell reads `first_cell`."""
        (found,) = [r for r in self.rows() if r and r[0] == first_cell]
        return found


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: str) -> Node:
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.root


def listing_block(page: str) -> str:
    """The packed text of the page's #kora-data block."""
    block = re.search(r'<script type="application/x-xz" id="kora-data">(.*?)</script>', page, re.S)
    assert block is not None
    return block.group(1)


def listing(page: str) -> Any:
    """The list's data the page packs in #kora-data."""
    return unpack(listing_block(page))


def texts(page: str) -> dict[str, Any]:
    """The texts of every .kora-text block, put together as one document."""
    out: dict[str, Any] = {"m": [], "r": [], "scenarios": {}}
    for block in re.findall(
        r'<script type="application/x-xz" class="kora-text">(.*?)</script>', page
    ):
        chunk = unpack(block)
        assert chunk["from"] == len(out["m"])  # in the list's order, none missing
        out["m"] += chunk["m"]
        out["r"] += chunk["r"]
        assert not set(chunk["scenarios"]) & set(out["scenarios"])  # each scenario once
        out["scenarios"] |= chunk["scenarios"]
    return out


def unpack(text: str) -> Any:
    """What kora.analysis.pagekit.pack was given (the page opens it with koraUnpack)."""
    return orjson.loads(lzma.decompress(base64.b64decode(text), lzma.FORMAT_XZ))
