"""`rageval suite init` titles a Markdown page by its first heading outside code fences: a
`# comment` in a fenced Python or shell block is code (it titled 5 of 23 pages of a real docs
folder, and BM25 prepends the title to every chunk)."""

from __future__ import annotations

from rageval_pipeline.cli import main
from rageval_pipeline.core.suites.golden import load_suite

PAGES = {
    # A fenced comment before the page's own heading.
    "advanced/timeouts.md": "Intro.\n\n```python\n# Using the top-level API:\nx = 1\n```\n\n"
    "# Timeouts\n\nSet a timeout.\n",
    # A `# ` heading wins over an earlier `## ` one.
    "guide/setup.md": "## Before you start\n\ntext\n\n# Setup\n\nSteps.\n",
    # No `# ` heading outside fences: the first heading of any level.
    "guide/faq.md": "```sh\n# install it\npip install x\n```\n\n### Questions\n\nAsk.\n",
    # No heading outside fences at all: the file name.
    "notes/raw.md": "```\n# only code\n```\n\nSome text.\n",
    # A fence opened with indentation still hides its comment.
    "api/client.md": "  ```\n# not a title\n  ```\n# Client\n\nUse it.\n",
}


def test_titles_are_the_first_heading_outside_code_fences_then_the_file_name(tmp_path, capsys):
    docs, data = tmp_path / "docs", tmp_path / "data"
    for name, text in PAGES.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    assert main(["suite", "init", str(docs), "--name", "titled", "--data", str(data)]) == 0
    # the next step it names is in the CLI's one grammar (docs/cli.md), not an old spelling
    step = f"then `rageval pool export {data / 'suites' / 'titled'} -o sheet.csv`"
    assert step in capsys.readouterr().out
    titles = {d.id: d.title for d in load_suite(data / "suites" / "titled").documents}
    assert titles == {
        "advanced/timeouts": "Timeouts",
        "api/client": "Client",
        "guide/faq": "Questions",
        "guide/setup": "Setup",
        "notes/raw": "raw",
    }
