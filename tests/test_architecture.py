"""The house's shape (docs/architecture.md): import-linter's contracts in pyproject.toml hold.

`acyclic_siblings` fails on any import circle inside `rageval_pipeline/` (between sibling
packages or modules at every depth); the layers contracts fail on an import from a lower layer
up. The second test shows the circle contract failing on a package that has one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = [str(Path(sys.executable).with_name("lint-imports"))]


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [*LINT, "--no-cache", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_import_contracts_hold():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout


def test_an_import_circle_breaks_the_contract(tmp_path):
    pkg = tmp_path / "house"
    (pkg / "rooms").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rooms" / "__init__.py").write_text("")
    (pkg / "rooms" / "a.py").write_text("from house.rooms import b\n")
    (pkg / "rooms" / "b.py").write_text("from house.rooms import a\n")
    (tmp_path / ".importlinter").write_text(
        textwrap.dedent(
            """\
            [importlinter]
            root_package = house

            [importlinter:contract:circles]
            name = No circles
            type = acyclic_siblings
            ancestors = house
            """
        )
    )
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert "No circles BROKEN" in done.stdout
