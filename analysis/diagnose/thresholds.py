"""The thresholds every finding compares against: settings, as Drishti's ``--config`` file is.

Defaults for the triggers Drishti defines are Drishti's own (drishti-io 0.8, ``drishti/includes/config.py``), so a
Darshan log gives the same verdict in both tools. A settings file (JSON or YAML, ``--config FILE``) overrides any
of them by name, flat (``small_requests: 0.2``) or grouped as Drishti's file is (``{"small": {"requests": 0.2}}``
sets ``small_requests``). Unknown names and values of the wrong kind are refused with the valid names.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ddlio.errors import DdlioError


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Every limit a finding compares with. Fractions are in [0, 1]; sizes in bytes; ratios are plain numbers."""

    # a request below this many bytes is small (Drishti small_bytes; Darshan's size bins below 1 MiB)
    small_bytes: int = 1048576
    # small requests fire above this fraction of the reads ... (Drishti small_requests)
    small_requests: float = 0.1
    # ... and above this many small reads (Drishti small_requests_absolute)
    small_requests_absolute: int = 1000
    # requests off the stripe (alignment) boundary above this fraction of operations (Drishti misaligned_requests)
    misaligned_requests: float = 0.1
    # random reads above this fraction of the reads ... (Drishti random_operations)
    random_operations: float = 0.2
    # ... and above this many random reads (Drishti random_operations_absolute)
    random_operations_absolute: int = 1000
    # a shared file's slowest rank over its fastest, as a fraction of the file's bytes or time (Drishti
    # imbalance_stragglers); emulated points: slowest rank's I/O time over the mean, minus 1
    imbalance_stragglers: float = 0.15
    # emulated epochs whose slowest rank spent less than this in I/O (seconds) are too short to judge stragglers
    straggler_min_io_s: float = 0.1
    # one file's read bytes, (max - min) over max across its ranks (Drishti imbalance_size)
    imbalance_size: float = 0.3
    # bytes the file system read (read calls) over bytes the application asked for, above which reads are amplified
    amplification: float = 1.10
    # bytes read over the bytes below the highest offset read (data read more than once), above which reads repeat
    redundant_reads: float = 1.10
    # bytes fetched from storage (/proc/self/io read_bytes) over bytes the read calls returned (read-ahead waste)
    storage_over_calls: float = 1.5
    # accelerator utilisation below this fails (MLPerf Storage's pass mark)
    au_min: float = 0.90
    # opens + closes per sample above this is metadata-heavy
    meta_per_sample: float = 0.5
    # a shared file read by more than this many ranks per stripe (OST) is striped far below its readers
    readers_per_stripe: float = 4.0
    # an observed run's read order is its loader's shuffle (random reads are then expected: info, not high)
    observed_loader_shuffle: bool = False
    # checkpoints: the slowest rank's fsync time over its write time above this fraction: fsync dominates the save
    checkpoint_fsync_share: float = 0.5
    # checkpoints: the slowest rank's create/open/close time over its write time above this fraction ...
    checkpoint_meta_share: float = 0.2
    # ... with at least this many files per checkpoint (N-N at scale): a metadata storm
    checkpoint_meta_files: int = 32
    # checkpoints: a higher stripe count that gains less than this fraction of bandwidth over a lower one is useless
    checkpoint_stripe_gain: float = 0.05
    # checkpoints: a restore whose files were more resident than this in the page cache read memory
    checkpoint_resident: float = 0.1

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: one line per threshold for ``--thresholds`` (the field comments above, said once)
DESCRIPTIONS = {
    "small_bytes": "a read below this many bytes is small",
    "small_requests": "small reads fire above this fraction of the reads (P05/P15, with the absolute count)",
    "small_requests_absolute": "... and above this many small reads",
    "misaligned_requests": "reads off the stripe boundary above this fraction of operations (P08)",
    "random_operations": "random reads above this fraction of the reads (P11, with the absolute count)",
    "random_operations_absolute": "... and above this many random reads",
    "imbalance_stragglers": "slowest rank over the fastest (shared file, P18/P19) or over the mean (emulated) by more",
    "straggler_min_io_s": "seconds: emulated epochs with less I/O time on the slowest rank are not judged",
    "imbalance_size": "one file's read bytes across its ranks, (max - min) / max above this (P22)",
    "amplification": "file-system bytes over application bytes above this",
    "redundant_reads": "bytes read over the bytes below the highest offset read above this",
    "storage_over_calls": "bytes fetched from storage over bytes the read calls returned above this",
    "au_min": "accelerator utilisation below this (MLPerf Storage pass mark)",
    "meta_per_sample": "opens + closes per sample above this",
    "readers_per_stripe": "ranks reading one shared file per stripe above this",
    "observed_loader_shuffle": "an observed run's random order is its loader's shuffle (random reads: info)",
    "checkpoint_fsync_share": "checkpoints: fsync time over write time (slowest rank) above this",
    "checkpoint_meta_share": "checkpoints: create/open/close time over write time above this ...",
    "checkpoint_meta_files": "... with at least this many files per checkpoint (N-N at scale)",
    "checkpoint_stripe_gain": "checkpoints: a higher stripe count gaining less bandwidth than this fraction",
    "checkpoint_resident": "checkpoints: page-cache residency of the restored files above this (0..1)",
}


