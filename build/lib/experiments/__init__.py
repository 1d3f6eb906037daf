"""ddlio.experiments: one experiment point, from a validated config to a measured result.

This package measures; it never imports :mod:`analysis` (the store). Results leave it as plain records.
"""
