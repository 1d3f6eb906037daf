"""Build ddlio's C helpers, optionally: the kernel's per-read loop (experiments/kernel/_readrun.c) and the payload's
PCG64 fill (experiments/formats/pcg64/_fill.c). Without a C compiler and Python's headers the install goes on, the
kernel reads with its Python loop and the payload is filled from numpy (the same bytes; pyproject.toml holds the
rest)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("experiments.kernel._readrun", ["experiments/kernel/_readrun.c"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("experiments.formats.pcg64._fill", ["experiments/formats/pcg64/_fill.c"], optional=True,
              extra_compile_args=["-O2"]),
])
