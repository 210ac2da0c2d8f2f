"""The warehouse's tables (`rageval.duckdb`), created or brought up to date when a process
first writes it (`core.storage.warehouse`). The lake (`core.storage.lake`) takes each table's
columns and types from the same statements and shows its Parquet files as views of these
names."""

# The tables holding one run's results: replaced together when a run_id is recorded again.
RESULT_TABLES = (
    "run_metrics",
    "query_metrics",
    "group_metrics",
    "latency",
    "rankings",
    "ppi_metrics",
    "label_query_metrics",
)

# Tables only ever appended to, never replaced (`insert_rows`).
APPENDED_TABLES = ("run_reuses", "gate_results", "experiments")

HISTORY_VIEW = """CREATE OR REPLACE VIEW history AS
    SELECT r.created_at, r.dataset, r.split, r.system, r.fingerprint, r.level, r.run_id,
           m.measure, m.value
    FROM runs r JOIN run_metrics m USING (run_id) WHERE r.finished"""

# Long format (`measure`, `value`): a new measure needs no schema change.
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, dataset VARCHAR, split VARCHAR, system VARCHAR,
    fingerprint VARCHAR, level VARCHAR, k INTEGER, n_queries INTEGER,
    dagster_run_id VARCHAR, created_at TIMESTAMP, config VARCHAR
);
CREATE TABLE IF NOT EXISTS run_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    measure VARCHAR, value DOUBLE, created_at TIMESTAMP, ci_low DOUBLE, ci_high DOUBLE
);
CREATE TABLE IF NOT EXISTS query_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    query_id VARCHAR, measure VARCHAR, value DOUBLE
);
CREATE TABLE IF NOT EXISTS group_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    attribute VARCHAR, "group" VARCHAR, measure VARCHAR, value DOUBLE, n_queries INTEGER,
    ci_low DOUBLE, ci_high DOUBLE
);
-- Warehouses written before the 95% intervals (ci_low, ci_high) existed gain the columns.
ALTER TABLE run_metrics ADD COLUMN IF NOT EXISTS ci_low DOUBLE;
ALTER TABLE run_metrics ADD COLUMN IF NOT EXISTS ci_high DOUBLE;
ALTER TABLE group_metrics ADD COLUMN IF NOT EXISTS ci_low DOUBLE;
ALTER TABLE group_metrics ADD COLUMN IF NOT EXISTS ci_high DOUBLE;
-- false while the step writing a run is not done (a killed step leaves it so); rows written
-- before the column existed were complete.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS finished BOOLEAN DEFAULT true;
-- Each query's top 10 at the judged level with its grade (NULL: unjudged): what baselines
-- and reports show of a run's lists.
CREATE TABLE IF NOT EXISTS rankings (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    query_id VARCHAR, rank INTEGER, doc_id VARCHAR, grade INTEGER
);
CREATE TABLE IF NOT EXISTS latency (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    attribute VARCHAR, "group" VARCHAR, stat VARCHAR, value DOUBLE, timed VARCHAR
);
-- `timed`: "system", or "baseline" (the baseline's configuration timed beside the system in
-- the same run); older rows, NULL, are the system's. `suite` and `machine` are digests of what
-- a run was measured on and timed on (core.results.store.suite_digest, core.retrieval.machine).
ALTER TABLE latency ADD COLUMN IF NOT EXISTS timed VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS suite VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS machine VARCHAR;
-- The baseline's configuration re-run on this run's suite, when the suite changed (JSON).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS baseline_rerun VARCHAR;
{HISTORY_VIEW};
-- A job whose inputs and code were unchanged reuses a stored run instead of measuring it again
-- (history keeps one row per evaluation); this lists which job reused which run, for the gate.
CREATE TABLE IF NOT EXISTS run_reuses (
    run_id VARCHAR, dagster_run_id VARCHAR, created_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS gate_results (
    gate_id VARCHAR PRIMARY KEY, dagster_run_id VARCHAR, created_at TIMESTAMP,
    passed BOOLEAN, categories VARCHAR, summary VARCHAR, report_json VARCHAR
);
ALTER TABLE gate_results ADD COLUMN IF NOT EXISTS finished BOOLEAN DEFAULT true;
-- Prediction-powered inference (docs/statistics.md). run_metrics and query_metrics stay the
-- human-judged numbers (label_source 'human', every row before the column existed too); beside
-- them, per-query values with LLM qrels on the whole population (label_source 'llm'), and per
-- measure the PPI++ estimate ('ppi') and the LLM labels taken as truth ('llm', for comparison),
-- with the human sample they rest on (runs.human_sample, sampling.HumanSample as JSON).
ALTER TABLE run_metrics ADD COLUMN IF NOT EXISTS label_source VARCHAR DEFAULT 'human';
ALTER TABLE query_metrics ADD COLUMN IF NOT EXISTS label_source VARCHAR DEFAULT 'human';
ALTER TABLE runs ADD COLUMN IF NOT EXISTS human_sample VARCHAR;
-- Per judged query, the digest of what decides its value (results.store.query_digests, JSON):
-- another suite version's baseline is compared on the unchanged queries.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS query_digests VARCHAR;
CREATE TABLE IF NOT EXISTS label_query_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    label_source VARCHAR, query_id VARCHAR, measure VARCHAR, value DOUBLE
);
CREATE TABLE IF NOT EXISTS ppi_metrics (
    run_id VARCHAR, dataset VARCHAR, split VARCHAR, system VARCHAR,
    label_source VARCHAR, measure VARCHAR, value DOUBLE, ci_low DOUBLE, ci_high DOUBLE,
    n_human INTEGER, n_llm INTEGER, effective_n DOUBLE, mde DOUBLE, mde_human DOUBLE,
    sample_seed INTEGER, frame_sha256 VARCHAR
);
-- The experiments log (core.history.experiments): one row per gated evaluation.
CREATE TABLE IF NOT EXISTS experiments (
    id VARCHAR PRIMARY KEY, date VARCHAR, created_at TIMESTAMP, dataset VARCHAR,
    split VARCHAR, system VARCHAR, run_id VARCHAR, fingerprint VARCHAR,
    baseline_fingerprint VARCHAR, description VARCHAR, config_changes VARCHAR,
    results VARCHAR, verdict VARCHAR, reason VARCHAR
);
"""
