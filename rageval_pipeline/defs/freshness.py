"""Freshness: flag an evaluation older than a day (Dagster's `FreshnessPolicy`).

Every evaluation ends with `gate` (partitioned by dataset), so its last materialization is the
time of the latest evaluation; past a day its freshness turns FAIL in the UI (and in alerts).
Dagster's freshness daemon evaluates policies when the instance sets `freshness: {enabled:
true}` (deploy/dagster-postgres.yaml does; the local dagster.yaml leaves it off).
"""

from datetime import timedelta

import dagster as dg

EVALUATION_MAX_AGE = dg.FreshnessPolicy.time_window(fail_window=timedelta(days=1))


def fresh_daily(asset: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """`asset` with the one-day freshness policy."""
    return asset.map_asset_specs(lambda spec: dg.apply_freshness_policy(spec, EVALUATION_MAX_AGE))
