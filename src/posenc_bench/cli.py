r"""``posenc bench``: train every (encoding, scale, split, seed) run, print one table, write md/csv/json/png.

Examples::

    posenc bench                                   # synthetic data, defaults (~3 CPU-minutes)
    posenc bench --task detect --dataset msl       # unsupervised: train on nominal arrays, score test steps
    posenc bench --dataset msl --seeds 5 --encodings none,sinusoidal,dft,learned,rope,alibi
    posenc bench --dataset msl --scale native,matched --splits 3 --seeds 5
    posenc bench --dataset msl --protocol random_windows   # LEAKY split, to measure leakage
    posenc bench --dataset probes --window 16 --lags 1,2,4,8,15 --seeds 2   # accuracy vs lag k
    posenc bench --dataset msl --model spatiotemporal --protocol dfstrans --splits 5 --seeds 1 \
        --encodings dft,dfstrans_dft                      # the DFStrans reproduction (LEAKY protocol)
    torchrun --nproc_per_node 2 -m posenc bench ...   # data parallel (gloo on CPU, NCCL on GPU)

Runs are resumable: an interrupted benchmark re-run with the same ``--out`` skips finished
runs and resumes the interrupted one from its last epoch. Processes started together on one
``--out`` share the runs: each run is trained by the process that claims it; the others wait for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from posenc import registry, validate
from posenc.errors import UsageError
from posenc_bench import lengthgen_cli, plugin
from posenc_bench.experiment.axes import (
    DETECTORS,
    SCALE_POLICIES,
    TASKS,
    DataAxis,
    ModelAxis,
    ProtocolAxis,
    TaskAxis,
    TrainingAxis,
)
from posenc_bench.experiment.config import BenchPlan, RunConfig, resolve_encoding_options
from posenc_bench.experiment.constraints import Interval, Options
from posenc_bench.experiment.constraints import flag as _flag
from posenc_bench.flags import csv_list, encoding_names

DEFAULT_ENCODINGS = "none,sinusoidal,rope"  # the no-order control, the reference, the one that learns order
ALWAYS = ("none", "sinusoidal")  # the no-order control and the reference of the paired test
#: default d_model, heads of the models whose sizes differ from ModelAxis' (fast on 2 CPU cores)
DEFAULT_SIZES = {"spatiotemporal": (16, 2)}
#: --task detect's own training defaults (those of docs/results/msl-detect): a forecaster's loss on
#: nominal data is smooth, so larger batches, a smaller lr and a short patience suffice.
DETECT_TRAINING = {"patience": 3, "batch_size": 32, "lr": 1e-3}


def _plain(doc: str | None) -> str:
    """The module docstring as help text: without reStructuredText's ````literal```` quotes and ``::`` markers."""
    return re.sub(r"::$", ":", (doc or "").replace("``", ""), flags=re.M)


def _key_value(flag: str) -> Any:
    def parse(text: str) -> tuple[str, Any]:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{flag} must be KEY=VALUE, got {text!r}")
        try:
            return key, json.loads(value)
        except json.JSONDecodeError:
            return key, value

    return parse


_option = _key_value("--dataset-option")


#: Run fields whose default depends on other flags (:func:`_base`): their flag defaults to ``None`` and its
#: help gives each default.
CONTEXTUAL = {
    "window": "default {default}; --model spatiotemporal: n_windows × window_length",
    "stride": "default window // 2; --model spatiotemporal: window, no overlap",
    **{
        key: "default {default}; "
        + "; ".join(f"--model {m} {sizes[i]}" for m, sizes in DEFAULT_SIZES.items())
        for i, key in enumerate(("d_model", "n_heads"))
    },
    **{key: f"default {{default}}; --task detect {value}" for key, value in DETECT_TRAINING.items()},
    "monitor": "default {default}; --protocol dfstrans: loss, as its authors stop",
}
#: The axes whose fields are flags, in --help order.
FLAG_AXES = (DataAxis, ProtocolAxis, ModelAxis, TaskAxis, TrainingAxis)


