"""What every ddlio package shares and may import without a cycle (``experiments``, ``lustre``, ``analysis``):
the exception hierarchy (:mod:`ddlio.errors`)."""
