"""Fuzzing `rageval suite init`'s walker (core/io/walk.py, core/suites/sources.py) as
test_fuzz_readers.py does the readers: whatever a docs folder holds (names with control
characters and whitespace, links in and out of it, broken links, FIFOs, sizes around the
limits), `init_suite` writes a suite or raises one InputError that is one printable line and
writes nothing; nothing from outside the folder is read unless links are followed; a FIFO is
never waited on. RAGEVAL_FUZZ_EXAMPLES sets the number of examples (default 100)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.suites.sources import init_suite

EXAMPLES = int(os.environ.get("RAGEVAL_FUZZ_EXAMPLES") or 100)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SECRET = "outside-secret-text"
# Files three times as often as each other kind, so that many folders make a suite.
KINDS = ("file",) * 3 + ("folder", "link_in", "link_out", "link_out_folder", "broken_in")
KINDS += ("broken_out", "fifo")
NAME = st.text(
    st.characters(exclude_characters="/\0", exclude_categories=("Cs",))
    | st.sampled_from(
        ["\n", "\t", " ", "\x1b", "\u202e", "\\", "-", "\udcff"]
    ),  # (a byte not UTF-8)
    min_size=1,
    max_size=8,
).filter(lambda n: n not in (".", ".."))
ENTRY = st.tuples(
    NAME,
    st.sampled_from(["", ".md", ".txt", ".html", ".bin", ".MD"]),
    st.sampled_from(KINDS),
    st.integers(0, 300),
    st.booleans(),  # inside a subfolder
)


def _build(docs: Path, outside: Path, entries) -> tuple[bool, bool]:
    """Make the entries; whether one (not hidden) is a link out of `docs`, and a FIFO."""
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "base.md").write_text("# Base\n\nSome text to index.\n")
    out = fifo = False
    for name, suffix, kind, size, nested in entries:
        path = (docs / "sub" if nested else docs) / (name + suffix)
        if os.path.lexists(path):
            continue
        text = ("word " * size)[:size] or " "
        if kind == "file":
            path.write_text(text, encoding="utf-8")
        elif kind == "folder":
            path.mkdir()
            (path / "inner.md").write_text(text, encoding="utf-8")
        elif kind == "link_in":
            path.symlink_to(docs / "sub" / "base.md")
        elif kind == "broken_in":
            path.symlink_to(docs / "missing.md")
        elif kind == "fifo":
            os.mkfifo(path)
            fifo = fifo or not name.startswith(".")
        else:  # links out of the folder: to a file, a folder, or nothing there
            out = out or not name.startswith(".")
            target = {
                "link_out": outside / "secret.md",
                "link_out_folder": outside,
                "broken_out": outside / "gone.md",
            }[kind]
            path.symlink_to(target)
    return out, fifo


def _blocked(*_):
    raise AssertionError("the walk waited on a FIFO")


@FUZZ
@given(
    entries=st.lists(ENTRY, max_size=8),
    follow=st.booleans(),
    files=st.integers(1, 12),
    folder_bytes=st.integers(30, 3000),
)
def test_suite_init_writes_a_suite_or_one_line_and_reads_nothing_outside(
    entries, follow, files, folder_bytes
):
    work = Path(tempfile.mkdtemp(prefix="fuzz-init-"))
    try:
        docs, outside, data = work / "docs", work / "outside", work / "data"
        outside.mkdir()
        (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
        linked_out, fifo = _build(docs, outside, entries)
        os.environ["RAGEVAL_MAX_FOLDER_FILES"] = str(files)
        os.environ["RAGEVAL_MAX_FOLDER_BYTES"] = str(folder_bytes)
        signal.signal(signal.SIGALRM, _blocked)
        signal.alarm(30)
        try:
            path, sources, skipped = init_suite(docs, data / "suites", "fuzz", follow_links=follow)
        except InputError as error:
            line = str(error)
            event(f"refused: {' '.join(error.problem.split()[:4])}")
            assert not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in line), line
            assert not (data / "suites" / "fuzz").exists()  # nothing written
            leftovers = list((data / "suites").iterdir()) if (data / "suites").exists() else []
            assert leftovers == []  # no staging folder left either
            return
        finally:
            signal.alarm(0)
        stored = "".join(s.text for s in sources)
        event("written" + (" after following links" if follow and linked_out else ""))
        assert not fifo  # refused, never read
        if not follow:
            assert not linked_out  # refused
            assert SECRET not in stored
        for note in skipped:
            assert not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in note), note
        assert path.is_file()
        for source in sources:
            real = (docs / source.relative).resolve()
            assert follow or real.is_relative_to(docs.resolve())
        assert len(sources) <= files
    finally:
        for variable in ("RAGEVAL_MAX_FOLDER_FILES", "RAGEVAL_MAX_FOLDER_BYTES"):
            os.environ.pop(variable, None)
        shutil.rmtree(work, ignore_errors=True)
