"""The thin Dagster layer: assets, checks, resources, jobs and schedules wiring the core."""
