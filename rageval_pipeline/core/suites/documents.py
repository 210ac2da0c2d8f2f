"""A golden suite's documents: the `Document` model of the suite file and how its text is read
(inline, from a file beside the suite, or canonical JSON). Split from `core.suites.golden`,
which holds the suite and its queries; the format is described in docs/suite-format.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    JsonValue,
    PlainValidator,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from rageval_pipeline.core.io.bounds import confined, read_text
from rageval_pipeline.core.io.config import rule
from rageval_pipeline.core.suites.fields import Id, StrictModel
from rageval_pipeline.core.suites.matching import split_chunk_id

_RESERVED_METADATA = ("type", "format", "tags")  # corpus metadata puts these beside the free keys


def _content(value: JsonValue) -> JsonValue:
    if isinstance(value, str | dict | list):
        return value
    raise ValueError("must be a string (or, for format json, an object or array)")


Content = Annotated[
    JsonValue,
    PlainValidator(_content),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "object"}, {"type": "array"}]}),
]


class Document(StrictModel):
    """One document; its text is `content` or the file at `content_path`."""

    id: Id
    type: Literal["knowledge_artifact", "communication_signal", "interaction_event"]
    format: Literal["markdown", "plain", "json"]
    title: str
    url: str | None = None
    content: Content | None = None
    content_path: str | None = Field(None, description="relative to the suite file")
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)

    _text: str = PrivateAttr("")

    @field_validator("id", mode="before")
    @classmethod
    def _id_names_no_chunk(cls, value: Any) -> Any:
        if isinstance(value, str) and split_chunk_id(value) is not None:
            raise ValueError("a document id must not end in ':chunk:<n>' (that names a chunk)")
        return value

    @field_validator("metadata")
    @classmethod
    def _no_reserved_keys(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for key in value:
            if key in _RESERVED_METADATA:
                raise rule((key,), "reserved key: it is a document field, set it there")
        return value

    @model_validator(mode="after")
    def _load_text(self, info: ValidationInfo) -> Document:
        if (self.content is None) == (self.content_path is None):
            given = "both" if self.content is not None else "neither"
            raise rule((), f"give exactly one of content and content_path ({given} given)")
        field = "content" if self.content is not None else "content_path"
        if self.content_path is not None:
            text = _read_content(self.content_path, (info.context or {}).get("base_dir"))
        elif isinstance(self.content, str):
            text = self.content
        elif self.format == "json":
            text = json.dumps(self.content, indent=2, sort_keys=True, ensure_ascii=False)
        else:
            raise rule((field,), "an object or array needs format json")
        if self.format == "json":
            try:
                json.loads(text)
            except json.JSONDecodeError as error:
                raise rule((field,), f"format json but not valid JSON: {error}") from None
        if not text.strip():
            raise rule((field,), "document text is empty")
        self._text = text
        return self

    @property
    def text(self) -> str:
        """The indexed text: inline content, the file at content_path, or canonical JSON."""
        return self._text


def _read_content(content_path: str, base_dir: Path | None) -> str:
    loc = ("content_path",)
    if base_dir is None:
        raise rule(loc, "cannot be read: the suite was not loaded from a file (use load_suite)")
    try:
        return read_text(confined(base_dir, content_path))
    except ValueError as exc:
        raise rule(loc, str(exc)) from None
