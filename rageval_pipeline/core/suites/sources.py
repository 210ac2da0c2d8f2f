"""A new golden suite from a folder of documents (`rageval suite init DOCS --name NAME`).

Every Markdown (`.md`, `.markdown`), plain text (`.txt`), HTML (`.html`, `.htm`) and PDF
(`.pdf`) file under the folder becomes one document; other files are listed and left out.

- Ids come from the path relative to the folder, without its extension (`guide/install.md` is
  `guide/install`, whitespace turned into `-`), so they stay stable when the folder is
  initialised again or files are added; two files that would share an id are refused.
- HTML is read with Beautiful Soup (`beautifulsoup4`, Python's own `html.parser`, no native
  code) and written as Markdown: `<h1>`..`<h6>` become `#`..`######` headers, paragraphs, list
  items, table rows and `<pre>` blocks become blocks of text; scripts, styles, navigation,
  headers and footers are dropped. The title is `<title>`, else the first `<h1>`.
- PDF is read with pypdf (pure Python, maintained by the py-pdf organisation): each page's text
  becomes a `## Page n` section, so a page is a reference chunk.
- Markdown keeps its text; its title is its first `# ` header outside code fences, else its
  first header of any level there, else the file name.

The reference chunking is chosen by format: `markdown_headers` when any document is Markdown,
HTML or PDF (a section is what an assessor judges), `paragraph` when all are plain text. The
converted texts are stored under `documents/` beside `suite.json` and the suite starts with no
queries: write them, then `rageval pool` (docs/own-suite.md).
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.chunking import markdown_headers_of
from rageval_pipeline.core.suites.golden import FORMAT_VERSION, load_suite

KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "plain",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_SKIPPED_TAGS = ("script", "style", "nav", "header", "footer", "noscript", "svg", "form")
_BLOCKS = ("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "tr", "dt", "dd", "blockquote")
_SPACE = re.compile(r"\s+")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class Source(NamedTuple):
    """One document as the suite stores it."""

    doc_id: str
    relative: str  # its path in the docs folder
    kind: str  # markdown, plain, html or pdf (what the file was)
    title: str
    text: str

    @property
    def format(self) -> str:
        return "plain" if self.kind == "plain" else "markdown"

    @property
    def stored(self) -> str:
        """Its file under the suite folder."""
        return f"documents/{self.doc_id}{'.txt' if self.kind == 'plain' else '.md'}"


def doc_id(relative: Path) -> str:
    """A document's id: its relative path without the extension, whitespace as `-`."""
    return _SPACE.sub("-", relative.with_suffix("").as_posix())


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, Markdown text) of an HTML page."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_SKIPPED_TAGS):
        tag.decompose()
    body = soup.body or soup
    blocks = []
    for tag in body.find_all(_BLOCKS):
        if tag.find_parent(_BLOCKS):  # its text is in the enclosing block already
            continue
        if tag.name == "pre":
            blocks.append("```\n" + tag.get_text().strip("\n") + "\n```")
            continue
        text = _SPACE.sub(" ", tag.get_text(" ", strip=True)).strip()
        if not text:
            continue
        if tag.name[0] == "h" and tag.name[1:].isdigit():
            title = title or text if tag.name == "h1" else title
            text = f"{'#' * int(tag.name[1:])} {text}"
        elif tag.name == "li":
            text = f"- {text}"
        blocks.append(text)
    return title, "\n\n".join(blocks) + "\n"


