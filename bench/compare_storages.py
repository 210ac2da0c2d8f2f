"""Do two storage folders hold the same evaluation results? (refactoring replay check)

Compares, table by table, every column except those that differ between any two replays:
run ids, Dagster run ids, timestamps and wall-clock latency. DuckDB tables are read from each
folder's `rageval.duckdb`; asset Parquet files (`assets/<system>/{run,chunks,metrics}`) from
disk. Rows are sorted on all compared columns, then compared exactly (values, dtypes, order).

    .venv/bin/python bench/compare_storages.py BEFORE_STORAGE AFTER_STORAGE [--export DIR]

`--export DIR` also writes BEFORE's DuckDB tables as Parquet under DIR (a snapshot that
outlives the database file). `--added` compares what BEFORE has: columns only AFTER has, and
rows of measures only AFTER computes, are listed as added and left out (a change that adds a
measure or a column still shows every old value unchanged). Exit 0 when identical, 1 with the
first difference otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq

# Columns that legitimately differ between two replays of the same evaluation.
VOLATILE = {
    "run_id",
    "dagster_run_id",
    "created_at",
    "ingested_at",
    "latency_ms",
    "baseline_latency_ms",
}
TABLES = ("runs", "run_metrics", "query_metrics", "group_metrics", "latency")
ASSETS = ("run", "chunks", "metrics")


def warehouse_tables(storage: Path) -> dict[str, pd.DataFrame]:
    con = duckdb.connect(str(storage / "rageval.duckdb"), read_only=True)
    try:
        out = {t: con.execute(f"SELECT * FROM {t}").df() for t in TABLES}
    finally:
        con.close()
    # Latency values are wall-clock; only which stats exist per group is comparable.
    out["latency"] = out["latency"].drop(columns="value")
    return out


def asset_tables(storage: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for path in sorted((storage / "assets").glob("*/*/*.parquet")):
        system, asset = path.parent.parent.name, path.parent.name
        if asset in ASSETS:
            out[f"assets/{system}/{asset}/{path.name}"] = pq.read_table(path).to_pandas()
    return out


def canonical(df: pd.DataFrame) -> pd.DataFrame:
    df = df.drop(columns=[c for c in df.columns if c in VOLATILE])
    cols = sorted(df.columns)
    return df[cols].sort_values(cols, kind="stable", na_position="first").reset_index(drop=True)


def _without_additions(old: pd.DataFrame, new: pd.DataFrame, name: str) -> pd.DataFrame:
    """`new` cut to `old`'s columns and, for measure tables, to `old`'s measures; prints what
    was left out."""
    extra = [c for c in new.columns if c not in old.columns]
    new = new[[c for c in new.columns if c in old.columns]]
    measures: list[str] = []
    if "measure" in old.columns:
        measures = sorted(set(new["measure"]) - set(old["measure"]))
        new = new[new["measure"].isin(set(old["measure"]))]
    if extra or measures:
        print(f"added in {name}: columns {extra}, measures {measures}")
    return new


def compare(before: Path, after: Path, added: bool = False) -> list[str]:
    """Differences, one line each (empty when the two storages hold the same results)."""
    problems = []
    a = warehouse_tables(before) | asset_tables(before)
    b = warehouse_tables(after) | asset_tables(after)
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            problems.append(f"{name}: only in {'after' if name in b else 'before'}")
            continue
        after_table = _without_additions(a[name], b[name], name) if added else b[name]
        left, right = canonical(a[name]), canonical(after_table)
        try:
            pd.testing.assert_frame_equal(left, right, check_exact=True)
        except AssertionError as exc:
            problems.append(f"{name}: {str(exc).splitlines()[0]}")
        else:
            print(f"identical: {name} ({len(left)} rows, {len(left.columns)} columns)")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="?")
    parser.add_argument("--export", type=Path, help="write BEFORE's tables as Parquet here")
    parser.add_argument(
        "--added", action="store_true", help="leave out columns and measures only AFTER has"
    )
    args = parser.parse_args()
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(args.before / "rageval.duckdb"), read_only=True)
        for table in TABLES:
            con.execute(f"COPY {table} TO '{args.export / table}.parquet' (FORMAT parquet)")
        con.close()
    if args.after is None:
        return 0
    problems = compare(args.before, args.after, added=args.added)
    for line in problems:
        print(f"DIFFERENT: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
