"""The HTML report in headless Chromium: every plot is drawn, no request leaves the page, and
the first screen (1400x900) holds the verdict, what the suite can tell, the configuration diff and
the moved measures.

The page is served from a loopback server that logs every request, and Chromium uses the same
server as its proxy, so a request to any other origin is logged too; the page itself must be
the only one. The DOM Chromium builds (`--dump-dom`) must hold one drawn SVG per figure, and the
screenshot must not be blank. Skipped when Debian's `chromium` is not installed.
`REPORT_SCREENSHOT=path` keeps the first screen's screenshot there for a person to look at.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rageval_pipeline.core.report import draw, write_reports
from tests.cdp import chromium_page
from tests.test_report_model import context  # noqa: F401  (fixture)
from tests.test_report_summary import changed  # noqa: F401  (fixture)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed"),
]


class _Figures(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.figures: list[str] = []
        self.drawn: dict[str, int] = {}  # figure -> path elements inside it
        self._open: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure":
            self._open = attrs.get("data-plot")
            self.figures.append(self._open)
            self.drawn[self._open] = 0
        elif tag == "path" and self._open:
            self.drawn[self._open] += 1

    def handle_endtag(self, tag):
        if tag == "figure":
            self._open = None


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            # Chromium's own background calls (network time) are not the page's requests.
            "--disable-features=NetworkTimeServiceQuerying",
            f"--user-data-dir={tmp_path / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def served(tmp_path, context):  # noqa: F811
    report, _ = context
    folder = tmp_path / "site"
    write_reports(report, folder, drawn=draw(report))
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(folder), **kw)

        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests, report, folder
    finally:
        server.shutdown()
        server.server_close()


def test_report_renders_every_plot_without_leaving_the_page(tmp_path, served):
    origin, requests, report, folder = served
    url, proxy = f"{origin}/gate.html", f"--proxy-server={origin}"
    dom = chromium(tmp_path, proxy, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Figures()
    parsed.feed(dom.stdout)
    assert sorted(parsed.figures) == sorted(f.name for f in report.figures)
    missing = [name for name, paths in parsed.drawn.items() if paths < 5]
    assert not missing, f"plots not drawn: {missing}"

    shot = tmp_path / "report.png"
    taken = chromium(tmp_path, proxy, f"--screenshot={shot}", "--window-size=1280,2400", url)
    assert taken.returncode == 0 and shot.stat().st_size > 20_000, taken.stderr[-2000:]
    shutil.copy(shot, folder / "screenshot.png")  # kept beside the report for a person to look
    # Only the page itself was fetched (plus the favicon Chromium always asks its origin for).
    assert set(requests) <= {"/gate.html", "/favicon.ico"} and "/gate.html" in requests


def test_the_request_log_sees_a_page_that_reaches_out(tmp_path, served):
    """The check above can fail: a page fetching an image from another origin is caught."""
    origin, requests, _, folder = served
    (folder / "leaky.html").write_text(
        '<!DOCTYPE html><html><body><img src="http://reports.example/x.png"></body></html>'
    )
    chromium(tmp_path, f"--proxy-server={origin}", "--dump-dom", f"{origin}/leaky.html")
    assert "http://reports.example/x.png" in requests


FIRST_SCREEN = {"width": 1400, "height": 900}
# What a reader must see without scrolling: the sections' ids (core/report/summary.py).
SUMMARY = ("verdict", "resolution", "config-diff", "moved", "next")


def test_the_first_screen_shows_verdict_config_diff_and_moved_measures(tmp_path, changed):  # noqa: F811
    folder = tmp_path / "site"
    write_reports(changed, folder, drawn=draw(changed))
    with chromium_page(tmp_path / "profile") as page:
        page.send(
            "Emulation.setDeviceMetricsOverride", **FIRST_SCREEN, deviceScaleFactor=1, mobile=False
        )
        page.goto((folder / "gate.html").as_uri())
        text = page.wait_for("Retrieval gate: FAIL", "Glossary")
        boxes = page.evaluate(
            f"""{json.dumps(SUMMARY)}.map(id => {{
              const r = document.getElementById(id).getBoundingClientRect();
              return [id, r.top, r.bottom, r.left, r.right];
            }})"""
        )
        shot = page.screenshot(tmp_path / "first-screen.png")
    if keep := os.environ.get("REPORT_SCREENSHOT"):
        shutil.copy(shot, keep)
    for name, top, bottom, left, right in boxes:
        assert 0 <= top < bottom <= FIRST_SCREEN["height"], (name, top, bottom)
        assert 0 <= left < right <= FIRST_SCREEN["width"], (name, left, right)
    first = text.split("Details", 1)[0]
    assert "k1" in first and "1.5" in first and "0.3" in first  # the configuration diff
    assert "FAIL ranking_shift" in first and "WARN recall_drop" in first and "IMPROVED" in first
    assert "rageval baseline update --dataset techdocs --system hybrid" in first
    assert shot.stat().st_size > 20_000
