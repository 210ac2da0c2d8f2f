"""Fuzzing the one loader through its three users: whatever the bytes, a suite, systems file or
gate policy either loads or raises InputError with one line, never another exception.

RAGEVAL_FUZZ_EXAMPLES sets the examples per test (CI: the default; a longer run, e.g.
RAGEVAL_FUZZ_EXAMPLES=100000, by hand).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.gate import load_policy
from rageval_pipeline.core.suites.golden import load_suite
from rageval_pipeline.core.systems import load_systems

TINY = Path(__file__).parent / "fixtures" / "suites" / "tiny"
REPO_DATA = Path(__file__).parent.parent / "data"
EXAMPLES = int(os.environ.get("RAGEVAL_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A copy of the tiny suite folder (documents included) to write mutated files into."""
    target = tmp_path_factory.mktemp("fuzz") / "tiny"
    shutil.copytree(TINY, target)
    return target


def loads_or_input_error(load, path: Path) -> None:
    try:
        load(path)
    except InputError as error:
        assert "\n" not in str(error)


def mutate(text: str, data: st.DataObject) -> str:
    """One structured edit of a valid file: cut, insert, repeat a line or swap a value."""
    kind = data.draw(st.sampled_from(["cut", "insert", "repeat", "value"]))
    at = data.draw(st.integers(0, len(text)))
    if kind == "cut":
        return text[:at] + text[at + data.draw(st.integers(1, 40)) :]
    if kind == "insert":
        noise = data.draw(
            st.text(alphabet=st.sampled_from('{}[]:,"&*!<>-#\n \t\\a1.e'), max_size=12)
        )
        return text[:at] + noise + text[at:]
    lines = text.splitlines(keepends=True)
    index = data.draw(st.integers(0, len(lines) - 1))
    if kind == "repeat":
        return "".join(lines[: index + 1] + lines[index:])
    value = json.dumps(
        data.draw(
            st.recursive(
                st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3)
                ),
                max_leaves=6,
            )
        )
    )
    head, sep, _ = lines[index].partition(": ")
    return "".join([*lines[:index], head + sep + value + ",\n", *lines[index + 1 :]])


@FUZZ
@given(raw=st.binary(max_size=400), suffix=st.sampled_from(["json", "yaml"]))
def test_arbitrary_bytes_as_a_suite(folder, raw, suffix):
    path = folder / f"case.{suffix}"
    path.write_bytes(raw)
    loads_or_input_error(load_suite, path)


@FUZZ
@given(data=st.data(), suffix=st.sampled_from(["json", "yaml"]))
def test_mutated_suite(folder, data, suffix):
    original = json.loads((TINY / "suite.json").read_text())
    text = json.dumps(original, indent=2) if suffix == "json" else yaml.safe_dump(original)
    path = folder / f"case.{suffix}"
    path.write_text(mutate(text, data), encoding="utf-8")
    loads_or_input_error(load_suite, path)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["systems.yaml", "gate.yaml"]))
def test_mutated_systems_and_gate_files(tmp_path, data, name):
    path = tmp_path / name
    path.write_text(mutate((REPO_DATA / name).read_text(), data), encoding="utf-8")
    loads_or_input_error(load_systems if name == "systems.yaml" else load_policy, path)
