"""``python -m experiments.dataset PLAN.json``: generate a dataset's files as an MPI program (rank r writes files
r, r+P, r+2P, ...)."""

import sys

from experiments.dataset import _mpi_main

sys.exit(_mpi_main(sys.argv[1]))
