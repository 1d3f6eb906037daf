#!/usr/bin/env python
"""ddlio's entry point: compose points from ``conf/`` with Hydra overrides, validate all of them, then measure.

    python sweep.py                                        # one default point
    python sweep.py -m format=hdf5,tfrecord stripe=1,4,16  # a sweep: the Cartesian product, 6 points

Hydra composes one config per point (multirun = every combination) and hands each batch to ddlio's launcher
(``hydra_plugins/ddlio_launcher``): it validates every point of the batch (so a bad value is reported before any
job is submitted or byte written), measures the batch through ``experiments.run`` with the results store (which
skips what is already measured and records everything else as it finishes) and returns each point's objective, so
any Hydra sweeper drives it: the grid by default, ``hydra/sweeper=optuna`` for an adaptive search.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import tempfile

import hydra
from omegaconf import DictConfig, OmegaConf

from ddlio.errors import DdlioError
from ddlio.secrets import mask, masked_stdio
from ddlio.signals import interrupt_code, interrupt_name, terminate_as_interrupt
from experiments.config import register_configs
from hydra_plugins.ddlio_launcher.master import swept_groups_master
from hydra_plugins.ddlio_launcher.mode import known_mode

register_configs()


def _scratch() -> str:
    """Hydra's own scratch directory, private to the user: in a multirun Hydra saves the composed config there
    (multirun.yaml), a db password included."""
    path = os.path.join(tempfile.gettempdir(), f"ddlio-hydra-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


OmegaConf.register_new_resolver("ddlio_scratch", _scratch, replace=True)

#: what makes Hydra answer by itself instead of running points (a run without -m goes through the launcher too)
_HYDRA_COMMANDS = ("-m", "--multirun", "-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "-sc",
                   "--shell-completion", "-r", "--run", "--version")


@hydra.main(version_base=None, config_path="conf", config_name="config")
def _point(cfg: DictConfig) -> float | None:
    """The task of one point, for a launcher other than ddlio's (hydra/launcher=basic, submitit ...): measure it
    as a batch of one and return its objective. ddlio's own launcher (the default) runs whole batches instead."""
    from hydra.core.hydra_config import HydraConfig

    from experiments.run.batch import run_batch  # lazy: start-up (--help loads no store)
    from hydra_plugins.ddlio_launcher.launcher import task_dict  # lazy: start-up

    try:
        [outcome] = run_batch([(task_dict(cfg), tuple(HydraConfig.get().overrides.task))], os.getcwd())
    except DdlioError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    return outcome.value


def main(argv: list[str] | None = None) -> int:
    """Compose the points with Hydra and hand them to the configured launcher (ddlio's, ``hydra/launcher=ddlio``);
    a run without ``-m`` is a sweep of one point. Returns the exit status: 0 ok, 1 failed points, 2 bad input,
    130 interrupted."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not any(a.split("=", 1)[0] in _HYDRA_COMMANDS for a in args):
        args = ["--multirun", *args]
    saved, full_error = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = [saved[0] if saved else "sweep.py", *args]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises what it refuses instead of exiting 1: see run()
    try:
        # known_mode: Hydra's main composes no config just to learn hydra.mode; swept_groups_master: the sweep's
        # config composes with the swept groups' own options (-m format=npz,npy format.load=whole)
        with known_mode(args), swept_groups_master():
            _point()
    except SystemExit as e:  # --help, bad input (2), failed points (1), interrupted (130)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
        if full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = full_error
    return 0


def refused(e: BaseException) -> str | None:
    """The one-line message for what Hydra (composition, override syntax, types, unknown keys or group options)
    or a sweeper (its options, its parameters' ranges) refused, or None when ``e`` is not bad input."""
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

    from experiments.config.validate.keys import unknown_key_problem  # lazy: only on an error

    cause = e.__cause__ if isinstance(e.__cause__, OmegaConfBaseException) else None
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and getattr(cause, "full_key", None):
        key = str(cause.full_key)
        given = re.search(rf"use \+({re.escape(key)}=.*)", str(e))  # Hydra says: "To append ... use +key=value"
        return unknown_key_problem(key, given=given[1].strip() if given else None,
                                   conf=getattr(cause, "object_type", None))
    missing, options = getattr(e, "missing_cfg_file", None), getattr(e, "options", None)
    if isinstance(e, MissingConfigException) and missing and options:  # a group option: format=hdf6
        return unknown_option_problem(str(missing), [str(o) for o in options])
    if isinstance(e, (HydraException, OmegaConfBaseException)):
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        detail = [ln for ln in (str(cause).splitlines() if cause else []) if ln.strip()][:1]
        keep = [ln for ln in lines if not ln.startswith(("full_key:", "object_type=", "reference_type=", "See https"))]
        return "; ".join(keep[:2] + detail)
    tb, frames = e.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename.replace(os.sep, "/"))
        tb = tb.tb_next
    raised_in = frames[-1] if frames else ""  # where it was raised: Hydra's or Optuna's own code, not ddlio's
    if isinstance(e, (ValueError, TypeError)) and any("hydra_optuna_sweeper" in f for f in frames) and (
            "/optuna/" in raised_in or "hydra_optuna_sweeper" in raised_in):
        return f"hydra/sweeper=optuna refused its settings: {e}"
    if isinstance(e, (ValueError, TypeError)) and "/hydra/" in raised_in:
        return f"Hydra refused the overrides: {e}"
    return None


