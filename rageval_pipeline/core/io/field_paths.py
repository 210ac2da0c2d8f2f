"""Where a validation problem is, said the way people read files: `queries[12].judgments["d1"]`.

Pydantic's error locations name model fields, map keys, list indexes and, for a discriminated
union, the tag of the member tried. `locate` walks the model's types beside the location to
tell them apart: model fields are written `.name`, map keys `["key"]`, indexes `[3]`, and union
tags are dropped (they are values in the file, not places).
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from rageval_pipeline.core.io.bounds import quote_json

Loc = tuple[str | int, ...]
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _key(part: str) -> str:
    return f"[{quote_json(part)}]"


def _field(out: str, part: str) -> str:
    return (f"{out}.{part}" if out else part) if _IDENTIFIER.match(part) else out + _key(part)


def render(loc: Loc) -> str:
    """A location without a model: identifiers as fields, other keys as ["key"]."""
    out = ""
    for part in loc:
        out = out + f"[{part}]" if isinstance(part, int) else _field(out, str(part))
    return out


def _unwrap(tp: Any) -> Any:
    """The type itself, without Annotated metadata and without None from an Optional."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tuple(members)
            tp = members[0]
        else:
            return tp


def _tagged(members: tuple[Any, ...], tag: Any, node: Any) -> Any:
    """The union member whose Literal field has the value `tag`, or the value that field has
    in `node` (the data at this place), else None."""
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            for name, info in member.model_fields.items():
                if get_origin(info.annotation) is not Literal:
                    continue
                values = get_args(info.annotation)
                if tag in values or (isinstance(node, dict) and node.get(name) in values):
                    return member
    return None


def _model_field(model: type[BaseModel], part: str) -> Any:
    for name, info in model.model_fields.items():
        if part in (name, info.alias):
            return info.annotation
    return None


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def locate(model: type[BaseModel], loc: Loc, data: Any) -> tuple[Loc, str]:
    """(the location in the file's data, its rendering) of a pydantic error location."""
    tp: Any = model
    raw: list[str | int] = []
    out = ""
    node = data
    for part in loc:
        if part == "[key]":  # pydantic marks a map key that failed validation
            continue
        tp = _unwrap(tp)
        if isinstance(tp, tuple):  # a union: the part may be the tag of the member tried
            tp = _tagged(tp, part, node)
            if tp is not None and not (isinstance(node, dict) and part in node):
                continue
        origin = get_origin(tp)
        raw.append(part)
        node = _child(node, part)
        if isinstance(part, int):
            out += f"[{part}]"
            tp = get_args(tp)[0] if origin in (list, tuple) and get_args(tp) else None
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            out = _field(out, part)
            tp = _model_field(tp, part)
        elif origin is dict:
            out += _key(part)
            tp = get_args(tp)[1]
        else:
            out = _field(out, str(part))
            tp = None
    return tuple(raw), out


def position(data: Any, loc: Loc) -> tuple[int, ...]:
    """Where `loc` sits in the parsed file, for file order; a missing key sorts after its
    object's other keys."""
    out = []
    node = data
    for part in loc:
        if isinstance(node, dict):
            keys = list(node)
            out.append(keys.index(part) if part in node else len(keys))
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(part)
            node = node[part]
        else:
            break
    return tuple(out)


def problem(item: Any) -> str:
    """One pydantic error as a short rule, quoting the offending value."""
    kind = item["type"]
    if kind == "rule":
        return item["ctx"]["problem"]
    if kind == "missing":
        return "field required"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "too_short" and not item["input"]:
        return "must not be empty"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        message = "must be an object"
    elif kind == "value_error":
        message = str(item["ctx"]["error"])
    else:
        message = re.sub(r"^(Input|String|List|Dictionary|Value) should", "must", item["msg"])
    return f"{message} (got {quote_json(item['input'])})"