def add_axis_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """One flag per axis field that declares a help text: its type and choices from the field's constraint,
    its default from the field (``None`` for the fields of :data:`CONTEXTUAL`)."""
    for axis in FLAG_AXES:
        constraints = axis._parameter_constraints
        for item in dataclasses.fields(axis):
            if "help" not in item.metadata:
                continue
            constraint = constraints[item.name]
            text: str = item.metadata["help"]
            note = CONTEXTUAL.get(item.name, "" if "{default" in text else "default {default}")
            help_text = (text + (f" ({note})" if note else "")).format(default=item.default)
            p.add_argument(
                _flag(item),
                type=constraint.kind if isinstance(constraint, Interval) else str,
                choices=constraint.values if isinstance(constraint, Options) else None,
                default=None if item.name in CONTEXTUAL else item.default,
                help=help_text,
            )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help=plugin.COMMANDS["bench"],
        description=_plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--task",
        default=TaskAxis.task,
        choices=TASKS,
        help="classify: supervised window classification on blocked splits (default); detect: train a "
        "forecaster/reconstructor on the nominal training arrays only, score test steps by error; "
        "lengthgen: a causal decoder on algorithmic tasks, trained short and tested long",
    )
    p.add_argument(
        "--detector",
        default=TaskAxis.detector,
        help=f"--task detect: model(s), comma-separated: {', '.join(DETECTORS)} (default {TaskAxis.detector})",
    )
    add_axis_flags(p)
    p.add_argument(
        "--dataset-option",
        action="append",
        type=_option,
        default=[],
        metavar="KEY=VALUE",
        help="keyword option for the dataset loader (repeatable; VALUE parsed as JSON if it can be)",
    )
    p.add_argument(
        "--encodings",
        default=None,
        help=f"comma-separated registry names (default {DEFAULT_ENCODINGS}, --task lengthgen "
        f"{lengthgen_cli.DEFAULT_ENCODINGS}; "
        f"{' and '.join(ALWAYS)} are always included); valid: {', '.join(registry.names())}",
    )
    p.add_argument(
        "--encoding-option",
        action="append",
        type=_key_value("--encoding-option"),
        default=[],
        metavar="[ENCODING.]KEY=VALUE",
        help="constructor option of the encodings that take KEY, or of ENCODING only (repeatable; "
        "e.g. rope.layout=adjacent, t5.num_buckets=16; VALUE parsed as JSON if it can be); "
        "recorded in each run's config.json and part of the run's identity",
    )
    p.add_argument(
        "--scale",
        default=None,
        help=f"scale policies of additive encodings, comma-separated: {', '.join(SCALE_POLICIES)} "
        "(default native; for --dataset probes matched)",
    )
    p.add_argument(
        "--lags",
        default=None,
        help="--dataset probes: distances k, comma-separated (default every k the window holds); "
        "the task is --dataset-option task=order|lag",
    )
    p.add_argument(
        "--seeds",
        type=seed_range,
        default=None,
        help="training seeds per (encoding, scale, split): N for seeds 0…N-1, or A-B for seeds A…B, e.g. 5-9 "
        "(default 5; --task lengthgen 3); runs of seeds already done are found, not retrained",
    )
    p.add_argument("--splits", type=int, default=1, help="split seeds (repeated blocked splits, default 1)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (default ./posenc-bench; runs are kept per dataset under runs/)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: CUDA if available, else CPU)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads per process (default 1: runs share the machine's cores; see "
        "benchmarks/README.md for what more threads gave)",
    )
    p.add_argument("--no-shuffle-control", action="store_true", help="skip the time-shuffled test evaluation")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the untrained baselines (gradient boosting on order-free summaries and on lagged "
        "cross-channel products, the matrix profile, max |x|, and the synthetic data's oracle); they are "
        "stored under OUT/baselines/ and read again on a re-run",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--verify",
        type=Path,
        default=None,
        metavar="DIR",
        help="re-run the runs of DIR/results.json (its grid; other grid flags are ignored) into --out "
        "(default ./posenc-verify, must hold no runs) and report each run's largest deviation",
    )
    lengthgen_cli.add_arguments(p)
    p.set_defaults(func=run)


#: RunConfig and BenchPlan fields whose flag has another name.
CONFIG_FLAGS = {
    **{
        item.name: _flag(item)
        for axis in FLAG_AXES
        for item in dataclasses.fields(axis)
        if item.metadata.get("flag")
    },
    "scales": "--scale",
    "detectors": "--detector",
}


def flag_names(message: str, args: argparse.Namespace) -> str:
    """``message`` with each option name (``batch_size``, ``n_heads``) written as its flag (``--batch-size``),
    and each ``name=value`` as the flag and its value (``--window 30``); the --task lengthgen flags are left
    out ("512 time steps" is no ``--steps``)."""
    skip = {"func", "dataset", *lengthgen_cli.destinations()}
    names = {
        **{dest: "--" + dest.replace("_", "-") for dest in vars(args) if dest not in skip},
        **CONFIG_FLAGS,
    }
    pattern = (
        r"(?<![-\w'])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b(=(?=\S))?"
    )
    return re.sub(pattern, lambda m: names[m.group(1)] + (" " if m.group(2) else ""), message)


