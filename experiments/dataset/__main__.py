"""``python -m experiments.dataset PLAN.json``: generate a dataset's files as an MPI program (rank r writes files
r, r+P, r+2P, ...)."""

import sys

from ddlio.lazy import one_blas_thread

one_blas_thread()  # before numpy loads: the ranks multiply no matrices; its BLAS threads would spin their cores

from experiments.dataset import _mpi_main  # noqa: E402

sys.exit(_mpi_main(sys.argv[1]))
