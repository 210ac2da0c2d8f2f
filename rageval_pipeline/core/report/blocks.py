"""The report as a list of blocks, and its two renderings: Markdown and self-contained HTML.

Markdown and HTML render the same blocks, so the two never disagree. Every text is data here:
HTML escapes it, Markdown keeps it literal (no tags, no line breaks, no stray table pipes).
Status labels are text (CSS badges in HTML), never emoji, so the page needs no emoji font;
figures are inline SVG, so it needs no network.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote as quote_url

Tone = Literal["pass", "fail", "warn", "better"]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    tone: Tone | None = None


@dataclass(frozen=True)
class Para:
    text: str
    code: bool = False  # a command to copy: monospace


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    tones: list[Tone | None] = field(default_factory=list)  # per row; empty: none
    link: int | None = None  # a column whose cells are relative links (their own text)

    def compact(self) -> Table:
        """Without the columns (after the first) that are empty or "–" in every row."""
        keep = [0] + [
            i
            for i in range(1, len(self.header))
            if any(row[i] not in ("", "–") for row in self.rows)
        ]
        return Table(
            tuple(self.header[i] for i in keep),
            [tuple(row[i] for i in keep) for row in self.rows],
            self.tones,
            keep.index(self.link) if self.link in keep else None,
        )


@dataclass(frozen=True)
class Figure:
    name: str
    title: str


@dataclass(frozen=True)
class Section:
    """Blocks under an anchor (`<section id=...>`): the parts a reader or a test looks for."""

    anchor: str
    blocks: list[Block]


@dataclass(frozen=True)
class Details:
    """Blocks folded under a one-line summary (`<details>`): there when wanted, not in the way."""

    summary: str
    blocks: list[Block]


Block = Heading | Para | Bullets | Table | Figure | Section | Details


# ------------------------------------------------------------------------------------- Markdown


def md_text(text: str, *, cell: bool = False) -> str:
    """Keep text literal in Markdown: no raw HTML tags, no line breaks, no stray table pipes,
    no code span, emphasis, link or (at the start) heading, quote or list that corpus text
    could open."""
    text = re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text.replace("\\", "\\\\"))
    # A link needs "](" or "][" (or "[...]:" starting a line, a definition): escaping those
    # leaves brackets people write, "[95% CI]", readable.
    text = re.sub(r"[`*~]|\](?=[(\[])|(?<!\w)_|_(?!\w)", lambda m: "\\" + m[0], text)
    text = " ".join(text.splitlines())
    if cell:  # block syntax does not start inside a table cell
        return text.replace("|", "\\|")
    text = re.sub(r"^\[(?=[^\]]*\]:)", r"\\[", text)  # a link reference definition
    return re.sub(r"^(\d*)([#>+=.)-])", r"\1\\\2", text)


def _md(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {md_text(block.text)}"
    if isinstance(block, Para):
        return f"`{block.text}`" if block.code and "`" not in block.text else md_text(block.text)
    if isinstance(block, Bullets):
        return "\n".join(f"- {md_text(item)}" for item in block.items)
    if isinstance(block, Figure):
        return f"![{md_text(block.title)}](plots/{block.name}.svg)"
    if isinstance(block, Section):
        return "\n\n".join(_md(b) for b in block.blocks)
    if isinstance(block, Details):
        inner = "\n\n".join(_md(b) for b in block.blocks)
        return f"<details><summary>{html.escape(block.summary)}</summary>\n\n{inner}\n\n</details>"
    head = [block.header, tuple("---" for _ in block.header)]
    lines = [tuple(md_text(c, cell=True) for c in line) for line in head]
    for row in block.rows:
        cells = [md_text(c, cell=True) for c in row]
        if block.link is not None:
            cells[block.link] = f"[{cells[block.link]}]({quote_url(row[block.link])})"
        lines.append(tuple(cells))
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def to_markdown(blocks: list[Block]) -> str:
    return "\n\n".join(_md(b) for b in blocks) + "\n"


# ----------------------------------------------------------------------------------------- HTML

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0.8rem 1.5rem; color: #1f2328; }
h1 { padding: 0.3rem 0.8rem; border-radius: 6px; color: #fff; font-size: 1.4rem; margin: 0; }
h2 { font-size: 1.1rem; margin: 0.8rem 0 0.3rem; } h3 { font-size: 1rem; margin: 0.6rem 0 0.2rem; }
p { margin: 0.3rem 0; } ul { margin: 0.3rem 0; padding-left: 1.4rem; }
h1.pass { background: #1a7f37; } h1.fail { background: #cf222e; }
h1.warn { background: #9a6700; } h1.better { background: #1a7f37; }
h2.fail, h3.fail { color: #cf222e; } h2.warn, h3.warn { color: #9a6700; }
h2.pass, h3.pass, h2.better, h3.better { color: #1a7f37; }
table { border-collapse: collapse; margin: 0.3rem 0 0.6rem; }
th, td { border: 1px solid #d0d7de; padding: 0.15rem 0.5rem; text-align: left; }
th { background: #f6f8fa; }
tr.fail td { background: #ffebe9; } tr.warn td { background: #fff8c5; }
tr.better td { background: #dafbe1; }
code { background: #f6f8fa; padding: 0.1rem 0.3rem; border-radius: 4px; }
details { margin: 0.4rem 0; } summary { cursor: pointer; font-weight: 600; }
figure { margin: 0.5rem 0 1rem; width: 100%; }
figure svg { width: 100%; height: auto; }
figcaption { color: #57606a; font-size: 0.9rem; }
"""
# No request may leave the page: the browser refuses any that is not inline.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _attr(tone: Tone | None) -> str:
    return f' class="{tone}"' if tone else ""


def _html(block: Block, svgs: dict[str, str]) -> str:
    if isinstance(block, Figure):
        return (
            f'<figure data-plot="{html.escape(block.name)}">{svgs[block.name]}'
            f"<figcaption>{html.escape(block.title)}</figcaption></figure>"
        )
    if isinstance(block, Heading):
        tag = f"h{block.level}"
        return f"<{tag}{_attr(block.tone)}>{html.escape(block.text)}</{tag}>"
    if isinstance(block, Para):
        text = html.escape(block.text)
        return f"<p><code>{text}</code></p>" if block.code else f"<p>{text}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Section):
        inner = "\n".join(_html(b, svgs) for b in block.blocks)
        return f'<section id="{html.escape(block.anchor)}">\n{inner}\n</section>'
    if isinstance(block, Details):
        inner = "\n".join(_html(b, svgs) for b in block.blocks)
        return f"<details><summary>{html.escape(block.summary)}</summary>\n{inner}\n</details>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in block.header)
    tones = block.tones or [None] * len(block.rows)
    body = "".join(
        f"<tr{_attr(tone)}>"
        + "".join(
            f'<td><a href="{html.escape(quote_url(c))}">{html.escape(c)}</a></td>'
            if i == block.link
            else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row, tone in zip(block.rows, tones, strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(title: str, blocks: list[Block], svgs: dict[str, str]) -> str:
    """A self-contained HTML page: inline CSS and SVG, no scripts or external assets (the CSP
    forbids them), all text escaped. `svgs` maps each figure's name to its SVG."""
    body = "\n".join(_html(b, svgs) for b in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