#: ``--threads`` at most this many per CPU core: more only contend (torch crashes far above).
THREADS_PER_CORE = 4


def check_threads(threads: int) -> None:
    """Refuse a ``--threads`` outside ``1 … THREADS_PER_CORE × cores`` before torch sees it (it segfaulted at
    100000 and overflowed at 10**12)."""
    most = THREADS_PER_CORE * (os.cpu_count() or 1)
    if not 1 <= threads <= most:
        raise UsageError(
            f"--threads must be an int in [1, {most}] ({THREADS_PER_CORE} per CPU core), got {threads}"
        )


def check_device(text: str | None) -> None:
    """Refuse a ``--device`` torch cannot parse or this machine does not have (before any work)."""
    if text is None:
        return
    import torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise UsageError(f"--device must be cpu, cuda or cuda:N, got {text!r}") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise UsageError(f"--device {text}: CUDA is not available on this machine; use --device cpu")
        if device.index is not None and device.index >= count:
            raise UsageError(
                f"--device {text}: this machine has {count} CUDA device(s), cuda:0 … cuda:{count - 1}"
            )
    elif device.type != "cpu":
        raise UsageError(f"--device must be cpu, cuda or cuda:N, got {text!r}")


def _given(args: argparse.Namespace, defaults: dict[str, Any]) -> dict[str, Any]:
    """Each of ``defaults``' fields as its flag gave it, else that default."""
    given = {key: getattr(args, "heads" if key == "n_heads" else key) for key in defaults}
    return {key: default if given[key] is None else given[key] for key, default in defaults.items()}


def _sizes(args: argparse.Namespace) -> dict[str, Any]:
    """--d-model and --heads, where not given the model's own default (:data:`DEFAULT_SIZES`)."""
    d_model, n_heads = DEFAULT_SIZES.get(args.model, (ModelAxis.d_model, ModelAxis.n_heads))
    return _given(args, {"d_model": d_model, "n_heads": n_heads})


