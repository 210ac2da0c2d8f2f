"""The integrity checks of `<system>/chunks`, and the gate's way to read them back."""

import dagster as dg
import pandas as pd

from rageval_pipeline.core.suites.chunking import integrity

# The integrity checks of `<system>/chunks`, and the rate each records (the gate's
# validation report reads them back).
CHUNK_CHECKS = {
    "metadata_complete": "metadata_completeness_rate",
    "hashes_valid": "hash_validation_rate",
}


def measured_integrity(context: dg.AssetExecutionContext) -> dict[str, tuple[float, float]]:
    """system -> (metadata completeness, hash validity) that this Dagster run's `<system>/chunks`
    checks measured (a run evaluates one dataset), read back from the run's events."""
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    rates: dict[str, dict[str, float]] = {}
    for record in records:
        check = record.event_log_entry.dagster_event.event_specific_data
        key, rate = check.asset_key.path, CHUNK_CHECKS.get(check.check_name)
        if rate in check.metadata and len(key) == 2 and key[1] == "chunks":
            rates.setdefault(key[0], {})[check.check_name] = check.metadata[rate].value
    return {
        system: (got["metadata_complete"], got["hashes_valid"])
        for system, got in rates.items()
        if got.keys() == CHUNK_CHECKS.keys()
    }


def chunk_check_results(chunks: pd.DataFrame) -> list[dg.AssetCheckResult]:
    """The chunks' integrity checks; anything under 100% fails them."""
    return [
        dg.AssetCheckResult(
            check_name=check,
            passed=value == 1.0,
            metadata={rate: value, "chunks": len(chunks)},
        )
        for (check, rate), value in zip(CHUNK_CHECKS.items(), integrity(chunks), strict=True)
    ]
