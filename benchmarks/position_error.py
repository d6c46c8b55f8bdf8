"""The error of posenc's float64 sinusoidal table against exact values, by position.

For each position ``t`` the largest ``|sinusoidal(t, d)[i] − exact|`` over the ``d`` columns, where
``exact`` is ``sin``/``cos`` of ``t · base^(−2i/d)`` evaluated by mpmath at 50 significant digits
(the frequency itself exact, not rounded to float64). Run from a checkout::

    python benchmarks/position_error.py            # d = 256, base 10000
"""

from __future__ import annotations

import argparse

import mpmath
import numpy as np

import posenc


def max_error(t: int, dim: int, base: float) -> float:
    """Largest absolute error of the float64 row of position ``t``."""
    row = posenc.sinusoidal([t], dim, base=base)[0]
    mpmath.mp.dps = 50
    worst = 0.0
    for i in range((dim + 1) // 2):
        angle = mpmath.mpf(t) * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / dim)
        worst = max(worst, abs(float(row[2 * i] - mpmath.sin(angle))))
        if 2 * i + 1 < dim:
            worst = max(worst, abs(float(row[2 * i + 1] - mpmath.cos(angle))))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--base", type=float, default=10000.0)
    args = parser.parse_args()
    print(f"d = {args.dim}, base {args.base:g}: max |float64 table − exact| by position")
    for t in (10, 10**3, 10**5, 10**7, 10**9):
        error = max_error(t, args.dim, args.base)
        print(f"  t = {t:>13,}: {error:.2g}   ({error / (t * np.finfo(np.float64).eps):.2g} × t·2^-52)")


if __name__ == "__main__":
    main()