def _flatten(data: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        name = f"{prefix}_{k}" if prefix else str(k)
        if isinstance(v, dict) and depth < 4:  # deeper: no threshold is named so, refused as unknown
            out.update(_flatten(v, name, depth + 1))
        else:
            out[name] = v
    return out


def _coerce(name: str, value: Any, default: Any) -> Any:
    kind = type(default)
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif (isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
          and (kind is float or float(value).is_integer())):
        return kind(value)
    raise DdlioError(f"diagnose: threshold {name} = {value!r} is not a valid {kind.__name__}"
                     + ("" if kind is bool else " >= 0"))


#: the largest settings file read (bytes): a thresholds file is a few hundred bytes
MAX_SETTINGS_BYTES = 1 << 20


def _parse_settings(p: Path) -> Any:
    """The JSON or YAML object in the settings file ``p``; DdlioError (one line) for a file that is too big, not
    text, does not parse, or uses YAML anchors/aliases (a threshold file needs none, and aliases are how a small
    file expands into a huge or recursive one)."""
    hint = "name a JSON or YAML settings file of threshold names and values (see --thresholds)"
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_SETTINGS_BYTES + 1)
    except OSError as e:
        raise DdlioError(f"diagnose: --config {p}: cannot read it ({e.strerror or e})") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise DdlioError(f"diagnose: --config {p} is larger than {MAX_SETTINGS_BYTES} bytes; {hint}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DdlioError(f"diagnose: --config {p} is not UTF-8 text (a binary file?); {hint}") from None
    if "\0" in text:
        raise DdlioError(f"diagnose: --config {p} is not text (it holds NUL bytes; a binary file?); {hint}")
    try:
        if p.suffix in (".yaml", ".yml"):
            import yaml  # lazy: only settings files in YAML need it

            if any(isinstance(ev, yaml.AliasEvent) for ev in yaml.parse(text, Loader=yaml.SafeLoader)):
                raise DdlioError(f"diagnose: --config {p} uses YAML aliases (*name); write each value out")
            return yaml.safe_load(text) or {}
        return json.loads(text)
    except DdlioError:
        raise
    except RecursionError:
        raise DdlioError(f"diagnose: --config {p} is nested too deeply; {hint}") from None
    except Exception as e:  # json and yaml raise their own error types for a file that does not parse
        first = (str(e).strip().splitlines() or [""])[0]
        raise DdlioError(f"diagnose: --config {p} does not parse ({type(e).__name__}: {first})") from None


def load_thresholds(path: str | Path | None) -> Thresholds:
    """The defaults, overridden by the settings file at ``path`` (JSON or YAML); DdlioError for a bad file."""
    if path is None:
        return Thresholds()
    p = Path(path)
    if not p.is_file():
        raise DdlioError(f"diagnose: --config {p} is not a file; name a JSON or YAML settings file")
    data = _parse_settings(p)
    if not isinstance(data, dict):
        raise DdlioError(f"diagnose: --config {p} must hold a mapping of threshold names to values")
    defaults = Thresholds().as_dict()
    flat = _flatten(data)
    unknown = sorted(set(flat) - set(defaults))
    if unknown:
        raise DdlioError(f"diagnose: --config {p}: unknown threshold(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(defaults)}")
    fractions = {"small_requests", "misaligned_requests", "random_operations", "au_min", "checkpoint_fsync_share",
                 "checkpoint_meta_share", "checkpoint_resident"}
    values = {k: _coerce(k, v, defaults[k]) for k, v in flat.items()}
    bad = [k for k in values if k in fractions and values[k] > 1]
    if bad:
        raise DdlioError(f"diagnose: --config {p}: {', '.join(bad)} must be a fraction in [0, 1]")
    return Thresholds(**values)


def thresholds_text(t: Thresholds) -> str:
    """The thresholds as ``--thresholds`` prints them: name, value, what it means."""
    width = max(len(k) for k in DESCRIPTIONS)
    return "\n".join(f"{k:<{width}}  {v!s:>8}  {DESCRIPTIONS[k]}" for k, v in t.as_dict().items()) + "\n"
