"""``python -m experiments.kernel SPEC.json [--result PATH]``: the MPI reader kernel, one process per rank."""

import sys

from experiments.kernel.main import main

sys.exit(main(sys.argv[1:]))
