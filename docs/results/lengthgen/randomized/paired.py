"""Paired differences (points of exact match) between these runs and the committed copy-reverse runs.

Run from the repository root: ``python docs/results/lengthgen/randomized/paired.py``. Each difference
pairs the same seed (same initial weights, training batches and test sets); p is the exact two-sided
sign-flip p over the 5 pairs (all 2⁵ sign patterns; 0.0625 is the smallest attainable); p Holm is
Holm's adjustment over every comparison of the table but the must-be-0 checks.
"""

import itertools
import json
from pathlib import Path

from posenc_bench.experiment.stats import holm

HERE = Path(__file__).parent
LENGTHS = {8: "L", 10: "1.25L", 12: "1.5L", 16: "2L"}


def seeds(path: Path) -> dict[tuple[str, str, int], list[float]]:
    rows = json.loads(path.read_text())["rows"]
    return {(r["task"], r["encoding"], r["length"]): r["seeds"] for r in rows}


def sign_flip_p(d: list[float]) -> float:
    if not any(d):
        return 1.0
    observed = abs(sum(d))
    flips = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(f >= observed - 1e-12 for f in flips) / len(flips)


base = seeds(HERE.parent / "copy-reverse" / "lengthgen.json")
rand = seeds(HERE / "rand64-tested-consecutive" / "lengthgen.json")  # the study: trained at random, tested at 0…s−1
nope = seeds(HERE / "nope3" / "lengthgen.json")
tested = json.loads((HERE / "random-test-positions.json").read_text())
nope13_runs = json.loads((HERE / "nope13.json").read_text())
nope13 = {(t, "rope", int(n)): [nope13_runs[f"{t}/rope/{s}"][n] for s in range(5)]
          for t in ("copy", "reverse") for n in ("8", "10", "12", "16")}
rtest = {(t, e, int(n)): [tested[f"{t}/{e}/{s}"]["random_test"][n] for s in range(5)]
         for t in ("copy", "reverse") for e in ("sinusoidal", "rope") for n in ("8", "10", "12", "16")}

COMPARISONS = [  # (variant, its seeds, encoding, reference, reference's seeds, reference encoding)
    ("rope + random positions", rand, "rope", "committed rope", base, "rope"),
    ("sinusoidal + random positions", rand, "sinusoidal", "committed sinusoidal", base, "sinusoidal"),
    ("rope + random positions", rand, "rope", "committed none", base, "none"),
    ("sinusoidal + random positions", rand, "sinusoidal", "committed none", base, "none"),
    ("rope + random train and test positions", rtest, "rope", "committed rope", base, "rope"),
    ("sinusoidal + random train and test positions", rtest, "sinusoidal", "committed sinusoidal", base, "sinusoidal"),
    ("rope + random train and test positions", rtest, "rope", "committed none", base, "none"),
    ("sinusoidal + random train and test positions", rtest, "sinusoidal", "committed none", base, "none"),
    ("rope + random train and test positions", rtest, "rope", "same models, test at 0…s−1", rand, "rope"),
    ("sinusoidal + random train and test positions", rtest, "sinusoidal", "same models, test at 0…s−1", rand, "sinusoidal"),
    ("rope, NoPE layer 3", nope, "rope", "committed rope", base, "rope"),
    ("rope, NoPE layer 3", nope, "rope", "committed none", base, "none"),
    ("rope, NoPE layers 1,3", nope13, "rope", "committed rope", base, "rope"),
    ("rope, NoPE layers 1,3", nope13, "rope", "committed none", base, "none"),
    ("none, rand64 invocation (must be 0)", rand, "none", "committed none", base, "none"),
    ("none, nope3 invocation (must be 0)", nope, "none", "committed none", base, "none"),
    ("sinusoidal, nope3 invocation (must be 0)", nope, "sinusoidal", "committed sinusoidal", base, "sinusoidal"),
]

lines = []
for label, new, enc, against, old, ref in COMPARISONS:
    for task in ("copy", "reverse"):
        for n, name in LENGTHS.items():
            d = [100 * (a - b) for a, b in zip(new[(task, enc, n)], old[(task, ref, n)])]
            cells = ", ".join(f"{x:+.1f}" for x in d)
            lines.append((f"| {label} | {against} | {task} | {name} | {sum(d) / 5:+.1f} | {cells} |", sign_flip_p(d)))
# Holm (1979) over the comparisons of the study; the must-be-0 checks are not tests of it
family = [p for text, p in lines if "(must be 0)" not in text]
adjusted = iter(holm(family))
print("| variant | against | task | n | Δ mean | the 5 seed Δ (seeds 0–4) | p | p Holm |")
print("|---|---|---|---|---:|---|---:|---:|")
for text, p in lines:
    print(f"{text} {p:.4g} | {'—' if '(must be 0)' in text else f'{next(adjusted):.3g}'} |")
