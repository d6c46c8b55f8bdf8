"""The optional C extension (posenc._kernels); everything else is declared in pyproject.toml.

Fused loops for the rotary and table hot paths (posenc._native). Optional: where it cannot be compiled
(no C compiler) the install goes on and posenc runs its pure NumPy/PyTorch code instead.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "posenc._kernels",
            sources=["src/posenc/_kernels.c"],
            # Products and sums rounded once each, as in torch and NumPy: no fused multiply-add (GCC 12 still
            # fuses an alternating -/+ into vfmaddsub in straight-line code unless its SLP vectorizer is off;
            # tested).
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-tree-slp-vectorize"],
            optional=True,
        )
    ]
)
