"""The pure core: loaders, chunking, retrievers, measures, gate. No Dagster imports here."""
