"""The tables of ``posenc bench --task lengthgen``: the paired tests, ``lengthgen.md`` and ``lengthgen.csv``.

Made from the grid's summary (:func:`posenc_bench.experiment.lengthgen.summarise`: per ``(task, encoding,
length)`` the mean, std and per-seed exact match, the no-skill line and the trivial-strategy floor); every
number here is a function of those, so :func:`posenc_bench.experiment.lengthgen.rewrite` re-makes the files
from ``lengthgen.json`` alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from posenc_bench.experiment.compare import csv_text, md_table
from posenc_bench.experiment.stats import holm, min_attainable_p, paired_interval, sign_flip_p

if TYPE_CHECKING:
    from posenc_bench.experiment.lengthgen import LengthgenConfig, LengthgenPlan

REFERENCES: tuple[str, ...] = ("none", "rope")
"""Every encoding is paired against these (Kazemnejad et al.'s NoPE, and the common default)."""

FIT_AT_L = 0.95
"""A run *fits* at the training length when its exact match at ``L`` is at least this (or the run's own
``fit_accuracy`` when it trained to one): the stated in-distribution criterion; beyond ``L`` an under-fitted
run is compared with fitted ones only as marked."""


def fitted(plan: LengthgenPlan, rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[bool]]:
    """Per (task, encoding), for each seed in seed order, whether the run fits at ``L`` (exact match at the
    training length ≥ :func:`fit_criterion`); empty where the grid does not test at ``L``."""
    at_l, criterion = plan.base.train_length, fit_criterion(plan)
    return {
        (r["task"], r["encoding"]): [v >= criterion for v in r["seeds"]] for r in rows if r["length"] == at_l
    }


def fit_criterion(plan: LengthgenPlan) -> float:
    """The exact match at ``L`` a fitted run reaches: the runs' ``fit_accuracy`` if they trained to one,
    else :data:`FIT_AT_L`."""
    return FIT_AT_L if plan.base.fit_accuracy is None else plan.base.fit_accuracy


def paired_tests(plan: LengthgenPlan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``encoding − reference`` per (task, length) for each reference of :data:`REFERENCES` that was run,
    over the seeds (each row's ``seeds`` values, in seed order): the mean, the Student t 95% CI with
    ``n − 1`` degrees of freedom (:func:`~posenc_bench.experiment.stats.paired_interval`; ``ci`` names
    it and its n), the exact sign-flip p, ``p_holm`` (Holm's adjustment over every test listed), and
    over the seeds where both runs fit at ``L`` (:func:`fitted`) their number ``fitted_pairs`` (``None``
    where ``L`` is not tested) and mean ``diff_fitted`` (``None`` when none fits)."""
    values = {(r["task"], r["encoding"], r["length"]): np.asarray(r["seeds"], dtype=np.float64) for r in rows}
    fit = fitted(plan, rows)
    paired: list[dict[str, Any]] = []
    for t in plan.tasks:
        for e in plan.encodings:
            for ref in REFERENCES:
                if ref == e or ref not in plan.encodings:
                    continue
                for n in plan.test_lengths(t):
                    diff = values[(t, e, n)] - values[(t, ref, n)]
                    interval = paired_interval([diff])
                    p = sign_flip_p(diff) if np.any(diff != 0) else 1.0
                    both = np.logical_and(fit[(t, e)], fit[(t, ref)]) if fit else None
                    k = None if both is None else int(both.sum())
                    paired.append({"task": t, "encoding": e, "reference": ref, "length": n,
                                   "diff": float(diff.mean()), "ci_low": interval.low, "ci_high": interval.high,
                                   "ci": interval.describe(), "p": p, "fitted_pairs": k,
                                   "diff_fitted": float(diff[both].mean()) if k else None})  # fmt: skip
    for test, adjusted in zip(paired, holm([q["p"] for q in paired]) if paired else [], strict=True):
        test["p_holm"] = float(adjusted)
    return paired


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown(plan: LengthgenPlan, tables: dict[str, Any], *, wall_seconds: float) -> str:
    """The result tables: accuracy per task (with its no-skill line), then the paired differences."""
    b = plan.base
    lines = [
        "# Length generalisation: exact-match accuracy (%) beyond the training length",
        "",
        f"Causal decoder d_model={b.d_model}, {b.n_heads} heads, {b.n_layers} layers; {_budget(b)} steps of "
        f"{b.batch_size} examples at lengths 1…L={b.train_length}, vocab {b.vocab}, lr {b.lr:g}; "
        f"{plan.seeds} seeds{_seed_range(plan)}; {plan.n_test} test examples per length"
        + (
            f" and passkey depth ({', '.join(f'{d:g}' for d in plan.depths)})"
            if "passkey" in plan.tasks
            else ""
        )
        + f". Training: {tables['train_tokens']} tokens in {tables['train_seconds']:.0f} s summed over the runs "
        f"({tables['train_tokens'] / max(tables['train_seconds'], 1e-9):.0f} tokens/s); this invocation "
        f"took {wall_seconds:.0f} s (runs found finished on disk are read back, not retrained).",
        "",
    ]
    fit = fitted(plan, tables["rows"])
    for t in plan.tasks:
        lengths = plan.test_lengths(t)
        lines += _accuracy_table(plan, tables, t, fit)
        for ref in REFERENCES:
            pairs = [p for p in tables["paired"] if p["task"] == t and p["reference"] == ref]
            if not pairs:
                continue
            lines += [
                f"Paired against `{ref}` (Δ points, 95% CI ({pairs[0]['ci']}), sign-flip p, Holm p):",
                "",
            ]
            lines += _paired_table(plan, pairs, lengths) + [""]
    p_min = min_attainable_p(plan.seeds)
    lines.append(
        f"With {plan.seeds} seeds the smallest attainable two-sided sign-flip p is {p_min:.3g}; "
        f"the CI is Student's t with {plan.seeds - 1} degrees of freedom over the {plan.seeds} seeds' paired "
        f"differences; Holm: the sign-flip p adjusted over all {len(tables['paired'])} paired tests of this file "
        f"(so no Holm p here can be below {min(1.0, len(tables['paired']) * p_min):.3g}). "
        "Trivial strategy: a rule that needs no position information beyond the sequence's start "
        "(`posenc_bench.data.lengthgen`), scored on the same test sets as the runs. "
        f"† fit at L: exact match at L ≥ {100 * fit_criterion(plan):g}% (k of n seeds); beyond L an encoding "
        "marked † is in part an under-fitted model, and a paired cell whose seeds did not all fit adds "
        '"fitted Δ (k)": the mean difference over the k seeds where both runs fit.' + _fit_note(plan)
    )
    return "\n".join(lines) + "\n"


def _paired_table(plan: LengthgenPlan, pairs: list[dict[str, Any]], lengths: list[int]) -> list[str]:
    """One reference's paired tests of a task: per encoding and length the Δ, its CI, p and Holm p."""
    by_encoding = {e: {p["length"]: p for p in pairs if p["encoding"] == e} for e in plan.encodings}
    shown = [(e,) for e, mine in by_encoding.items() if mine]
    columns = [
        (f"n={n}", [f"{100 * (q := by_encoding[e][n])['diff']:+.1f} {_ci(q)} p={q['p']:.2g} "
                    f"(Holm {q['p_holm']:.2g}){_fitted(q, plan.seeds)}" for (e,) in shown])
        for n in lengths
    ]  # fmt: skip
    return md_table(["encoding"], shown, columns, numeric=True, width=None)


def _accuracy_table(
    plan: LengthgenPlan, tables: dict[str, Any], t: str, fit: dict[tuple[str, str], list[bool]]
) -> list[str]:
    """Task ``t``'s section head and accuracy table: mean ± std per encoding and length (``†`` where not
    every seed fits at ``L``), the steps taken when runs trained to a fit criterion, chance and the floor."""
    lengths = plan.test_lengths(t)
    stops = _steps_taken(tables.get("fit"), t)
    cells = {(r["encoding"], r["length"]): r for r in tables["rows"] if r["task"] == t}
    chance = {c["length"]: c["accuracy"] for c in tables["chance"] if c["task"] == t}
    floor = {c["length"]: c for c in tables["floor"] if c["task"] == t}

    def accuracy(e: str, n: int) -> str:
        r = cells[(e, n)]
        scaled = f" ({plan.rope_scaling}: {_pct(r['scaled_mean'])})" if "scaled_mean" in r else ""
        return f"{_pct(r['mean'])} ± {_pct(r['std'])}{scaled}"

    labels = [
        e if all(ok := fit.get((t, e), [])) else f"{e} † ({sum(ok)}/{len(ok)} fit at L)"
        for e in plan.encodings
    ]
    columns = [
        (f"n={n}", [accuracy(e, n) for e in plan.encodings]
         + [f"{100 * chance[n]:.3g}", f"{100 * floor[n]['accuracy']:.3g}"])
        for n in lengths
    ]  # fmt: skip
    if stops:
        columns.append(("steps taken", [stops[e] for e in plan.encodings] + ["", ""]))
    keys = [(label,) for label in labels] + [("*no skill (chance)*",), ("*trivial strategy*",)]
    return [f"## {t}", "", *md_table(["encoding"], keys, columns, numeric=True, width=None), "",
            f"Trivial strategy: {floor[lengths[0]]['rule']}, scored on the same test sets.", ""]  # fmt: skip


def _budget(config: LengthgenConfig) -> str:
    """``800`` (every run trains that many steps), or ``up to 800`` when runs stop at their fit criterion."""
    return str(config.steps) if config.fit_accuracy is None else f"up to {config.steps}"


def _steps_taken(runs: list[dict[str, Any]] | None, task: str) -> dict[str, str]:
    """Per encoding of ``task``, the steps each seed's run trained (seed order) and how many reached the fit
    criterion, as ``"150, 200, 800 (2/3 reached)"``; empty when the runs trained a fixed number of steps."""
    by_encoding: dict[str, list[dict[str, Any]]] = {}
    for run in runs or []:
        if run["task"] == task:
            by_encoding.setdefault(run["encoding"], []).append(run)
    return {
        e: ", ".join(str(r["step"]) for r in mine)
        + f" ({sum(r['reached'] for r in mine)}/{len(mine)} reached)"
        for e, mine in by_encoding.items()
    }


def _fit_note(plan: LengthgenPlan) -> str:
    """What "steps taken" means, for runs trained to a fit criterion (nothing otherwise)."""
    b = plan.base
    if b.fit_accuracy is None:
        return ""
    return (
        f" Steps taken: each run trained until its exact match at L on a held-out in-distribution set "
        f"({b.fit_examples} examples per depth, apart from the test sets), measured every {b.checkpoint_every} "
        f"steps, reached {100 * b.fit_accuracy:g}%, or for the budget of {b.steps} steps (not reached)."
    )


def _fitted(test: dict[str, Any], seeds: int) -> str:
    """`` fitted Δ (k)`` when not every seed of the pair fits at ``L`` (nothing when all do or ``L`` is untested)."""
    k = test.get("fitted_pairs")
    if k is None or k == seeds:
        return ""
    return f" fitted {100 * test['diff_fitted']:+.1f} ({k})" if k else " fitted: none (0)"


def _seed_range(plan: LengthgenPlan) -> str:
    """`` (seeds 5–9)`` for a grid that does not start at seed 0; nothing for ``0 … N − 1``."""
    seeds = plan.seed_values()
    return f" (seeds {seeds[0]}–{seeds[-1]})" if plan.seed_start else ""


def _ci(test: dict[str, Any]) -> str:
    if test["ci_low"] is None or np.isnan(test["ci_low"]):
        return "[n/a]"
    return f"[{100 * test['ci_low']:+.1f}, {100 * test['ci_high']:+.1f}]"


def table_csv(tables: dict[str, Any]) -> str:
    """``lengthgen.csv``: mean, std and the per-seed values per (task, encoding, length), then the no-skill
    and trivial-strategy lines."""
    rows: list[list[Any]] = [["task", "encoding", "length", "mean", "std", "seeds"]]
    rows += [[r["task"], r["encoding"], r["length"], r["mean"], r["std"], ";".join(map(str, r["seeds"]))]
             for r in tables["rows"]]  # fmt: skip
    rows += [[c["task"], "no_skill", c["length"], c["accuracy"], 0.0, ""] for c in tables["chance"]]
    rows += [[c["task"], "trivial_strategy", c["length"], c["accuracy"], 0.0, ""] for c in tables["floor"]]
    return csv_text(rows)
