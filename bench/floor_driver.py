"""The floor of ddlio's driver, for ``bench/vs_dlio.py``: what any driver built on ddlio's components does, and no
more, before it starts a point's job and waits for it.

``python bench/floor_driver.py DB -- COMMAND...``: Hydra composes a config with an override (its override parser
and its config store, as ``sweep.py``'s composition uses them), SQLAlchemy's ORM maps a table, creates it in the
SQLite file DB and commits one row, submitit is imported (the local executor pickles the job with it), then
COMMAND runs and its exit status is this one's. What ddlio's driver weighs above this is ddlio's own.
"""

from __future__ import annotations

import subprocess
import sys

import submitit  # noqa: F401  (the local executor pickles the job with it)
from hydra import compose, initialize
from hydra.core.config_store import ConfigStore
from sqlalchemy import Integer, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Point(Base):
    """One stored point, as a store maps it."""

    __tablename__ = "points"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    format: Mapped[str] = mapped_column(String)
    ranks: Mapped[int] = mapped_column(Integer)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: python bench/floor_driver.py DB -- COMMAND...")
    db, command = argv[0], argv[2:]
    ConfigStore.instance().store(name="floor", node={"format": "npz", "ppn": 1, "workload": {"samples": 1}})
    with initialize(version_base=None, config_path=None):
        cfg = compose(config_name="floor", overrides=["ppn=2", "workload.samples=64"])
    engine = create_engine(f"sqlite:///{db}")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        session.add(Point(format=cfg.format, ranks=cfg.ppn))
        session.commit()
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
