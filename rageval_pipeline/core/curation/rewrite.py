"""Rewriting a suite file: an edit of its queries, checked as a whole suite, then written
atomically (what merging a sheet, converting to spans and storing measured difficulty do)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.bounds import read_text
from rageval_pipeline.core.storage.files import write_text
from rageval_pipeline.core.suites.golden import Suite, load_suite


def _json_indent(text: str) -> str | None:
    """The indentation unit of a JSON file (the first indented line's), None when compact."""
    found = re.search(r"\n([ \t]+)\S", text)
    return found[1] if found else None


def rewrite_suite(
    suite_file: Path,
    edit: Callable[[dict[str, dict[str, Any]]], None],
    refuse: Callable[[Suite], list[str]] | None = None,
    version: str | None = None,
) -> list[str]:
    """Apply `edit` to the suite file's queries (raw, by id) and write `version` (when given)
    as its format version, check that the result is a valid suite, and replace the file
    atomically; the problems `refuse` finds in the edited suite instead, with nothing written.
    JSON keeps its key order and indentation; YAML is re-dumped (comments are lost)."""
    try:  # (read as every user file is: a regular file within its limit)
        text = read_text(suite_file)
    except ValueError as exc:
        raise InputError(suite_file, str(exc)) from None
    raw = json.loads(text) if suite_file.suffix == ".json" else yaml.safe_load(text)
    edit({q["id"]: q for q in raw.get("queries") or []})
    if version is not None:
        raw["version"] = version
    if suite_file.suffix == ".json":
        out = json.dumps(raw, indent=_json_indent(text), ensure_ascii=False)
        out += "\n" if text.endswith("\n") else ""
    else:
        out = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100)
    try:  # both write beside the suite file: an unwritable folder fails the first
        merged = _check_merged(suite_file, out)
        if refuse is not None and (problems := refuse(merged)):
            return problems
        write_text(suite_file, out)
    except OSError as error:
        problem = f"cannot write it ({error.strerror or error}): make it and its folder writable"
        raise InputError(suite_file, problem) from None
    return []


def _check_merged(suite_file: Path, text: str) -> Suite:
    """Validate the edited text as a suite beside the original (content paths resolve alike)."""
    fd, tmp = tempfile.mkstemp(prefix=".merge-", suffix=suite_file.suffix, dir=suite_file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        return load_suite(tmp)
    except InputError as error:
        problem = f"the edited suite would not validate: {error.problem}"
        raise InputError(suite_file, problem, field=error.field) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
