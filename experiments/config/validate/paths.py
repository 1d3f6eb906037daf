"""The paths concern: data_root is (or can be made) a writable directory on a real file system, and the results
store is a SQLAlchemy URL or a writable file path (a password only in db_url_file or the environment)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ddlio.errors import ConfigError
from ddlio.secrets import driver_db
from lustre.fs import PSEUDO_FS, existing_ancestor, fs_info


def check_writable_dir(problems: list[str], key: str, path: Path) -> None:
    """Add a problem unless ``path`` is, or can be created as, a writable directory on a real file system."""
    if path.exists() and not path.is_dir():
        problems.append(f"{key}={path} exists and is not a directory: give a directory path")
        return
    anc = existing_ancestor(path)
    if not anc.is_dir():
        problems.append(f"{key}={path}: {anc} is a file, so {path} cannot be created; give a directory path")
        return
    fs = fs_info(anc)
    if fs.type in PSEUDO_FS:
        problems.append(
            f"{key}={path} is on {fs.type} ({fs.mount_point}), a virtual file system that holds no data: "
            "give a directory on a real file system (a local disk, /tmp, or a Lustre scratch directory)"
        )
    elif not os.access(anc, os.W_OK | os.X_OK):
        problems.append(f"{key}={path} is not writable ({anc} denies writing): give a directory you can write")


def check_data_root(problems: list[str], cfg: dict[str, Any], base: Path) -> Path:
    """``data_root`` made absolute (relative to ``base``, ``~`` expanded), a writable directory; an empty one is
    refused (it would silently mean the working directory)."""
    if not str(cfg["data_root"] or "").strip():
        problems.append("data_root is empty: give the directory for datasets/ and runs/ (e.g. data_root=ddlio-data "
                        "or a Lustre scratch directory)")
        return base / "ddlio-data"  # a stand-in, so that later checks still run
    data_root = (base / os.path.expanduser(str(cfg["data_root"]))).resolve()
    check_writable_dir(problems, "data_root", data_root)
    return data_root


def check_db(problems: list[str], cfg: dict[str, Any], base: Path) -> str:
    """The store the driver opens (``db`` or ``db_url_file``'s URL, a path made absolute; password unmasked); an
    empty ``db`` without ``db_url_file`` is refused."""
    if not str(cfg.get("db") or "").strip() and not str(cfg.get("db_url_file") or "").strip():
        problems.append("db is empty: give the results store, a SQLite file (db=results.db) or a SQLAlchemy URL")
        return ""
    try:
        db = driver_db(cfg, base)
    except ConfigError as e:
        problems += e.problems
        return ""
    if db and "://" not in db:
        dbp = Path(db)
        if dbp.is_dir():
            problems.append(f"db={cfg['db']} is a directory: give a file path (results.db) or a SQLAlchemy URL")
        else:
            check_writable_dir(problems, "db", dbp.parent)
    return db
