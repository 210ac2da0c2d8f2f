"""File input and the wire: every byte the project reads from outside passes through here.

- Files: `formats` (TREC runs, TREC/BEIR qrels, Parquet), `delimited` + `field_checks`
  (delimited text into checked Arrow columns), `parquet_columns` (a Parquet file's columns,
  checked), `config` (the one loader for every file a user writes), `field_paths` (where a
  problem is, as people read files), `bounds` (size, nesting and path bounds on untrusted
  input, within `core.settings`' limits), `paths` (the project's folders).
- Shapes: `tables` (the Arrow schemas passed between stages), `ranking` (trec_eval's ordering
  rule), `keys` (id fingerprints the readers and the measures share).
- Network: `net` (the one home for outbound HTTP), `http_headers`, `content_encoding`, and
  `beir` (the verified, cached BEIR download).

Modules are the public units (`from rageval_pipeline.core.io import formats, net`): importing
one costs only that module, which keeps `rageval eval` quick to start.
"""