def pdf_to_markdown(path: Path) -> tuple[str, str]:
    """(title, Markdown text with one `## Page n` section per page) of a PDF."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = str((reader.metadata or {}).get("/Title") or "")
    except (PdfReadError, OSError, ValueError) as error:
        raise InputError(path, f"not a readable PDF ({error})") from None
    text = "\n\n".join(f"## Page {n}\n\n{page}" for n, page in enumerate(pages, 1) if page)
    return title, text + "\n" if text else ""


def _markdown_title(text: str) -> str:
    """The first `# ` header outside code fences, else the first header of any level there
    ("" when there is none: the file name is the title). A `# comment` in a fenced shell or
    Python block is code, not a heading."""
    headers = markdown_headers_of(text)
    first = next((h for h in headers if h.startswith("# ")), headers[0] if headers else "")
    return first.lstrip("#").strip()


def read_source(folder: Path, path: Path) -> Source:
    relative = path.relative_to(folder)
    kind = KINDS[path.suffix.lower()]
    if kind == "pdf":
        title, text = pdf_to_markdown(path)
    else:
        try:
            raw = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text") from None
        title, text = html_to_markdown(raw) if kind == "html" else ("", raw)
        title = title or (_markdown_title(text) if kind == "markdown" else "")
    return Source(doc_id(relative), relative.as_posix(), kind, title or path.stem, text)


def scan(folder: Path) -> tuple[list[Source], list[str]]:
    """The documents of a folder (by relative path) and the files left out, with why."""
    if not folder.is_dir():
        raise InputError(folder, "no such folder")
    sources, skipped, first = [], [], {}
    for path in sorted(_files(folder)):
        relative = path.relative_to(folder).as_posix()
        if path.suffix.lower() not in KINDS:
            skipped.append(f"{relative}: not Markdown, text, HTML or PDF")
            continue
        source = read_source(folder, path)
        if not source.text.strip():
            skipped.append(f"{relative}: no text")
            continue
        if source.doc_id in first:
            problem = f"has the id {source.doc_id!r} of {first[source.doc_id]}: rename one"
            raise InputError(path, problem)
        first[source.doc_id] = relative
        sources.append(source)
    if not sources:
        raise InputError(folder, "holds no Markdown, text, HTML or PDF file with text")
    return sources, skipped


def _files(folder: Path) -> Iterator[Path]:
    for path in folder.rglob("*"):
        if path.is_file() and not any(p.startswith(".") for p in path.relative_to(folder).parts):
            yield path


def reference_chunking(sources: list[Source]) -> dict[str, str]:
    """Sections for Markdown, HTML and PDF; paragraphs when every document is plain text."""
    plain = all(s.kind == "plain" for s in sources)
    return {"strategy": "paragraph" if plain else "markdown_headers"}


def init_suite(
    docs: Path, suites_dir: Path, name: str, description: str = ""
) -> tuple[Path, list[Source], list[str]]:
    """Write the suite `name` under `suites_dir` from the documents in `docs`: (its suite
    file, its documents, the files left out). The folder is written beside and moved into
    place once the suite validates, so a refused folder leaves nothing behind."""
    if not _NAME.match(name):
        raise InputError("--name", f"{name!r}: use letters, digits, '.', '_' and '-'")
    target = suites_dir / name
    if target.exists():
        raise InputError(target, "exists already: choose another --name or remove it")
    sources, skipped = scan(docs)
    suite = {
        "version": FORMAT_VERSION,
        "name": name,
        "description": description or f"{name}: {len(sources)} documents from {docs.name}/",
        "created_at": datetime.date.today().isoformat(),
        "chunking": reference_chunking(sources),
        "documents": [
            {
                "id": s.doc_id,
                "type": "knowledge_artifact",
                "format": s.format,
                "title": s.title,
                "content_path": s.stored,
                "metadata": {"source": s.relative},
            }
            for s in sources
        ],
        "queries": [],
    }
    suites_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=suites_dir))
    try:
        staged = work / name
        for s in sources:
            path = staged / s.stored
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(s.text, encoding="utf-8")
        text = json.dumps(suite, indent=2, ensure_ascii=False) + "\n"
        (staged / "suite.json").write_text(text, encoding="utf-8")
        load_suite(staged)  # what `rageval validate` reads
        staged.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target / "suite.json", sources, skipped
