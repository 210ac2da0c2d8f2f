"""Assets by stage: ingest (archive to tables), systems (chunks, index, run, metrics), gate."""
