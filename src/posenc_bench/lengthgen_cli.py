"""The options of ``posenc bench --task lengthgen`` and their checks (no torch import until it runs).

Examples::

    posenc bench --task lengthgen                                   # the default grid (see below)
    posenc bench --task lengthgen --lengthgen-tasks copy,reverse,parity,addition,passkey,recall \\
        --encodings none,rope,alibi,fire,kerple,sandwich,p_rope --seeds 5
    posenc bench --task lengthgen --encodings none,rope --rope-scaling yarn   # rotary scaled at test time
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from posenc import validate
from posenc.errors import UsageError
from posenc_bench.flags import csv_list, encoding_names

DEFAULT_TASKS = "passkey,recall,sort"
DEFAULT_ENCODINGS = "none,sinusoidal,rope,alibi,fire,kerple"
DEFAULT_SEEDS = 3
#: the decoder's sizes and training of the default grid, sized to run on one loaded CPU core
DEFAULTS: dict[str, Any] = {"d_model": 32, "n_heads": 4, "n_layers": 2, "batch_size": 32, "lr": 3e-3}


def _floats(flag: str, text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in csv_list(text))
    except ValueError:
        raise UsageError(f"{flag} must be comma-separated numbers, got {text!r}") from None


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


def plan_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~posenc_bench.experiment.lengthgen.LengthgenPlan` of the parsed flags, checked."""
    from posenc_bench.experiment.lengthgen import LengthgenConfig, LengthgenPlan

    encodings = encoding_names(args.encodings or DEFAULT_ENCODINGS, ("none", "rope"))
    try:
        no_rope = tuple(int(x) for x in csv_list(args.no_rope_layers))
    except ValueError:
        raise UsageError(
            f"--no-rope-layers must be comma-separated layer indices, got {args.no_rope_layers!r}"
        ) from None
    given = {key: getattr(args, "heads" if key == "n_heads" else key, None) for key in DEFAULTS}
    sizes: dict[str, Any] = {key: DEFAULTS[key] if value is None else value for key, value in given.items()}
    sizes["n_layers"] = args.layers if args.layers is not None else DEFAULTS["n_layers"]
    bad = [i for i in no_rope if not 0 <= i < sizes["n_layers"]]
    if bad:
        raise UsageError(
            f"--no-rope-layers: {bad} outside 0 … {sizes['n_layers'] - 1} (--layers {sizes['n_layers']})"
        )
    if args.encoding_option:
        raise UsageError(
            "--encoding-option does not apply to --task lengthgen (register a variant by name instead)"
        )
    try:
        base = LengthgenConfig(
            task="copy", encoding="none", seed=0, train_length=args.train_length, vocab=args.vocab,
            steps=args.steps, weight_decay=args.weight_decay, random_positions=args.random_positions,
            no_rope_layers=no_rope, checkpoint_every=max(1, args.steps // 4), **sizes,
        )  # fmt: skip
        plan = LengthgenPlan(
            base,
            tasks=csv_list(args.lengthgen_tasks),
            encodings=encodings,
            seeds=args.seeds if args.seeds is not None else DEFAULT_SEEDS,
            test_multiples=_floats("--test-lengths", args.test_lengths),
            passkey_multiples=_floats("--passkey-lengths", args.passkey_lengths),
            depths=_floats("--passkey-depths", args.passkey_depths),
            n_test=args.n_test,
            rope_scaling=args.rope_scaling,
        )
    except ValueError as exc:
        raise UsageError(flag_names(str(exc))) from None
    return plan


_FLAGS = {
    "test_multiples": "--test-lengths", "passkey_multiples": "--passkey-lengths", "passkey depths": "--passkey-depths",
    "train_length": "--train-length", "vocab=": "--vocab ", "vocab must": "--vocab must", "n_test": "--n-test",
    "steps must": "--steps must", "seeds must": "--seeds must", "batch_size": "--batch-size",
    "unknown lengthgen task": "--lengthgen-tasks: unknown task", "random_positions=": "--random-positions ",
}  # fmt: skip


def flag_names(message: str) -> str:
    """``message`` with the plan's field names replaced by the flags the user typed."""
    for field, flag in _FLAGS.items():
        message = message.replace(field, flag)
    return message


def run(args: argparse.Namespace) -> int:
    """Check every option, then train and test the grid; print the tables."""
    plan = plan_from_args(args)
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
    from posenc_bench.cli import check_device

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
