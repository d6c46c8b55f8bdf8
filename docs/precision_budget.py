"""The rotary precision budget: error of rotated queries against the exact rotation, by position, for
angle dtype × table dtype × rotation dtype, beside posenc's RotaryEmbedding (docs/precision.md).

    python docs/precision_budget.py            # about ten seconds on one CPU core

The exact rotation uses mpmath at 50 digits with the exact frequencies θ_i = base^(−2i/d); queries are one
fixed N(0, 1) draw per position, given in the rotation dtype (so their own rounding is not counted).
Errors are the largest absolute error over the d_h = 128 components; "floor" is the error of rounding the
exact result once to the output dtype, the least any method can reach.
"""

from __future__ import annotations

import mpmath
import numpy as np
import torch

from posenc.nn import RotaryEmbedding, apply_rotary

BASE, DIM = 10_000.0, 128
POSITIONS = (10, 1_000, 10_000, 100_000, 1_000_000, 10_000_000)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
mpmath.mp.dps = 50


def exact(q: np.ndarray, t: int) -> np.ndarray:
    """``q`` rotated in half-split pairs by the exact angles ``t·θ_i``, to float64."""
    half = DIM // 2
    out = np.empty(DIM)
    for i in range(half):
        angle = t * mpmath.power(BASE, mpmath.mpf(-2 * i) / DIM)
        c, s = mpmath.cos(angle), mpmath.sin(angle)
        a, b = mpmath.mpf(float(q[i])), mpmath.mpf(float(q[i + half]))
        out[i], out[i + half] = float(a * c - b * s), float(b * c + a * s)
    return out


def tables(t: int, angle: torch.dtype, table: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's construction: frequencies and positions in ``angle``, cos/sin cast to ``table``."""
    inv = 1.0 / (BASE ** (torch.arange(0, DIM, 2, dtype=torch.float64) / DIM))
    freqs = torch.tensor([float(t)], dtype=angle)[:, None] * inv.to(angle)[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(table), emb.sin().to(table)


def main() -> None:
    rng = np.random.default_rng(0)
    header = f"{'angles':>8} {'tables':>8} {'rotation':>9} | " + " ".join(f"{t:>9.0e}" for t in POSITIONS)
    print(header)
    print("-" * len(header))
    queries = {t: rng.standard_normal(DIM) for t in POSITIONS}
    rows: dict[str, list[float]] = {}
    for rot_name, rot in DTYPES.items():
        given = {t: torch.tensor(queries[t]).to(rot) for t in POSITIONS}
        truth = {t: exact(given[t].double().numpy(), t) for t in POSITIONS}
        rows[f"floor | {rot_name}"] = [
            float(np.abs(torch.tensor(truth[t]).to(rot).double().numpy() - truth[t]).max()) for t in POSITIONS
        ]
        for angle_name, angle in (("float32", torch.float32), ("float64", torch.float64)):
            for table_name, table in DTYPES.items():
                errors = []
                for t in POSITIONS:
                    c, s = tables(t, angle, table)
                    x = given[t][None, :]
                    got = apply_rotary(x.to(torch.promote_types(rot, table)), c, s, layout="half_split").to(rot)
                    errors.append(float(np.abs(got.double().numpy()[0] - truth[t]).max()))
                rows[f"{angle_name} {table_name} {rot_name}"] = errors
        rope = RotaryEmbedding(DIM, base=BASE, layout="half_split")
        errors = []
        for t in POSITIONS:
            x = given[t].view(1, 1, 1, DIM)
            got, _ = rope(x, x, q_positions=torch.tensor([t]))
            errors.append(float(np.abs(got.double().numpy().ravel() - truth[t]).max()))
        rows[f"posenc RotaryEmbedding {rot_name}"] = errors
    for name, errors in rows.items():
        parts = name.split()
        label = (
            f"{'posenc':>8} {'(own)':>8} {parts[-1]:>9}"
            if parts[0] == "posenc"
            else f"{'floor':>8} {'':>8} {parts[-1]:>9}"
            if parts[0] == "floor"
            else f"{parts[0]:>8} {parts[1]:>8} {parts[2]:>9}"
        )
        print(f"{label} | " + " ".join(f"{e:>9.2g}" for e in errors))


if __name__ == "__main__":
    main()
