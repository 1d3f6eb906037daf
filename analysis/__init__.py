"""analysis: everything that reads the results store (:mod:`ddlio.store`): summary, ingest, figures, guidelines,
report."""
