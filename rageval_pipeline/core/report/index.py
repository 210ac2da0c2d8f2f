"""`reports/index.html` and `index.md`: each dataset's latest verdict, linking to its report.

The gate writes `reports/<dataset>/latest/gate.json` per dataset; the index lists them all, so
a run of one dataset never hides another's verdict.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rageval_pipeline.core.gate import Verdict
from rageval_pipeline.core.report import blocks
from rageval_pipeline.core.report.blocks import Heading, Para, Table, Tone
from rageval_pipeline.core.report.model import iso_date
from rageval_pipeline.core.report.states import headline
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.storage.location import as_location

LATEST = "latest"


def _row(folder: Path) -> tuple[tuple[str, ...], Tone]:
    """Dataset | Verdict | Categories | Evaluated | Report of one dataset's latest report."""
    link = f"{folder.name}/{LATEST}/gate.html"
    try:
        verdict = Verdict.model_validate_json((folder / LATEST / "gate.json").read_bytes())
    except (OSError, ValidationError) as exc:
        problem = type(exc).__name__ if isinstance(exc, OSError) else "not a verdict"
        return (folder.name, f"unreadable gate.json ({problem})", "–", "–", link), "warn"
    state, tone = headline(verdict)
    return (
        folder.name,
        state.removeprefix("Retrieval gate: "),
        ", ".join(verdict.categories) or "–",
        iso_date(verdict.created_at) or "–",
        link,
    ), tone


def index_blocks(reports_dir: Path) -> tuple[str, list[blocks.Block]]:
    """(title, blocks) of the index page."""
    folders = sorted(p for p in as_location(reports_dir).iterdir() if (p / LATEST).is_dir())
    rows = [_row(folder) for folder in folders]
    failing = sum(tone == "fail" for _, tone in rows)
    tone: Tone = "fail" if failing else "pass"
    title = f"Retrieval gate: {failing} of {len(rows)} dataset(s) failing"
    out: list[blocks.Block] = [Heading(1, title, tone)]
    if not rows:
        return title, [*out, Para("No dataset has a report yet.")]
    header = ("Dataset", "Latest verdict", "Categories", "Evaluated", "Report")
    return title, [*out, Table(header, [r for r, _ in rows], [t for _, t in rows], link=4)]


def write_index(reports_dir: Path) -> dict[str, Path]:
    """Write `index.html` and `index.md` into `reports_dir` from every
    `<dataset>/latest/gate.json` there; returns "html"/"markdown" -> path. The report links are
    relative, so the folder can be moved or served as it is."""
    reports_dir = as_location(reports_dir)
    title, listed = index_blocks(reports_dir)
    page = blocks.to_html(title, listed, {})
    paths = {"html": reports_dir / "index.html", "markdown": reports_dir / "index.md"}
    write_text(paths["html"], page)
    write_text(paths["markdown"], blocks.to_markdown(listed))
    return paths
