"""The options of ``posenc bench --task lengthgen`` (no torch import until it runs); each sets the field
of :class:`~posenc_bench.experiment.lengthgen.LengthgenConfig` or ``LengthgenPlan`` whose flag it is,
and those check every value, naming the flag.

Examples::

    posenc bench --task lengthgen                                   # the default grid (see below)
    posenc bench --task lengthgen --lengthgen-tasks copy,reverse,parity,addition,passkey,recall \\
        --encodings none,rope,alibi,fire,kerple,sandwich,p_rope --seeds 5
    posenc bench --task lengthgen --encodings none,rope --rope-scaling yarn   # rotary scaled at test time
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from posenc import validate
from posenc.errors import UsageError
from posenc_bench.experiment.constraints import flag
from posenc_bench.flags import csv_list, encoding_names

DEFAULT_TASKS = "passkey,recall,sort"
DEFAULT_ENCODINGS = "none,sinusoidal,rope,alibi,fire,kerple"
DEFAULT_SEEDS = 3
FIT_CHECKS = 20
"""With ``--fit-accuracy``, a run measures its fit (and writes its checkpoint) this many times over ``--steps``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The lengthgen-only flags (the shared ones — --encodings, --seeds, --d-model, … — are the bench's)."""
    g = p.add_argument_group("--task lengthgen")
    g.add_argument("--lengthgen-tasks", default=DEFAULT_TASKS,
                   help=f"comma-separated: copy, reverse, sort, parity, addition, mode, count, passkey, recall (default {DEFAULT_TASKS})")  # fmt: skip
    g.add_argument("--train-length", type=int, default=8, help="L: training lengths are 1 … L (default 8)")
    g.add_argument(
        "--test-lengths",
        default="1,1.5,2,4",
        help="test lengths as multiples of L, > 1 (1 allowed too) (default 1,1.5,2,4)",
    )
    g.add_argument(
        "--passkey-lengths", default="1,2,4,8", help="the passkey task's multiples of L (default 1,2,4,8)"
    )
    g.add_argument(
        "--passkey-depths",
        default="0,0.25,0.5,0.75,1",
        help="depths in [0, 1] of the passkey in the filler (default 0,0.25,0.5,0.75,1)",
    )
    g.add_argument("--vocab", type=int, default=32, help="symbols of the tasks (default 32)")
    g.add_argument("--steps", type=int, default=800, help="training steps per run (default 800)")
    g.add_argument(
        "--fit-accuracy",
        type=float,
        default=None,
        metavar="X",
        help="train each run until its held-out exact match at L reaches X in (0, 1], checked every "
        f"--steps/{FIT_CHECKS} steps, with --steps as the budget (default: train --steps steps)",
    )
    g.add_argument(
        "--fit-examples",
        type=int,
        default=None,
        metavar="N",
        help="with --fit-accuracy: held-out examples per depth at L the criterion is measured on (default 256)",
    )
    g.add_argument("--n-test", type=int, default=64, help="test examples per length and depth (default 64)")
    g.add_argument(
        "--rope-scaling",
        default=None,
        choices=("linear", "ntk", "yarn"),
        help="also test rotary encodings with this context extension, factor = test/train tokens",
    )
    g.add_argument(
        "--random-positions",
        type=int,
        default=None,
        metavar="M",
        help="train on ordered random positions from 0 … M−1 (Ruoss et al. 2023)",
    )
    g.add_argument(
        "--no-rope-layers",
        default="",
        metavar="I,J",
        help="layers (0-based) without the attention-side encoding (NoPE layers)",
    )


def destinations() -> frozenset[str]:
    """The names (``args.steps``, …) of the lengthgen-only flags: the other tasks' messages never mean them."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return frozenset(action.dest for action in parser._actions)


def plan_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~posenc_bench.experiment.lengthgen.LengthgenPlan` of the parsed flags, checked (an
    error names the flag)."""
    from posenc_bench.experiment.lengthgen import LengthgenConfig, LengthgenPlan
    from posenc_bench.experiment.lengthgen_tables import REFERENCES

    if args.encoding_option:
        raise UsageError(
            "--encoding-option does not apply to --task lengthgen (register a variant by name instead)"
        )
    if args.fit_examples is not None and args.fit_accuracy is None:
        raise UsageError("--fit-examples applies only with --fit-accuracy (the criterion it measures)")
    base = LengthgenConfig(
        task="copy",
        encoding="none",
        seed=0,
        checkpoint_every=max(1, args.steps // (4 if args.fit_accuracy is None else FIT_CHECKS)),
        **_given(LengthgenConfig, args),
    )
    given = _given(LengthgenPlan, args) | {
        "encodings": encoding_names(args.encodings or DEFAULT_ENCODINGS, REFERENCES),
        "seeds": DEFAULT_SEEDS if args.seeds is None else args.seeds[1],
        "seed_start": 0 if args.seeds is None else args.seeds[0],
    }
    return LengthgenPlan(base, **given)


def _check_memory(plan: Any) -> None:
    """Refuse a grid whose model or longest test batch cannot fit in memory, before any is built.

    Training keeps four float32 copies of ``P = 2·V·d + 12·layers·d²`` weights (embedding and output
    head, attention 4·d² and feed-forward 8·d² per layer); testing holds, for ``n_test`` sequences of
    ``s`` tokens, the attention scores of a layer (``heads·s²`` each), its activations and the logits.
    """
    from posenc_bench.experiment.lengthgen import vocab_size

    b = plan.base
    v = vocab_size(b)
    weights = 2 * v * b.d_model + 12 * b.n_layers * b.d_model**2
    validate.fits_in_memory(
        f"a decoder of --d-model {b.d_model} × --layers {b.n_layers} with --vocab {b.vocab}",
        min(4 * 4 * weights, 10**300),
        advice="lower --d-model, --layers or --vocab",
    )
    for task in plan.tasks:
        lengths = "--passkey-lengths" if task == "passkey" else "--test-lengths"
        n = max(plan.test_lengths(task))
        for s in _tokens(task, n):
            validate.fits_in_memory(
                f"{lengths} × --train-length {b.train_length}: testing {plan.n_test} sequences (--n-test) "
                f"of {s if s < 10**9 else f'{min(s, 10**300):.3g}'} tokens ({task})",
                min(4 * plan.n_test * s * (2 * b.n_heads * s + v + 8 * b.d_model), 10**300),  # a float
                advice=f"lower {lengths} or --n-test",
            )


def _tokens(task: str, n: int) -> Iterator[int]:
    """The tokens of an example of ``task`` at length ``n``: first ``n`` (a lower bound: an example holds at
    least ``n`` tokens), then the count itself, which generates an example (too long to try at ``n = 10¹²``)."""
    from posenc_bench.data import lengthgen as data

    yield n
    yield data.sequence_length(task, n)


def _given(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` that flags set (its :func:`~posenc_bench.experiment.constraints.option`
    fields), as their flags gave them: a tuple field's comma-separated text as a tuple of its item type;
    a flag left at ``None`` leaves the field's default."""
    hints = typing.get_type_hints(cls)
    given = {}
    for item in dataclasses.fields(cls):
        if "flag" not in item.metadata:
            continue
        name = flag(item)
        value = getattr(args, name.removeprefix("--").replace("-", "_"))
        if isinstance(value, str) and typing.get_origin(hints[item.name]) is tuple:
            value = _items(name, value, typing.get_args(hints[item.name])[0])
        if value is not None:
            given[item.name] = value
    return given


def _items(name: str, text: str, kind: type) -> tuple[Any, ...]:
    """``text``, comma-separated, as a tuple of ``kind`` (``str``, ``int`` or ``float``)."""
    try:
        return tuple(kind(x) for x in csv_list(text))
    except ValueError:
        noun = "integers" if kind is int else "numbers"
        raise UsageError(f"{name} must be comma-separated {noun}, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    """Check every option, then train and test the grid; print the tables."""
    from posenc_bench.cli import check_device, check_threads

    check_threads(args.threads)
    plan = plan_from_args(args)
    _check_memory(plan)
    import torch

    from posenc_bench.experiment.lengthgen import build_model, run_lengthgen

    for name in plan.encodings:  # every encoding at these sizes, before any training
        config = dataclasses.replace(plan.base, task=plan.tasks[0], encoding=name)
        try:
            build_model(config)
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"--encodings {config.encoding} at --d-model {config.d_model} --heads {config.n_heads}: {exc}"
            ) from None
    check_device(args.device)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    out = validate.output_path(
        "--out", args.out if args.out is not None else Path("posenc-bench"), folder=True
    )
    torch.set_num_threads(args.threads)
    result = run_lengthgen(plan, out=out, device=device, progress=None if args.no_progress else print)
    print()
    print(result.markdown)
    print("written: " + ", ".join(str(p) for p in result.paths.values()))
    return 0
