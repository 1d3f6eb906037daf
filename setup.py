"""Build the kernel's per-read loop in C (experiments/kernel/_readrun.c), optionally: without a C compiler and
Python's headers the install goes on and the kernel reads with its Python loop (pyproject.toml holds the rest)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("experiments.kernel._readrun", ["experiments/kernel/_readrun.c"], optional=True,
                             extra_compile_args=["-O2"])])
