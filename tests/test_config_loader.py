"""The one loader of user files (core/io/config.py): formats, duplicate keys, limits, messages."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io.bounds import file_limits
from rageval_pipeline.core.io.config import load_model


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    tags: dict[str, int] = {}


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int
    items: list[Item] = []
    extra: object = None  # anything: the limits, not the model, must stop hostile shapes


def problem(path: Path) -> str:
    with pytest.raises(InputError) as raised:
        load_model(path, Config)
    return str(raised.value)


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


# ------------------------------------------------------------------------------ one message shape


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "a.json",
            '{\n  "version": 1,\n  "items": [\n    {"name": "x"},\n    {"name": 3}\n  ]\n}',
            "5: items[1].name: must be a valid string (got 3)",
        ),
        (
            "a.yaml",
            "version: 1\nitems:\n  - name: x\n  - name: y\n    tags: {a: 1, b: two}\n",
            '5: items[1].tags["b"]: must be a valid integer, unable to parse string as an '
            'integer (got "two")',
        ),
        (
            "b.yaml",
            "version: 1\nitems:\n  - name: x\n    colour: red\n",
            "4: items[0].colour: unknown field",
        ),
        ("c.json", '{"items": []}', "1: version: field required"),
        (
            "d.yml",
            "version: [1, 2\n",
            "2: invalid YAML (column 1): expected ',' or ']', but got '<stream end>'",
        ),
        (
            "e.json",
            '{"version": 1,}',
            "1: invalid JSON (column 15): Expecting property name enclosed in double quotes",
        ),
    ],
)
def test_every_problem_is_file_line_field_rule(tmp_path, name, text, expected):
    path = write(tmp_path, name, text)
    assert problem(path) == f"{path}:{expected}"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "a.toml",
            "version = 1",
            ': unknown file type ".toml": expected one of .json, .yaml, .yml',
        ),
        ("a", "{}", ': unknown file type "": expected one of .json, .yaml, .yml'),
        ("a.json", b'{"version": "\xff"}', ": is not UTF-8 text (byte 13)"),
        ("a.json", '{"version": NaN}', ": invalid JSON: NaN is not a JSON number"),
        ("a.json", '{"version": -Infinity}', ": invalid JSON: -Infinity is not a JSON number"),
        ("a.yaml", "", ": file is empty"),
        ("a.yaml", "# only a comment\n", ": file is empty"),
    ],
)
def test_files_that_are_not_one_known_format_are_refused(tmp_path, name, text, expected):
    path = write(tmp_path, name, text)
    assert problem(path) == f"{path}{expected}"


def test_a_long_value_is_quoted_to_200_characters(tmp_path):
    path = write(tmp_path, "a.json", json.dumps({"version": "v" * 1000}))
    message = problem(path)
    assert (
        message
        == f"{path}:1: version: must be a valid integer, unable to parse string as an integer "
        f'(got "{"v" * 196}...)'
    )
    assert len(message) < len(str(path)) + 300


# ---------------------------------------------------------------------------------- duplicate keys


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "top.json",
            '{"version": 1,\n "version": 2}',
            '2: duplicate key "version" (first on line 1)',
        ),
        (
            "nested.json",
            '{"version": 1, "items": [\n {"name": "a"},\n {"name": "b",\n  "name": "c"}]}',
            '4: items[1]: duplicate key "name" (first on line 3)',
        ),
        (
            "map.json",
            '{"version": 1, "items": [{"name": "a", "tags": {\n"x": 1,\n"y": 2,\n"x": 3}}]}',
            '4: items[0].tags: duplicate key "x" (first on line 2)',
        ),
        (
            "top.yaml",
            "version: 1\nitems: []\nversion: 2\n",
            '3: duplicate key "version" (first on line 1)',
        ),
        (
            "nested.yaml",
            "version: 1\nitems:\n  - name: a\n    tags:\n      x: 1\n      x: 2\n",
            '6: items[0].tags: duplicate key "x" (first on line 5)',
        ),
        (
            "flow.yaml",
            "version: 1\nextra: {a: 1, b: 2, a: 3}\n",
            '2: extra: duplicate key "a" (first on line 2)',
        ),
        (
            "quoted.yaml",
            "version: 1\n'version': 2\n",
            '2: duplicate key "version" (first on line 1)',
        ),
    ],
)
def test_duplicate_keys_are_refused_in_json_and_yaml(tmp_path, name, text, expected):
    path = write(tmp_path, name, text)
    assert problem(path) == f"{path}:{expected}"


# ------------------------------------------------------------------------------------------ limits

LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The classic billion laughs: 9 levels of 9 aliases, 10^9 strings once expanded.
        (
            'version: 1\nextra:\n  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", '
            '"lol"]\n' + "".join("  " + line + "\n" for line in LAUGHS.splitlines()),
            "7: extra.e[0]",
        ),
        # Aliases of mappings, merged with <<.
        (
            "version: 1\nextra:\n  a: &a {x: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}\n"
            + "".join(
                f"  {n}: &{n} {{{', '.join(f'k{i}: *{p}' for i in range(10))}}}\n"
                for p, n in zip("abcd", "bcde", strict=True)
            ),
            "6: extra.d.k5",
        ),
        # One wide list of aliases of one big node.
        (
            "version: 1\nextra:\n  big: &big [" + ", ".join(["x"] * 5000) + "]\n"
            "  many: [*big, *big, *big]\n",
            "4: extra.many[1]",
        ),
    ],
)
def test_yaml_alias_bombs_fail_fast(tmp_path, text, expected):
    path = write(tmp_path, "bomb.yaml", text)
    line, field = expected.split(": ", 1)
    assert problem(path) == (
        f"{path}:{line}: {field}: YAML aliases expand to more than 10000 nodes "
        "(RAGEVAL_MAX_YAML_ALIAS_NODES)"
    )


def test_a_recursive_alias_is_refused(tmp_path):
    path = write(tmp_path, "loop.yaml", "version: 1\nextra: &a [1, *a]\n")
    assert problem(path) == f"{path}:2: extra[1]: an alias inside its own anchor"


def test_a_few_aliases_are_fine(tmp_path):
    path = write(
        tmp_path, "ok.yaml", "version: 1\nextra:\n  a: &t {x: 1}\n  b: *t\n  c: {<<: *t, y: 2}\n"
    )
    assert load_model(path, Config).extra == {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1, "y": 2}}


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("arrays.json", '{"version": 1, "extra": ' + "[" * 100 + "]" * 100 + "}", 1),
        ("objects.json", '{"version": 1, "extra":\n' + '{"a": ' * 70 + "1" + "}" * 70 + "}", 2),
        ("stack.json", "[" * 100_000 + "]" * 100_000, 1),  # deeper than Python's recursion limit
        ("flow.yaml", "version: 1\nextra: " + "[" * 100 + "]" * 100 + "\n", 2),
        (
            "block.yaml",
            "version: 1\nextra:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)),
            66,
        ),
    ],
)
def test_nesting_deeper_than_the_limit_is_refused(tmp_path, name, text, line):
    path = write(tmp_path, name, text)
    assert problem(path) == f"{path}:{line}: nesting deeper than 64 levels (RAGEVAL_MAX_DEPTH)"


@pytest.mark.parametrize("name", ["big.json", "big.yaml"])
def test_a_file_over_the_size_limit_is_refused(tmp_path, monkeypatch, name):
    monkeypatch.setenv("RAGEVAL_MAX_FILE_BYTES", "1000")
    path = write(tmp_path, name, json.dumps({"version": 1, "extra": "x" * 2000}))
    size = path.stat().st_size
    assert problem(path) == (
        f"{path}: is {size} bytes, over the limit of 1000 (RAGEVAL_MAX_FILE_BYTES)"
    )


def test_limits_are_overridable(tmp_path, monkeypatch):
    path = write(tmp_path, "deep.json", '{"version": 1, "extra": ' + "[" * 100 + "]" * 100 + "}")
    monkeypatch.setenv("RAGEVAL_MAX_DEPTH", "200")
    assert load_model(path, Config).version == 1
    monkeypatch.setenv("RAGEVAL_MAX_YAML_ALIAS_NODES", "2")
    bomb = write(tmp_path, "a.yaml", "version: 1\nextra: [&a [1, 2], *a]\n")
    assert problem(bomb) == (
        f"{bomb}:2: extra[1]: YAML aliases expand to more than 2 nodes "
        "(RAGEVAL_MAX_YAML_ALIAS_NODES)"
    )


@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("RAGEVAL_MAX_FILE_BYTES", "file_bytes"),
        ("RAGEVAL_MAX_DEPTH", "depth"),
        ("RAGEVAL_MAX_YAML_ALIAS_NODES", "yaml_alias_nodes"),
        ("RAGEVAL_MAX_QUOTE_CHARS", "quote_chars"),
    ],
)
def test_each_file_limit_reads_its_variable(monkeypatch, variable, field):
    before = getattr(file_limits(), field)
    monkeypatch.setenv(variable, str(before + 7))
    assert getattr(file_limits(), field) == before + 7


NOT_AN_INTEGER = "Input should be a valid integer, unable to parse string as an integer"


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("0", "Input should be greater than or equal to 1"),
        ("-1", "Input should be greater than or equal to 1"),
        ("lots", NOT_AN_INTEGER),
        ("1e9", NOT_AN_INTEGER),
        ("", NOT_AN_INTEGER),
    ],
)
@pytest.mark.parametrize("variable", ["RAGEVAL_MAX_DEPTH", "RAGEVAL_MAX_FILE_BYTES"])
def test_a_bad_limit_value_names_the_variable(tmp_path, monkeypatch, variable, value, rule):
    monkeypatch.setenv(variable, value)
    path = write(tmp_path, "a.json", '{"version": 1}')
    assert problem(path) == f"environment: {variable}: {rule}"


# ------------------------------------------------------------------------ not a regular file


def test_special_files_are_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # opening it would block until a writer came
    folder = tmp_path / "folder.json"
    folder.mkdir()
    device = tmp_path / "null.json"
    device.symlink_to("/dev/null")
    assert problem(fifo) == f"{fifo}: is a FIFO, not a regular file"
    assert problem(folder) == f"{folder}: is a folder, not a regular file"
    assert problem(device) == f"{device}: is a character device, not a regular file"
    assert problem(tmp_path / "missing.json") == f"{tmp_path / 'missing.json'}: no such file"


def test_a_long_key_is_quoted_to_200_characters_in_the_field_path(tmp_path):
    key = "k" * 1000
    path = write(
        tmp_path, "a.json", json.dumps({"version": 1, "items": [{"name": "x", "tags": {key: "x"}}]})
    )
    assert problem(path) == (
        f'{path}:1: items[0].tags["{"k" * 196}...]: must be a valid integer, unable to parse '
        'string as an integer (got "x")'
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: 1\nextra: 2024-13-45\n",
            '2: invalid YAML value "2024-13-45": month must be in 1..12',
        ),
        (
            "version: 1\nextra: 2024-02-30\n",
            '2: invalid YAML value "2024-02-30": day is out of range for month',
        ),
        (
            "version: !!int x\n",
            "1: invalid YAML value \"x\": invalid literal for int() with base 10: 'x'",
        ),
        (
            "version: 1\nextra: !!timestamp 2020\n",
            '2: invalid YAML value "2020": not a timestamp',
        ),
        ("version: 1\nextra: \x00\n", '2: invalid YAML: character "\\u0000" is not allowed'),
        ("version: 1\n\n\x07\n", '3: invalid YAML: character "\\u0007" is not allowed'),
    ],
)
def test_yaml_values_that_do_not_convert_name_their_line(tmp_path, text, expected):
    path = write(tmp_path, "a.yaml", text)
    assert problem(path) == f"{path}:{expected}"
