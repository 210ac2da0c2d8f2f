"""`python -m rageval_pipeline.core.settings --markdown`: print docs/configuration.md."""

import argparse

from rageval_pipeline.core.settings.catalog import markdown

parser = argparse.ArgumentParser(prog="python -m rageval_pipeline.core.settings")
parser.add_argument("--markdown", action="store_true", required=True, help="print the doc")
parser.parse_args()
print(markdown(), end="")
