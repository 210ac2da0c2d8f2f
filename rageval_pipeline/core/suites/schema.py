"""The suite file's JSON Schema, generated from the models of `core.suites.golden`:

python -m rageval_pipeline.core.suites.schema --schema > data/suites/suite.schema.json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rageval_pipeline.core.suites.golden import Suite


def suite_json_schema() -> dict[str, Any]:
    """JSON Schema of the suite file, generated from the models (committed as suite.schema.json)."""
    schema = Suite.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--schema", action="store_true", required=True, help="print the suite JSON Schema"
    )
    parser.parse_args(argv)
    print(json.dumps(suite_json_schema(), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
