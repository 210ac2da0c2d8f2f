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

The folder is read by `core.io.walk`: nothing from outside it (a symlink out is refused
unless links are followed on the user's word), no special file opened, files, bytes, HTML size
and PDF pages capped (docs/limits.md); HTML is converted in one walk of its tree.

The reference chunking is chosen by format: `markdown_headers` when any document is Markdown,
HTML or PDF (a section is what an assessor judges), `paragraph` when all are plain text. The
converted texts are stored under `documents/` beside `suite.json` and the suite starts with no
queries: write them, then `rageval pool` (docs/own-suite.md).
"""

from __future__ import annotations

import datetime
import io
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from rageval_pipeline.core.errors import InputError, printable
from rageval_pipeline.core.io.beir import BEIR_MD5
from rageval_pipeline.core.io.bounds import file_limits
from rageval_pipeline.core.io.walk import Deadline, Found, Progress, Walked, walk
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
LONG_VALIDATION = 16 << 20  # characters of text whose validation takes seconds
MAX_NAME = 64  # characters of a suite name: a folder, a partition key, a report title


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
    """(title, Markdown text) of an HTML page, in time linear in the page: one walk of the
    tree, a block's text taken once and its inside not walked again (60,000 nested `<div>`
    convert in about a second)."""
    from bs4 import BeautifulSoup, Tag

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_SKIPPED_TAGS):
        tag.decompose()
    blocks = []
    stack = [soup.body or soup]
    while stack:
        tag = stack.pop()
        if tag.name not in _BLOCKS:
            stack.extend(reversed([c for c in tag.children if isinstance(c, Tag)]))
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


def pdf_to_markdown(path: Path, data: bytes, deadline: Deadline | None = None) -> tuple[str, str]:
    """(title, Markdown text with one `## Page n` section per page) of a PDF's bytes; at
    most RAGEVAL_MAX_PDF_PAGES pages, counted before any is read; `deadline` checked before
    each page."""
    from pypdf import PdfReader

    limits = file_limits()
    try:
        reader = PdfReader(io.BytesIO(data))
        # The count the file declares first: listing the pages reads every page object
        # (100,000 pages: 13 s, 470 MB); then the pages listed, as a count can lie.
        for count in (
            lambda: int(reader.trailer["/Root"]["/Pages"]["/Count"]),
            reader.pages.__len__,
        ):
            if (listed := count()) > limits.pdf_pages:
                problem = f"has {listed} pages, over the limit of {limits.pdf_pages}"
                raise InputError(path, problem + limits.hint("pdf_pages"))
        pages = []
        for page in reader.pages:
            if deadline is not None:
                deadline.check(path)
            pages.append((page.extract_text() or "").strip())
        title = str((reader.metadata or {}).get("/Title") or "")
    except InputError:
        raise
    except Exception as error:
        # pypdf raises many kinds on a broken file, its own limits included
        # (LimitReachedError: a stream inflating past its cap).
        detail = " ".join(str(error).split())[:200] or type(error).__name__
        raise InputError(path, f"not a readable PDF ({detail})") from None
    text = "\n\n".join(f"## Page {n}\n\n{page}" for n, page in enumerate(pages, 1) if page)
    return title, text + "\n" if text else ""


def _markdown_title(text: str) -> str:
    """The first `# ` header outside code fences, else the first header of any level there
    ("" when there is none: the file name is the title). A `# comment` in a fenced shell or
    Python block is code, not a heading."""
    headers = markdown_headers_of(text)
    first = next((h for h in headers if h.startswith("# ")), headers[0] if headers else "")
    return first.lstrip("#").strip()


def read_source(walked: Walked, found: Found, deadline: Deadline | None = None) -> Source:
    path = found.path
    kind = KINDS[path.suffix.lower()]
    limits = file_limits()
    if kind == "html" and found.size > limits.html_bytes:
        problem = f"is {found.size} bytes, over the limit of {limits.html_bytes} for HTML"
        raise InputError(path, problem + limits.hint("html_bytes"))
    data = walked.read(found)
    if kind == "pdf":
        title, text = pdf_to_markdown(path, data, deadline)
    else:
        try:
            raw = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text") from None
        title, text = html_to_markdown(raw) if kind == "html" else ("", raw)
        title = title or (_markdown_title(text) if kind == "markdown" else "")
    relative = Path(found.relative)
    return Source(doc_id(relative), found.relative, kind, title or path.stem, text)


def scan(
    folder: Path, *, follow_links: bool = False, log: Callable[[str], None] | None = None
) -> tuple[list[Source], list[str]]:
    """The documents of a folder (by relative path) and what was left out, with why (file
    names escaped, `errors.printable`). The folder is walked by `io.walk`: confined to it,
    bounded, special files refused; `log` gets a progress line every few seconds."""
    deadline = Deadline()
    walked = walk(folder, KINDS, follow_links=follow_links, log=log)
    skipped = [f"left out {printable(r)}: not Markdown, text, HTML or PDF" for r in walked.other]
    skipped += walked.notes
    sources, first = [], {}
    progress = Progress(log)
    for n, found in enumerate(walked.wanted, 1):
        deadline.check(found.path)
        source = read_source(walked, found, deadline)
        progress(lambda n=n: f"read {n} of {len(walked.wanted)} document(s)")
        if not source.text.strip():
            skipped.append(f"left out {printable(found.relative)}: no text")
            continue
        if source.doc_id in first:
            problem = (
                f"has the id '{printable(source.doc_id)}' of {printable(first[source.doc_id])}: "
                "rename one"
            )
            raise InputError(found.path, problem)
        first[source.doc_id] = found.relative
        sources.append(source)
    if not sources:
        raise InputError(folder, "holds no Markdown, text, HTML or PDF file with text")
    return sources, skipped


def reference_chunking(sources: list[Source]) -> dict[str, str]:
    """Sections for Markdown, HTML and PDF; paragraphs when every document is plain text."""
    plain = all(s.kind == "plain" for s in sources)
    return {"strategy": "paragraph" if plain else "markdown_headers"}


def check_name(name: str) -> None:
    """A suite name is its folder and its Dagster partition: a short name of safe characters
    that is not a BEIR dataset's (the partitions would clash)."""
    if not _NAME.match(name):
        raise InputError("--name", f"{printable(name)!r}: use letters, digits, '.', '_' and '-'")
    if len(name) > MAX_NAME:
        raise InputError("--name", f"is {len(name)} characters long, over {MAX_NAME}")
    if name.lower() in BEIR_MD5:
        raise InputError("--name", f"{name!r} is a BEIR dataset's name: choose another")