def _default_stride(model: ModelAxis, window: int) -> int:
    """Non-overlapping windows for the spatio-temporal model (as Labaien et al. 2023 cut segments), else half."""
    return window if model.spatiotemporal else max(1, window // 2)


def _training(args: argparse.Namespace, task: TaskAxis, protocol: ProtocolAxis) -> TrainingAxis:
    """The training flags; where one is not given, the detect task's own default (:data:`DETECT_TRAINING`)
    and, for protocol dfstrans, early stopping on validation loss (as Labaien et al. 2023 stop)."""
    contextual = _given(
        args,
        {
            "monitor": "loss" if protocol.dfstrans else TrainingAxis.monitor,
            **{
                key: DETECT_TRAINING[key] if task.detect else getattr(TrainingAxis, key)
                for key in DETECT_TRAINING
            },
        },
    )
    return TrainingAxis(epochs=args.epochs, weight_decay=args.weight_decay, **contextual)


def _data(args: argparse.Namespace, model: ModelAxis) -> DataAxis:
    """The data flags, the window's and stride's defaults from the model, --lags as the probes' ``distances``."""
    window = args.window
    if window is None:
        window = model.n_windows * model.window_length if model.spatiotemporal else DataAxis.window
    stride = args.stride if args.stride is not None else _default_stride(model, window)
    data = DataAxis(
        dataset=args.dataset, dataset_options=dict(args.dataset_option), window=window, stride=stride
    )
    if data.probes:
        return _probe_data(data, args.lags)
    if args.lags is not None:
        raise ValueError(f"--lags applies to --dataset probes only, got --dataset {args.dataset!r}")
    return data


def _probe_data(data: DataAxis, lags: str | None) -> DataAxis:
    """The probes' data with ``--lags`` as their ``distances``, each ``1 <= k <= max_distance(task, window)``
    (:mod:`posenc_bench.data.probes`), and the probe windows of every distance checked to fit in memory."""
    from posenc_bench.data.probes import MIN_WINDOW, N_FEATURES, PROBE_TASKS, ProbeSuite, max_distance

    if data.window < MIN_WINDOW:
        raise UsageError(f"--window must be >= {MIN_WINDOW} for --dataset probes, got {data.window}")
    task = data.dataset_options.get("task", ProbeSuite.task)
    if task not in PROBE_TASKS:  # quoted: "task" alone would be rewritten as the bench's --task
        allowed = " or ".join(f"'task={t}'" for t in PROBE_TASKS)
        raise UsageError(f"--dataset-option 'task={task}' must be {allowed}")
    largest = max_distance(task, data.window)
    distances = None if lags is None else _lags(lags, largest, data.window, task)
    count = largest if distances is None else len(distances)  # none given: every k the window holds
    windows = count * (
        data.dataset_options.get("n_train", ProbeSuite.n_train)
        + 2 * data.dataset_options.get("n_eval", ProbeSuite.n_eval)
    )
    validate.fits_in_memory(
        f"--window {data.window}: {windows} probe windows ({count} distances)",
        min(4 * N_FEATURES * windows * data.window, 10**300),
        advice="lower --window or choose fewer --lags",
    )
    if distances is None:
        return data
    return dataclasses.replace(data, dataset_options={**data.dataset_options, "distances": distances})


def _lags(text: str, largest: int, window: int, task: str) -> list[int]:
    """``--lags`` as distinct distances ``1 <= k <= largest`` (the largest the probe ``task`` fits in ``window``)."""
    try:
        distances = [int(k) for k in csv_list(text)]
    except ValueError:
        raise ValueError(f"--lags must be comma-separated integers, got {text!r}") from None
    if not distances:
        raise UsageError(f"--lags must name at least one distance k, got {text!r}")
    repeated = next((k for k in distances if distances.count(k) > 1), None)
    if repeated is not None:
        raise UsageError(f"--lags must not repeat a distance, got {repeated} twice")
    bad = next((k for k in distances if not 1 <= k <= largest), None)
    if bad is not None:
        # 'task=lag' quoted: the flag names of the message are rewritten, and this one is a dataset option
        need = "" if task == "order" else f" - 1 (k <= {largest}) with --dataset-option 'task={task}'"
        need = need or f" (k <= {largest})"
        raise UsageError(f"--lags must be distances k with 1 <= k < --window {window}{need}, got {bad}")
    return distances


def seed_range(text: str) -> tuple[int, int]:
    """``--seeds``: ``N`` (seeds ``0 … N−1``) or ``A-B`` (seeds ``A … B``, both included), as ``(first, count)``.

    A count is checked where the plan is made (its message names ``--seeds``); a range must read ``A-B``
    with ``0 <= A <= B``."""
    first, dash, last = text.strip().partition("-")
    try:
        start, end = (int(first), int(last)) if dash else (0, None)
        count = int(first) if end is None else end - start + 1
    except ValueError:
        start, count = -1, 0
    if (dash and (start < 0 or count < 1)) or start < 0:
        raise argparse.ArgumentTypeError(
            f"--seeds must be a count N (seeds 0…N-1) or a range A-B with 0 <= A <= B, got {text!r}"
        )
    return start, count


def _base(args: argparse.Namespace, detectors: tuple[str, ...]) -> RunConfig:
    """The run every grid point varies (RunConfig checks every value and names the field)."""
    model = ModelAxis(
        model=args.model,
        n_windows=args.n_windows,
        window_length=args.window_length,
        **_sizes(args),
        n_layers=args.layers,
        dropout=args.dropout,
    )
    protocol = ProtocolAxis(protocol=args.protocol, anomaly_percent=args.anomaly_percent)
    task = TaskAxis(
        task=args.task,
        detector=detectors[0] if detectors else args.detector,
        horizon=args.horizon,
        smoothing=args.smoothing,
        holdout=args.holdout,
    )
    return RunConfig.from_axes(_data(args, model), protocol, model, task, _training(args, task, protocol))


def _check_encodings_fit(base: RunConfig, encodings: tuple[str, ...]) -> None:
    """The spatio-temporal model's encodings index windows: each must be faithful for ``n_windows``."""
    if not base.axes.model.spatiotemporal:
        return
    for name in encodings:
        limit = registry.get(name).faithful_length
        if limit is not None and base.n_windows > limit(base.d_model):
            raise ValueError(
                f"--n-windows {base.n_windows}: encoding {name!r} is faithful only for "
                f"{limit(base.d_model)} positions at --d-model {base.d_model}; use fewer windows "
                f"or a larger --d-model"
            )


def plan_from_args(args: argparse.Namespace) -> BenchPlan:
    """The validated :class:`BenchPlan` of parsed arguments (raises ``ValueError`` naming the bad field;
    :func:`flag_names` writes it as the flag)."""
    encodings = encoding_names(args.encodings or DEFAULT_ENCODINGS, ALWAYS)
    check_threads(args.threads)
    detectors = csv_list(args.detector)
    base = _base(args, detectors)
    probes = base.axes.data.probes
    _check_encodings_fit(base, encodings)
    encoding_options = resolve_encoding_options(encodings, args.encoding_option)
    if encoding_options:  # build each optioned encoding once: a bad value fails before any training
        from posenc.nn import build_encoding

        for name, opts in encoding_options.items():
            try:
                build_encoding(name, d_model=base.d_model, n_heads=base.n_heads, max_len=base.window, **opts)
            except (TypeError, ValueError) as exc:  # the encoding names its parameter: say the flag too
                given = " ".join(f"{name}.{k}={json.dumps(v)}" for k, v in opts.items())
                raise UsageError(f"--encoding-option {given}: {exc}") from None
    return BenchPlan(
        base,
        encodings,
        csv_list(args.scale if args.scale is not None else ("matched" if probes else "native")),
        seeds=5 if args.seeds is None else args.seeds[1],
        seed_start=0 if args.seeds is None else args.seeds[0],
        splits=args.splits,
        encoding_options=encoding_options,
        shuffle_control=not (args.no_shuffle_control or probes),
        baseline=not (args.no_baseline or probes),
        detectors=detectors,
    )


def run_verify(args: argparse.Namespace) -> int:
    """``--verify DIR``: re-run DIR's runs and print each one's largest deviation (:mod:`posenc_bench.experiment.verify`)."""
    import torch

    from posenc_bench.experiment.bench import run_bench
    from posenc_bench.experiment.verify import verify

    check_device(args.device)
    check_threads(args.threads)
    torch.set_num_threads(args.threads)
    out = validate.output_path(
        "--out", args.out if args.out is not None else Path("posenc-verify"), folder=True
    )
    _, text = verify(
        args.verify,
        out=out,
        run=lambda plan, where: (
            run_bench(plan, out=where, device=args.device, progress=not args.no_progress).summary.runs
        ),
    )
    print()
    print(text)
    (out / "verify.md").write_text(text, encoding="utf-8")
    print(f"written: {out / 'verify.md'}")
    return 0


def run(args: argparse.Namespace) -> int:
    if TaskAxis(task=args.task).lengthgen:
        return lengthgen_cli.run(args)
    import torch

    from posenc_bench.experiment.bench import run_bench
    from posenc_bench.experiment.distributed import init_world, shutdown
    from posenc_bench.experiment.train import TrainingDiverged

    if args.verify is not None:
        return run_verify(args)
    try:
        plan = plan_from_args(args)
    except ValueError as exc:  # RunConfig and BenchPlan name their fields: say the flags the user typed
        raise UsageError(flag_names(str(exc), args)) from None
    check_device(args.device)
    # each layer holds about 12·d² weights (attention 4·d², feed-forward 8·d²); training keeps four
    # float32 copies (weights, gradients, two AdamW moments)
    d_model, layers = (
        plan.base.d_model,
        plan.base.n_layers,
    )  # resolved: --d-model may be left to the model's default
    validate.fits_in_memory(
        f"a model of --d-model {d_model} × --layers {layers}",
        4 * 4 * 12 * layers * d_model**2,
        advice="lower --d-model or --layers",
    )
    out = validate.output_path(
        "--out", args.out if args.out is not None else Path("posenc-bench"), folder=True
    )
    torch.set_num_threads(args.threads)
    world = init_world()
    try:
        result = run_bench(plan, out=out, device=args.device, world=world, progress=not args.no_progress)
    except TrainingDiverged as exc:
        raise UsageError(
            str(exc).replace(f"lr={exc.lr}", f"--lr {exc.lr}").replace("smaller lr", "smaller --lr")
        ) from None
    except UsageError as exc:  # the data's checks (a window longer than a series) name fields: say the flags
        raise type(exc)(flag_names(str(exc), args)) from None
    finally:
        shutdown(world)
    if world.is_main:
        print()
        print(summary(result))
    return 0


def summary(result: Any) -> str:
    """What ``posenc bench`` prints at the end: a comparison's headline (the tables are in ``results.md``),
    another report's table; then the files written."""
    from posenc_bench.experiment.compare import Comparison
    from posenc_bench.experiment.headline import headline

    paths = list(result.paths.values())
    md = result.paths.get("md")
    if (
        isinstance(result.summary, Comparison)
        and md is not None
        and all(p.parent == md.parent for p in paths)
    ):
        others = ", ".join(p.name for p in paths if p != md)
        return headline(result.summary, full=md) + f"\nwritten beside it: {others}"
    written = "written: " + ", ".join(map(str, paths))
    return result.table + "\n" + written
