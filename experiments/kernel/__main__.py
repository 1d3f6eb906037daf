"""``python -m experiments.kernel SPEC.json [--result PATH]``: the MPI reader kernel, one process per rank."""

import gc
import sys

from experiments.kernel.main import main

code = main(sys.argv[1:])
# the result is written: the interpreter's teardown need not search numpy's and the kernel's objects for reference
# cycles before the OS frees them (~40 ms of every kernel step here); MPI_Finalize and exit handlers still run
gc.freeze()
sys.exit(code)
