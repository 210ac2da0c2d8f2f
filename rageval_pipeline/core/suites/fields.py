"""The field types a golden-suite file is made of, shared by the suite's models
(`core.suites.golden`) and its evidence spans (`core.suites.evidence`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema


def _grade(value: Any) -> int:
    # type() rather than isinstance: JSON true must not pass as grade 1.
    if type(value) is int and 0 <= value <= 3:
        return value
    raise ValueError("grade must be 0, 1, 2 or 3")


Grade = Annotated[
    int,
    PlainValidator(_grade),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": 3}),
]
# Ids are written to whitespace-separated TREC qrels and run files.
Id = Annotated[str, Field(pattern=r"^\S+$")]


class StrictModel(BaseModel):
    """A part of a file people edit: a misspelt key is an error, not an ignored setting."""

    model_config = ConfigDict(extra="forbid")
