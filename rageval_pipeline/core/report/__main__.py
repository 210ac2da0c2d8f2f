"""`python -m rageval_pipeline.core.report DIR`: the short summary of the reports in DIR."""

import sys
from pathlib import Path

from rageval_pipeline.core.gate import Verdict
from rageval_pipeline.core.report import short_summary

folder = Path(sys.argv[1])
verdict = Verdict.model_validate_json((folder / "gate.json").read_text(encoding="utf-8"))
print(short_summary(verdict, folder))
