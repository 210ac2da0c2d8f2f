"""One loader for every file a user writes: suites, systems.yaml, gate.yaml and baselines.

`load_model(path, Model)` reads JSON or YAML (by extension; nothing else), rejects duplicate
keys, bounds size, nesting depth and YAML alias expansion, validates with pydantic and turns
the first problem, in file order, into one `InputError` line:

    file:line: field.path[3].name: rule

Limits (`settings.limits.FileLimits`, docs/limits.md) come from the environment so that a large but
honest file can still be read: RAGEVAL_MAX_FILE_BYTES, RAGEVAL_MAX_DEPTH,
RAGEVAL_MAX_YAML_ALIAS_NODES and RAGEVAL_MAX_QUOTE_CHARS. `confined` is the one check for a
path that a user file names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.io import field_paths
from rageval_pipeline.core.io.bounds import file_limits, quote_json, read_text

M = TypeVar("M", bound=BaseModel)
Loc = tuple[str | int, ...]
FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def rule(loc: Loc, problem: str) -> PydanticCustomError:
    """A validator's own rule failure; `loc` is relative to the model whose validator raises."""
    return PydanticCustomError("rule", "{problem}", {"loc": loc, "problem": problem})


# ------------------------------------------------------------------------------------- documents


class _Problem(Exception):
    """A problem found while parsing, at a line and under a field."""

    def __init__(self, line: int | None, loc: Loc, problem: str) -> None:
        super().__init__(problem)
        self.line, self.loc, self.problem = line, loc, problem


@dataclass
class Document:
    """A parsed file: its data and the line of every key and array item, by location."""

    path: Path
    data: Any
    positions: dict[Loc, int] | None = None
    json_text: str | None = None  # JSON key lines are found only when an error needs them

    def line_of(self, loc: Loc) -> int | None:
        """The line of `loc`, else of its deepest ancestor that has one."""
        if self.positions is None:
            self.positions = _json_positions(self.json_text or "")
        for end in range(len(loc), -1, -1):
            if loc[:end] in self.positions:
                return self.positions[loc[:end]]
        return None

    def error(self, loc: Loc, problem: str, rendered: str | None = None) -> InputError:
        text = rendered if rendered is not None else field_paths.render(loc)
        return InputError(self.path, problem, line=self.line_of(loc), field=text or None)


def parse(path: Path) -> Document:
    """Read and parse a JSON or YAML file within the limits; InputError on any problem."""
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(FORMATS)
        raise InputError(
            path, f"unknown file type {quote_json(path.suffix)}: expected one of {known}"
        )
    try:
        text = read_text(path)
    except InputError:  # a bad RAGEVAL_MAX_* value: its own error, not this file's
        raise
    except ValueError as exc:
        raise InputError(path, str(exc)) from None
    try:
        if kind == "json":
            return _parse_json(path, text)
        return _parse_yaml(path, text)
    except _Problem as problem:
        raise InputError(
            path, problem.problem, line=problem.line, field=field_paths.render(problem.loc) or None
        ) from None


def validate(document: Document, model: type[M], context: dict[str, Any] | None = None) -> M:
    """`model` validated from a parsed file; the first problem in file order as InputError."""
    if document.data is None:
        raise InputError(document.path, "file is empty")
    try:
        return model.model_validate(document.data, context=context)
    except ValidationError as exc:
        found = []
        for item in exc.errors(include_url=False):
            loc = tuple(item["loc"])
            if item["type"] == "rule":
                loc += tuple(item["ctx"]["loc"])
            raw, rendered = field_paths.locate(model, loc, document.data)
            found.append((field_paths.position(document.data, raw), raw, rendered, item))
        _, raw, rendered, item = min(found, key=lambda f: f[0])
        raise document.error(raw, field_paths.problem(item), rendered) from None


def load_model(path: Path, model: type[M], context: dict[str, Any] | None = None) -> M:
    """Parse `path` and validate it as `model` (see the module docstring)."""
    return validate(parse(path), model, context)


# ------------------------------------------------------------------------------------------ JSON


class _Duplicate(Exception):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse_json(path: Path, text: str) -> Document:
    try:
        data = json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON (column {exc.colno}): {exc.msg}"
        raise _Problem(exc.lineno, (), problem) from None
    except ValueError as exc:  # NaN or Infinity
        raise _Problem(None, (), f"invalid JSON: {exc}") from None
    except (_Duplicate, RecursionError):
        _json_positions(text)  # raises the problem with its line
        raise _Problem(None, (), "nesting deeper than this parser can read") from None
    if _deeper_than(data, file_limits().depth):
        _json_positions(text)  # raises the problem with its line
    return Document(path, data, json_text=text)


