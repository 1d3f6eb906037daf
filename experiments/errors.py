"""The exception hierarchy, kept importable here for existing code; it lives in :mod:`ddlio.errors` so that
``lustre`` (which ``experiments`` imports) can use it without importing ``experiments``."""

from ddlio.errors import (
    ConfigError,
    DatasetError,
    DdlioError,
    FormatError,
    KernelError,
    LaunchError,
    LayoutError,
    StartTimeoutError,
    TimeLimitError,
)

__all__ = ["ConfigError", "DatasetError", "DdlioError", "FormatError", "KernelError", "LaunchError", "LayoutError",
           "StartTimeoutError", "TimeLimitError"]
