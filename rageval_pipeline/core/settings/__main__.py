"""`python -m rageval_pipeline.core.settings --markdown`: print docs/configuration.md.
`--folder storage` (or data, baselines, local): print that folder as the settings resolve it
(`local`: the storage folder, or for a URL its local folder for logs and the warehouse), or
the one line saying why they cannot (an unsupported URL, say) and exit 2; scripts/evaluate
creates no folder before asking."""

import argparse
import sys

from rageval_pipeline.core.errors import InputError
from rageval_pipeline.core.settings.catalog import markdown
from rageval_pipeline.core.settings.locations import Locations

parser = argparse.ArgumentParser(prog="python -m rageval_pipeline.core.settings")
todo = parser.add_mutually_exclusive_group(required=True)
todo.add_argument("--markdown", action="store_true", help="print the doc")
todo.add_argument(
    "--folder", choices=("data", "storage", "baselines", "local"), help="print a folder"
)
args = parser.parse_args()
if args.markdown:
    print(markdown(), end="")
else:
    try:
        print(getattr(Locations.from_env(), f"{args.folder}_dir"))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