def _deeper_than(data: Any, most: int) -> bool:
    stack = [(data, 1)] if isinstance(data, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > most:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+')


@dataclass
class _Frame:
    kind: str
    loc: Loc
    keys: dict[str, int] = field(default_factory=dict)
    key: str | None = None
    index: int = 0


def _json_positions(text: str) -> dict[Loc, int]:
    """Line of every key and array item of valid JSON; raises the first duplicate key or the
    first nesting past RAGEVAL_MAX_DEPTH as a _Problem with its line."""
    limits = file_limits()
    most = limits.depth
    positions: dict[Loc, int] = {(): 1}
    stack: list[_Frame] = []
    line, last = 1, 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        line += text.count("\n", last, match.start())
        last = match.start()
        top = stack[-1] if stack else None
        if token in ",:]}":
            if token == "," and top is not None:
                top.index += 1
                top.key = None
            elif token in "]}":
                stack.pop()
            continue
        if top is not None and top.kind == "{" and top.key is None:
            key = json.loads(token)
            if key in top.keys:
                problem = f"duplicate key {quote_json(key)} (first on line {top.keys[key]})"
                raise _Problem(line, top.loc, problem)
            top.keys[key] = line
            top.key = key
            positions[(*top.loc, key)] = line
            continue
        loc: Loc = () if top is None else (*top.loc, top.key if top.kind == "{" else top.index)
        if top is not None and top.kind == "[":
            positions[loc] = line
        if token in "{[":
            if len(stack) >= most:
                problem = f"nesting deeper than {most} levels{limits.hint('depth')}"
                raise _Problem(line, (), problem)
            stack.append(_Frame(token, loc))
    return positions


# ------------------------------------------------------------------------------------------ YAML


class _Loader(yaml.SafeLoader):
    """SafeLoader that records key lines and bounds nesting and alias expansion while composing,
    before any alias is expanded, and refuses duplicate keys."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.positions: dict[Loc, int] = {(): 1}
        self._loc: list[str | int] = []
        self._weight: dict[int, int] = {}  # id(node) -> nodes it expands to
        self._expanded = 0
        self._limits = file_limits()
        self._max_depth = self._limits.depth
        self._max_expanded = self._limits.yaml_alias_nodes

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:
                line = event.start_mark.line + 1
                weight = self._weight.get(id(node))
                if weight is None:
                    raise _Problem(line, tuple(self._loc), "an alias inside its own anchor")
                self._expanded += weight
                if self._expanded > self._max_expanded:
                    raise _Problem(
                        line,
                        tuple(self._loc),
                        f"YAML aliases expand to more than {self._max_expanded} nodes"
                        f"{self._limits.hint('yaml_alias_nodes')}",
                    )
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        children = node.value if isinstance(node, yaml.SequenceNode) else ()
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        self._weight[id(node)] = 1 + sum(self._weight[id(c)] for c in children)
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        # Tagged or implicit scalars that do not convert (2024-13-45, !!int x) raise plain
        # Python errors from PyYAML's constructors.
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, AttributeError, OverflowError) as exc:
            shown = f" {quote_json(node.value)}" if isinstance(node, yaml.ScalarNode) else ""
            why = exc if isinstance(exc, ValueError) else f"not a {node.tag.rsplit(':', 1)[-1]}"
            problem = f"invalid YAML value{shown}: {why}".splitlines()[0]
            raise _Problem(node.start_mark.line + 1, (), problem) from None

    def _open(self, kind: type[yaml.CollectionNode], anchor: Any) -> Any:
        """A new, empty collection node, as PyYAML's composer makes it, within the depth limit."""
        start = self.get_event()
        if len(self._loc) >= self._max_depth:
            problem = f"nesting deeper than {self._max_depth} levels{self._limits.hint('depth')}"
            raise _Problem(start.start_mark.line + 1, (), problem)
        tag = start.tag if start.tag not in (None, "!") else None
        tag = tag or self.resolve(kind, None, start.implicit)
        node = kind(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def compose_sequence_node(self, anchor: Any) -> Any:
        node = self._open(yaml.SequenceNode, anchor)
        while not self.check_event(yaml.SequenceEndEvent):
            index = len(node.value)
            self.positions[(*self._loc, index)] = self.peek_event().start_mark.line + 1
            self._loc.append(index)
            node.value.append(self.compose_node(node, index))
            self._loc.pop()
        node.end_mark = self.get_event().end_mark
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = self._open(yaml.MappingNode, anchor)
        seen: dict[tuple[str, str], int] = {}
        while not self.check_event(yaml.MappingEndEvent):
            key = self.compose_node(node, None)
            line = key.start_mark.line + 1
            name = key.value if isinstance(key, yaml.ScalarNode) else "?"
            if (key.tag, name) in seen and name != "?":
                problem = (
                    f"duplicate key {quote_json(name)} (first on line {seen[(key.tag, name)]})"
                )
                raise _Problem(line, tuple(self._loc), problem)
            seen[(key.tag, name)] = line
            self.positions[(*self._loc, name)] = line
            self._loc.append(name)
            node.value.append((key, self.compose_node(node, key)))
            self._loc.pop()
        node.end_mark = self.get_event().end_mark
        return node


def _parse_yaml(path: Path, text: str) -> Document:
    try:
        loader = _Loader(text)  # the reader checks every character here
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        problem = f"invalid YAML: character {quote_json(chr(exc.character))} is not allowed"
        raise _Problem(line, (), problem) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" (column {mark.column + 1})" if mark else ""
        line = mark.line + 1 if mark else None
        raise _Problem(line, (), f"invalid YAML{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise _Problem(None, (), f"invalid YAML: {str(exc).splitlines()[0]}") from None
    return Document(path, data, loader.positions)