def unknown_option_problem(missing: str, options: list[str]) -> str:
    """The message for a config group's option that Hydra did not find (``missing``: ``format/hdf6``): the line
    that installs it where it is a plug-in installed apart (``hydra/sweeper=optuna``), else the closest option
    and every one."""
    import difflib  # lazy: only on an error

    from hydra_plugins.ddlio_launcher.config import PLUGIN_EXTRAS  # lazy: only on an error

    group, _, name = missing.rpartition("/")
    extra = PLUGIN_EXTRAS.get(f"{group}={name}")
    if extra is not None:
        return extra
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    hint = f" (did you mean {group}={close[0]}?)" if close else ""
    return f"{group}={name} is unknown: choose one of {', '.join(options)}{hint}"


#: what makes Hydra print the composed config (``db`` included) instead of running points
_PRINTS_CONFIG = ("-c", "--cfg", "-i", "--info", "-h", "--help")


def _prints_config(args: list[str]) -> bool:
    """Whether Hydra prints the config for ``args`` (``--cfg job``): its output then has every password masked."""
    return any(a.split("=", 1)[0] in _PRINTS_CONFIG for a in args)


def run() -> int:
    """``main()`` as a command: no traceback reaches the user unless ``DDLIO_TRACEBACK=1`` asks for it; SIGTERM
    stops it as Ctrl-C does (exit 143)."""
    try:
        with terminate_as_interrupt(), masked_stdio(_prints_config(sys.argv[1:])):
            return main()
    except BrokenPipeError:  # output piped into head & co.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt as e:
        print("interrupted" if interrupt_code(e) == 130 else f"interrupted ({interrupt_name(e)})", file=sys.stderr)
        return interrupt_code(e)
    except Exception as e:
        if os.environ.get("DDLIO_TRACEBACK") == "1":
            raise
        if isinstance(e, DdlioError):
            print(f"error: {e}", file=sys.stderr)
            return 2
        message = refused(e)
        if message is not None:
            print(mask(f"error: {message}"), file=sys.stderr)
            return 2
        print(mask(f"error: {type(e).__name__}: {e}".splitlines()[0][:500]), file=sys.stderr)
        print("(an unexpected error in ddlio; set DDLIO_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    code = run()
    # the sweep is over, its store closed and its outputs written: Python's teardown need not search the ~1M
    # objects of Hydra, OmegaConf and SQLAlchemy for reference cycles before the OS frees them all (~0.1 s); exit
    # handlers, thread joins, the flush of stdout and stderr and every reference-counted finalizer still run
    gc.freeze()
    sys.exit(code)