def init_suite(
    docs: Path,
    suites_dir: Path,
    name: str,
    description: str = "",
    *,
    follow_links: bool = False,
    log: Callable[[str], None] | None = None,
) -> tuple[Path, list[Source], list[str]]:
    """Write the suite `name` under `suites_dir` from the documents in `docs` (`scan`): (its
    suite file, its documents, the files left out). The folder is written beside and moved
    into place once the suite validates, so a refused folder leaves nothing behind; a
    problem the validation finds names the document's file in `docs`, not the copy."""
    check_name(name)
    target = suites_dir / name
    if target.exists() or target.is_symlink():
        raise InputError(target, "exists already: choose another --name or remove it")
    sources, skipped = scan(docs, follow_links=follow_links, log=log)
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
        progress = Progress(log)
        for n, s in enumerate(sources, 1):
            path = staged / s.stored
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(s.text, encoding="utf-8")
            progress(lambda n=n: f"wrote {n} of {len(sources)} document(s)")
        text = json.dumps(suite, indent=2, ensure_ascii=False) + "\n"
        (staged / "suite.json").write_text(text, encoding="utf-8")
        size = sum(len(s.text) for s in sources)
        if size >= LONG_VALIDATION:  # one call, about 0.1 s a MB: said before it starts
            progress.say(f"validating the suite ({size:,} characters) as `rageval validate` does")
        try:
            load_suite(staged)  # what `rageval validate` reads
        except InputError as error:
            raise _in_docs(error, docs, staged, sources) from None
        staged.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target / "suite.json", sources, skipped


def _in_docs(error: InputError, docs: Path, staged: Path, sources: list[Source]) -> InputError:
    """A validation error of the staged suite, told of the file in `docs` it comes from: the
    document its field (`documents[3]`) or its path (`documents/x.md`) names, else `docs`."""
    found = re.match(r"documents\[(\d+)\]", error.field or "")
    source = sources[int(found[1])] if found and int(found[1]) < len(sources) else None
    stored = {str(staged / s.stored): s for s in sources}
    source = source or stored.get(error.path or "")
    if source is None:
        return InputError(docs, f"the suite made from it does not validate: {error.problem}")
    return InputError(docs / source.relative, error.problem)
