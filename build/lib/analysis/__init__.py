"""ddlio.analysis: the results store and everything that reads it (summary, ingest, figures, guidelines, report)."""
