"""The report's figures, drawn with matplotlib (Agg) from the report model's plot data.

One format, SVG: the HTML inlines it and the Markdown links it (a PNG beside it doubled the
drawing time for no reader). Output is deterministic: `svg.hashsalt` is fixed and no creation
date is written, so the same figure renders to the same bytes, and a figure drawn before is read
back from a cache keyed by its content (`render_cached`): a figure whose numbers did not change
is never drawn again. The cache is a local folder (the gate's is under the scratch folder),
shared by every storage the machine evaluates into: a fresh storage, or one in object storage,
reads the figures another drew (importing matplotlib 0.3-0.9 s, 0.1-0.15 s a figure); the
reports stay static SVG that any viewer shows. SVG text is drawn as paths (`svg.fonttype:
path`): the page needs no font and no network. matplotlib is imported only to draw, after the
gate's verdict (`core.report.draw_figures`): on a PASS in the figures step, never by the gate
step.
"""

from __future__ import annotations

import io
import os
import time
from importlib.metadata import version
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.storage.reuse import content_key

Kind = Literal["measures", "per_query", "latency", "trend"]
_STYLE = {
    "svg.hashsalt": "rageval",
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_CURRENT, _BASELINE, _WORSE, _BETTER = "#0969da", "#8c959f", "#cf222e", "#1a7f37"


class Figure(BaseModel):
    """One plot: its file stem, title and the numbers drawn (kept in report.json too)."""

    name: str
    title: str
    kind: Kind
    data: dict


def _measures(ax, data: dict) -> None:
    names = data["measures"]
    x = range(len(names))
    width = 0.38

    def bars(offset, values, intervals, color, label):
        shown = [v if v is not None else 0.0 for v in values]
        # An interval may miss its value by rounding (or be a baseline's older one): never < 0.
        errors = [
            [max(0.0, v - ci[0]) if ci else 0 for v, ci in zip(shown, intervals, strict=True)],
            [max(0.0, ci[1] - v) if ci else 0 for v, ci in zip(shown, intervals, strict=True)],
        ]
        ax.bar(
            [i + offset for i in x], shown, width, yerr=errors, capsize=3, color=color, label=label
        )

    bars(-width / 2, data["current"], data["current_ci"], _CURRENT, "current")
    if any(v is not None for v in data["baseline"]):
        bars(width / 2, data["baseline"], data["baseline_ci"], _BASELINE, "baseline")
    ax.set_xticks(list(x), names, rotation=30, ha="right")
    ax.set_ylabel("mean (95% CI)")
    ax.legend(frameon=False)


def _per_query(ax, data: dict) -> None:
    deltas = data["delta"]
    colors = [_WORSE if d < 0 else _BETTER for d in deltas]
    ax.bar(range(len(deltas)), deltas, color=colors, width=1.0)
    ax.axhline(0, color="#57606a", linewidth=0.8)
    ax.set_xlabel(f"queries, sorted by change ({len(deltas)})")
    ax.set_ylabel(f"{data['measure']}: current - baseline")


def _latency(ax, data: dict) -> None:
    groups = data["groups"]
    x = range(len(groups))
    ax.bar(x, data["p50"], 0.6, color=_CURRENT, label="p50")
    ax.scatter(x, data["p95"], marker="_", s=300, color="#9a6700", label="p95", zorder=3)
    ax.scatter(x, data["p99"], marker="_", s=300, color=_WORSE, label="p99", zorder=3)
    ax.set_xticks(list(x), groups, rotation=30, ha="right")
    ax.set_ylabel("latency (ms)")
    ax.legend(frameon=False)


def _trend(fig, data: dict) -> None:
    from datetime import datetime, timedelta

    import matplotlib.dates as mdates

    measures = data["measures"]
    changes = [datetime.fromisoformat(t) for t in data.get("changes", [])]
    columns = max(1, min(3, len(measures)))
    axes = fig.subplots(-(-len(measures) // columns) or 1, columns, squeeze=False).ravel()
    for ax in axes[len(measures) :]:
        ax.set_visible(False)
    for ax, (measure, points) in zip(axes, measures.items(), strict=False):
        times = [datetime.fromisoformat(t) for t, _ in points]
        ax.plot(times, [v for _, v in points], marker="o", color=_CURRENT)
        for i, moment in enumerate(changes):
            label = "configuration changed" if i == 0 else None
            ax.axvline(moment, color=_BASELINE, linestyle="--", linewidth=1, label=label)
        if len(set(times)) == 1:  # one evaluation: a day around it, not a zero-width axis
            ax.set_xlim(times[0] - timedelta(hours=12), times[0] + timedelta(hours=12))
        locator = mdates.AutoDateLocator(maxticks=6)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.set_title(measure)
        ax.set_xlabel("evaluation time (UTC)")
    if changes:
        axes[0].legend(frameon=False)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _draw(figure: Figure):
    plt = _pyplot()
    with plt.rc_context(_STYLE):
        if figure.kind == "trend":
            size = (12.0, 2.4 * max(1, -(-len(figure.data["measures"]) // 3)) + 0.6)
        else:
            size = (12.0, 3.6)  # shown full width: a wide figure keeps its height modest
        fig = plt.figure(figsize=size)
        if figure.kind == "trend":
            _trend(fig, figure.data)
        else:
            ax = fig.add_subplot()
            {"measures": _measures, "per_query": _per_query, "latency": _latency}[figure.kind](
                ax, figure.data
            )
        fig.suptitle(figure.title)
        fig.tight_layout()
    return fig


def render(figure: Figure) -> str:
    """The SVG text of a figure, without the XML prolog."""
    fig, plt = _draw(figure), _pyplot()
    with plt.rc_context(_STYLE):
        svg = io.StringIO()
        fig.savefig(svg, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = svg.getvalue()
    return text[text.index("<svg") :]


def drawing_version() -> str:
    """What a figure's SVG depends on besides its numbers: this module's style and matplotlib's
    version (the figures step's code version: a new drawer shows its figures stale)."""
    return content_key(_STYLE, version("matplotlib"))[:16]


# A cached figure unread this long is dropped: the cache serves every dataset and system of a
# storage, so it keeps what any of their reports drew lately, not only the last report's.
UNUSED_DAYS = 30


def render_cached(figures: list[Figure], cache: Path) -> dict[str, str]:
    """`render` of each figure by name, drawing only those not found in `cache` (a local
    folder; keyed by the figure, this module's style and matplotlib's version); drops figures
    unused for UNUSED_DAYS."""
    out, now = {}, time.time()
    drawer = version("matplotlib") if figures else ""  # a metadata scan: once, not per figure
    for figure in figures:
        key = content_key(figure.model_dump(mode="json"), _STYLE, drawer)
        path = cache / f"{key}.svg"
        try:
            out[figure.name] = path.read_text(encoding="utf-8")
            os.utime(path)  # read lately: kept
        except FileNotFoundError:
            out[figure.name] = svg = render(figure)
            write_text(path, svg)
    for old in cache.glob("*.svg") if cache.is_dir() else ():
        try:
            if now - old.stat().st_mtime > UNUSED_DAYS * 86400:
                old.unlink()
        except FileNotFoundError:  # another gate dropped it first
            pass
    return out
