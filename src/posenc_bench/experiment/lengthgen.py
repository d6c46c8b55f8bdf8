"""``--task lengthgen``: train a causal decoder on lengths ``≤ L``, measure exact match at ``L … 4L``.

One run is one ``(task, encoding, seed)``. Its training batches are a function of ``(seed, task,
step)`` and its test sets of ``(seed, task, length, depth)``, so every encoding of a seed sees the
same data (the comparison is paired) and a resumed run ends where an uninterrupted one would.

Per run, under ``ROOT/runs/lengthgen/<task>-L<L>/<encoding>[_<option>_<value>…]/seed<s>/``
(DESIGN "Conventions"; files written atomically): ``config.json`` (the resolved settings),
``log.csv`` (loss, tokens/s and any fit check per logged step), ``checkpoint.pt`` (model, optimiser, step;
rewritten every ``checkpoint_every`` steps, removed when the run ends), ``encoding.pt`` (the trained
encoding module's ``state_dict``, on the CPU; empty for parameter-free encodings and ``none``: what
:mod:`~posenc_bench.experiment.lengthgen_analysis` measures) and ``metrics.json`` (exact-match
accuracy per test length, per passkey depth, with rotary scaling when asked, and, for a run trained to
a fit criterion, where it stopped: ``fit``; a :class:`~posenc_bench.experiment.records.LengthgenRecord`).
A run is done when ``metrics.json`` and ``encoding.pt`` are both there. Every run is claimed, checked,
resumed and recorded by the shared run store (:func:`posenc_bench.experiment.runs.execute` with
:class:`LengthgenRuns`), so a re-run reads back finished runs whose settings match, resumes the others
from their checkpoint, refuses a folder holding other settings, moves a run tested on other test sets
aside as stale, and processes on one ``--out`` share the grid.

Exact match under teacher forcing equals greedy decoding's: a sequence whose every answer token
is the argmax given the true prefix is also the sequence greedy decoding writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from posenc import registry
from posenc.errors import UsageError
from posenc.nn import randomized_positions
from posenc_bench.data import lengthgen as data
from posenc_bench.decoder import CausalDecoder
from posenc_bench.experiment import lengthgen_analysis
from posenc_bench.experiment.axes import check_encoding_names, check_encoding_options
from posenc_bench.experiment.config import identity_version
from posenc_bench.experiment.constraints import (
    LEARNING_RATE,
    POSITIVE_INT,
    REPEATS,
    SEED,
    WEIGHT_DECAY,
    Constraints,
    Interval,
    NoneOr,
    Options,
    Satisfies,
    check_parameters,
    option,
    parameter_name,
)
from posenc_bench.experiment.figures import lengthgen_plot
from posenc_bench.experiment.files import write_text_atomic
from posenc_bench.experiment.lengthgen_tables import fitted as fitted
from posenc_bench.experiment.lengthgen_tables import markdown, paired_tests, table_csv
from posenc_bench.experiment.records import FitReached, LengthgenRecord
from posenc_bench.experiment.runs import (
    CHECKPOINT,
    LOG,
    METRICS,
    Identity,
    RunKind,
    Session,
    UnusableOutput,
    claim_each,
    execute,
    intact,
    log_csv,
    read_json,
    resumed,
    save_checkpoint,
    write_config,
)
from posenc_bench.experiment.torch_files import UnusableFile, load_state, save_state
from posenc_bench.experiment.train import Bar

SCALINGS: tuple[str, ...] = ("linear", "ntk", "yarn")
"""Rotary context-extension types applied at test time (:mod:`posenc.nn.rope_types`)."""

ENCODING = "encoding.pt"
"""A finished run's trained encoding: the ``state_dict`` of its decoder's encoding module."""

MAX_POSITION = Interval(int, 1, 2**20)
"""``--random-positions M``: every training step draws a permutation of ``0 … M − 1`` (8·M bytes)."""

FIT_ACCURACY = Interval(float, 0, 1, closed="right")
"""``--fit-accuracy``: the held-out exact match at ``L`` that stops training, in ``(0, 1]``."""

FIT_EXAMPLES = Interval(int, 1, 2**20)
"""``--fit-examples``: held-out examples per depth at ``L`` that the fit criterion is measured on."""


@dataclass(frozen=True)
class LengthgenConfig:
    """The settings of one run (its ``config.json``); every field is part of the run's identity.

    ``fit_accuracy``: when set, training stops at the first checkpoint (every ``checkpoint_every``
    steps) where exact match on ``fit_examples`` held-out examples per depth at ``L``
    (:func:`fit_accuracy`) reaches it, ``steps`` being the budget; the run's metrics then record ``fit``
    (:func:`_train`). The criterion is checked at every checkpoint and the first crossing stops, so a
    small held-out set stops runs on a lucky draw; 256 examples by default (a binomial standard error of
    1.4 points at 95 %, against 2.7 at the test sets' 64; measured in ``docs/results/lengthgen/copy-fit``).
    Left unset, both are left out of :meth:`to_json`, so a run's identity is what it was before the
    fields existed.

    Only ``posenc bench --task lengthgen``'s flags set it: each field a flag sets is an
    :func:`~posenc_bench.experiment.constraints.option`, and an error names that flag
    (:func:`~posenc_bench.experiment.constraints.check_parameters` with ``flags``).
    """

    task: str
    encoding: str
    seed: int
    train_length: int = option(8)
    vocab: int = option(16)
    d_model: int = option(32)
    n_heads: int = option(4, flag="--heads")
    n_layers: int = option(2, flag="--layers")
    steps: int = option(800)
    batch_size: int = option(32)
    lr: float = option(3e-3)
    weight_decay: float = option(0.0)
    encoding_options: dict[str, Any] = field(default_factory=dict)
    random_positions: int | None = option(None)
    no_rope_layers: tuple[int, ...] = option(())
    fit_accuracy: float | None = option(None)
    fit_examples: int = option(256)
    checkpoint_every: int = 100

    _parameter_constraints: ClassVar[Constraints] = {
        "task": Satisfies(lambda _, name: data.task(name)),
        "encoding": Satisfies(lambda _, name: registry.get(name)),
        "seed": SEED,
        "train_length": POSITIVE_INT,
        "vocab": POSITIVE_INT,
        "d_model": POSITIVE_INT,
        "n_heads": POSITIVE_INT,
        "n_layers": POSITIVE_INT,
        "steps": POSITIVE_INT,
        "batch_size": POSITIVE_INT,
        "lr": LEARNING_RATE,
        "weight_decay": WEIGHT_DECAY,
        "encoding_options": Satisfies(check_encoding_options),
        "random_positions": NoneOr(MAX_POSITION),
        "fit_accuracy": NoneOr(FIT_ACCURACY),
        "fit_examples": FIT_EXAMPLES,
        "checkpoint_every": POSITIVE_INT,
    }

    def __post_init__(self) -> None:
        check_parameters(self, flags=True)
        bad = [i for i in self.no_rope_layers if not 0 <= i < self.n_layers]
        if bad:
            layers = parameter_name(self, "n_layers")
            raise UsageError(
                f"{parameter_name(self, 'no_rope_layers')}: {bad} outside 0 … {self.n_layers - 1} "
                f"({layers} {self.n_layers})"
            )

    def directory(self, root: Path) -> Path:
        """``root/runs/lengthgen/<task>-L<L>/<encoding>[_<option>_<value>…][-rand<M>]/seed<s>``."""
        name = self.encoding + "".join(
            f"_{k}_{json.dumps(v, sort_keys=True)}" for k, v in sorted(self.encoding_options.items())
        )
        if self.random_positions:
            name += f"-rand{self.random_positions}"
        if self.no_rope_layers:
            name += "-nope" + "_".join(map(str, self.no_rope_layers))
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in name)
        return root / "runs" / "lengthgen" / f"{self.task}-L{self.train_length}" / safe / f"seed{self.seed}"

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["no_rope_layers"] = list(self.no_rope_layers)
        if self.fit_accuracy is None:  # the identity of every run trained before the fields existed
            del out["fit_accuracy"], out["fit_examples"]
        return out


def _check_tasks(name: str, tasks: tuple[str, ...]) -> None:
    """At least one task, each a known one (:data:`posenc_bench.data.lengthgen.TASKS`)."""
    unknown = [t for t in tasks if t not in data.TASKS]
    if unknown or not tasks:
        what = f"unknown task {', '.join(map(repr, unknown))}" if unknown else "no task"
        raise UsageError(f"{name}: {what}; valid: {', '.join(data.TASKS)}")


def _check_multiples(name: str, multiples: tuple[float, ...]) -> None:
    """Test lengths beyond ``L``: finite multiples > 1 (1 itself also), at least one."""
    if any(math.isinf(m) for m in multiples):
        raise UsageError(f"{name} must be finite numbers, got {list(multiples)}")
    beyond = [m for m in multiples if m != 1.0]
    if not beyond or not all(m > 1.0 for m in beyond):
        raise UsageError(
            f"{name} must exceed the training length (multiples > 1 of L; 1 itself is also allowed), "
            f"got {list(multiples)}"
        )


def _check_depths(name: str, depths: tuple[float, ...]) -> None:
    """Passkey depths: at least one, each in ``[0, 1]``."""
    if not depths or not all(0.0 <= d <= 1.0 for d in depths):
        raise UsageError(f"{name} must lie in [0, 1], got {list(depths)}")


@dataclass(frozen=True)
class LengthgenPlan:
    """The whole grid: tasks × encodings × seeds, and where each run is tested.

    Attributes:
        base: the shared settings (``task``, ``encoding``, ``seed`` are replaced per run).
        tasks, encodings, seeds: the grid; the seeds are ``seed_start … seed_start + seeds − 1``.
        test_multiples: test lengths as multiples of ``L`` (each must exceed 1, except 1 itself).
        passkey_multiples: the passkey task's multiples (Mohtashami & Jaggi test far beyond ``L``).
        depths: passkey key depths in ``[0, 1]``.
        n_test: test examples per (length, depth).
        rope_scaling: a :data:`SCALINGS` type applied at test time to the encodings that take a
            ``scaling`` option (``rope``), or ``None``.

    Each field a flag sets is an :func:`~posenc_bench.experiment.constraints.option`; an error names
    that flag, as :class:`LengthgenConfig`'s do.
    """

    base: LengthgenConfig
    tasks: tuple[str, ...] = option(MISSING, flag="--lengthgen-tasks")
    encodings: tuple[str, ...] = option(MISSING)
    seeds: int = option(MISSING)
    seed_start: int = option(0, flag="--seeds")
    test_multiples: tuple[float, ...] = option((1.0, 1.5, 2.0, 4.0), flag="--test-lengths")
    passkey_multiples: tuple[float, ...] = option((1.0, 2.0, 4.0, 8.0), flag="--passkey-lengths")
    depths: tuple[float, ...] = option((0.0, 0.25, 0.5, 0.75, 1.0), flag="--passkey-depths")
    n_test: int = option(64)
    rope_scaling: str | None = option(None)

    _parameter_constraints: ClassVar[Constraints] = {
        "tasks": Satisfies(_check_tasks),
        "encodings": Satisfies(check_encoding_names),
        "seeds": REPEATS,
        "seed_start": SEED,
        "test_multiples": Satisfies(_check_multiples),
        "passkey_multiples": Satisfies(_check_multiples),
        "depths": Satisfies(_check_depths),
        "n_test": POSITIVE_INT,
        "rope_scaling": NoneOr(Options(SCALINGS)),
    }

    def __post_init__(self) -> None:
        check_parameters(self, flags=True)
        self._check_vocab()
        self._check_random_positions()

    def _check_vocab(self) -> None:
        """Each task needs enough symbols at its longest test length."""
        vocab = self.base.vocab
        for t in self.tasks:
            longest, needs = max(self.test_lengths(t)), data.task(t).min_vocab
            if vocab < needs(longest):
                raise UsageError(
                    f"{parameter_name(self.base, 'vocab')} {vocab} is too small for task {t!r} at its longest "
                    f"test length {longest}: it needs >= {needs(longest)} symbols"
                )

    def _check_random_positions(self) -> None:
        """Random positions (Ruoss et al. 2023) must cover the longest test input (a test sequence but its
        last token, which the decoder predicts and does not read)."""
        m = self.base.random_positions
        if m is None:
            return
        longest = max(data.sequence_length(t, max(self.test_lengths(t))) for t in self.tasks) - 1
        if m < longest:
            raise UsageError(
                f"{parameter_name(self.base, 'random_positions')} {m} must be >= the longest test "
                f"input ({longest} tokens)"
            )

    def test_lengths(self, task: str) -> list[int]:
        """The test lengths ``round(m·L)`` of ``task``, increasing and distinct."""
        multiples = self.passkey_multiples if task == "passkey" else self.test_multiples
        return sorted({max(1, round(m * self.base.train_length)) for m in multiples})

    def seed_values(self) -> list[int]:
        """The grid's seeds, ``seed_start … seed_start + seeds − 1``."""
        return list(range(self.seed_start, self.seed_start + self.seeds))

    def configs(self) -> list[LengthgenConfig]:
        return [
            dataclasses.replace(self.base, task=t, encoding=e, seed=s)
            for t in self.tasks
            for e in self.encodings
            for s in self.seed_values()
        ]


# data ---------------------------------------------------------------------------------------------


def _rng(*key: int | str) -> np.random.Generator:
    words = [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in key]
    return np.random.default_rng(words)


def training_batch(config: LengthgenConfig, step: int) -> data.Batch:
    """The batch of ``step``: a length drawn uniformly from ``1 … L`` (``[0, 1]`` depth for passkey)."""
    rng = _rng(config.seed, config.task, "train", step)
    n = int(rng.integers(1, config.train_length + 1))
    return data.task(config.task).batch(rng, config.batch_size, n, config.vocab, float(rng.random()))


def vocab_size(config: LengthgenConfig) -> int:
    return data.SPECIAL + config.vocab


def build_model(config: LengthgenConfig, *, scaling: tuple[str, float] | None = None) -> CausalDecoder:
    """The decoder of ``config`` (``scaling``: a rotary ``(type, factor)`` for testing beyond ``L``)."""
    options = dict(config.encoding_options)
    train_tokens = data.sequence_length(config.task, config.train_length)
    if scaling is not None:
        kind, factor = scaling
        options.update(scaling=kind, scaling_factor=factor)
        if kind == "yarn":
            options["scaling_options"] = {"original_max_position_embeddings": train_tokens}
    inside = registry.get(config.encoding).family not in ("none", "input")  # NoPE layers: attention-side only
    encoder_options = {"no_rope_layers": config.no_rope_layers} if config.no_rope_layers and inside else {}
    return CausalDecoder(
        vocab_size(config),
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_layers=config.n_layers,
        encoding=None if config.encoding == "none" else config.encoding,
        encoding_options=options,
        max_len=train_tokens,
        encoder_options=encoder_options,
    )


def _loss(
    model: torch.nn.Module, batch: data.Batch, device: torch.device, positions: torch.Tensor | None
) -> torch.Tensor:
    tokens = torch.from_numpy(batch.tokens).to(device)
    logits = model(tokens[:, :-1], positions=positions)
    a = batch.answer
    return F.cross_entropy(logits[:, -a:].reshape(-1, logits.shape[-1]), tokens[:, -a:].reshape(-1))


@torch.no_grad()
def exact_match(
    model: torch.nn.Module, batch: data.Batch, device: torch.device, positions: torch.Tensor | None = None
) -> float:
    """Share of rows whose every answer token is the model's argmax given the true prefix (at
    ``positions`` ``[b, s]``, one row per example, when given: each example is then run on its own, as
    input encodings take one row of positions for the batch)."""
    model.eval()
    tokens = torch.from_numpy(batch.tokens).to(device)
    if positions is None:
        logits = model(tokens[:, :-1])
    else:
        rows = zip(tokens[:, :-1], positions.to(device), strict=True)
        logits = torch.cat([model(row[None], positions=where) for row, where in rows])
    a = batch.answer
    hit = (logits[:, -a:].argmax(-1) == tokens[:, -a:]).all(dim=1)
    return float(hit.float().mean())


def evaluate(
    model: torch.nn.Module,
    config: LengthgenConfig,
    plan: LengthgenPlan,
    device: torch.device,
    *,
    lengths: list[int] | None = None,
    split: str = "test",
) -> dict[str, Any]:
    """``{"accuracy": {n: acc}, "depths": {n: {depth: acc}}}`` on the test sets of ``config``'s seed
    (at ``lengths``, default every test length of the plan; ``split="fit"``: on the held-out sets of
    :func:`fit_accuracy` instead, ``config.fit_examples`` per depth)."""
    task = data.task(config.task)
    accuracy: dict[str, float] = {}
    depths: dict[str, dict[str, float]] = {}
    examples = config.fit_examples if split == "fit" else None  # None: the test sets' plan.n_test
    for n in plan.test_lengths(config.task) if lengths is None else lengths:
        per_depth = {}
        for d in plan.depths if task.uses_depth else (0.5,):
            batch = test_batch(plan, config.task, config.seed, n, d, split=split, examples=examples)
            key = _rng(config.seed, config.task, f"{split} positions", n, int(round(d * 1000)))
            positions = _test_positions(config, batch, key)
            per_depth[f"{d:g}"] = exact_match(model, batch, device, positions)
        accuracy[str(n)] = float(np.mean(list(per_depth.values())))
        if task.uses_depth:
            depths[str(n)] = per_depth
    return {"accuracy": accuracy, "depths": depths}


def test_batch(
    plan: LengthgenPlan,
    task: str,
    seed: int,
    n: int,
    depth: float,
    *,
    split: str = "test",
    examples: int | None = None,
) -> data.Batch:
    """The test set of ``(seed, task, length n, depth)``: the same for every encoding of the seed
    (``split`` names a set drawn from its own generator: ``"fit"`` for :func:`fit_accuracy`'s held-out
    sets); ``examples`` of them, by default ``plan.n_test``."""
    rng = _rng(seed, task, split, n, int(round(depth * 1000)))
    size = plan.n_test if examples is None else examples
    return data.task(task).batch(rng, size, n, plan.base.vocab, depth)


def fit_accuracy(
    model: torch.nn.Module, config: LengthgenConfig, plan: LengthgenPlan, device: torch.device
) -> float:
    """Exact match at the training length ``L`` on the held-out in-distribution sets of ``config``'s seed
    (``config.fit_examples`` per passkey depth, drawn apart from the training batches and the test sets),
    averaged over depths as :func:`evaluate` averages; leaves ``model`` in training mode."""
    n = config.train_length
    accuracy = evaluate(model, config, plan, device, lengths=[n], split="fit")["accuracy"][str(n)]
    model.train()
    return float(accuracy)


def trivial_floors(plan: LengthgenPlan) -> list[dict[str, Any]]:
    """Per (task, length) the exact match of the task's trivial strategy
    (:meth:`posenc_bench.data.lengthgen.Task.floor`) on the grid's own test sets, averaged as the
    runs' accuracy is (over depths, then seeds); ``rule`` says what it answers."""
    out = []
    for t in plan.tasks:
        task = data.task(t)
        for n in plan.test_lengths(t):
            per_seed = [
                np.mean(
                    [
                        task.floor(test_batch(plan, t, s, n, d), n)
                        for d in (plan.depths if task.uses_depth else (0.5,))
                    ]
                )
                for s in plan.seed_values()
            ]
            out.append(
                {"task": t, "length": n, "accuracy": float(np.mean(per_seed)), "rule": task.trivial_rule}
            )
    return out


def _test_positions(
    config: LengthgenConfig, batch: data.Batch, rng: np.random.Generator
) -> torch.Tensor | None:
    """Test positions of a model trained on randomized positions (Ruoss et al. 2023): ``[b, s]``, a fresh
    ordered sample of ``0 … M − 1`` per example, as their released code draws positions at every forward
    pass, evaluation included; ``None`` (positions ``0 … s − 1``) for every other run."""
    if not config.random_positions:
        return None
    g = torch.Generator().manual_seed(int(rng.integers(2**31)))
    length = batch.tokens.shape[1] - 1
    return torch.stack(
        [randomized_positions(length, config.random_positions, generator=g) for _ in batch.tokens]
    )


# one run ----------------------------------------------------------------------------------------------


def _fresh(
    config: LengthgenConfig, device: torch.device
) -> tuple[CausalDecoder, torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """The run's initial model (seeded: every encoding of a seed starts from the same generator),
    its AdamW optimiser and the linear decay of the learning rate to 0 over ``steps``."""
    torch.manual_seed(config.seed)
    model = build_model(config).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: 1.0 - s / config.steps)
    return model, optimiser, schedule


def _digest(value: Any) -> str:
    """SHA-256 (hex) of ``value`` as sorted JSON: a run's test settings, its :class:`~posenc_bench.experiment.runs.Identity` inputs."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class LengthgenRuns(RunKind[LengthgenConfig, LengthgenPlan, LengthgenRecord]):
    """``--task lengthgen``'s runs in the shared run store (:func:`posenc_bench.experiment.runs.execute`),
    the data of a run being its plan's test settings.

    The folder is :meth:`LengthgenConfig.directory`; ``config.json`` is :func:`run_identity`, whose settings
    (all but ``test``) must match (a folder holding other settings is refused) and whose test settings are the
    run's inputs (other test lengths, depths or test positions: the run's files are moved aside as stale and it
    is trained and tested again). A run is finished when ``metrics.json`` (a :class:`LengthgenRecord`) and
    ``encoding.pt`` (:data:`ENCODING`, the trained encoding) are both there and readable; its checkpoint is
    removed then. ``stop_after`` (tests) stops training after that many steps of one call, leaving the checkpoint.
    """

    outputs = (METRICS, ENCODING)
    keeps_checkpoint = False

    def __init__(self, *, stop_after: int | None = None) -> None:
        self.stop_after = stop_after

    def directory(self, root: Path, config: LengthgenConfig) -> Path:
        return config.directory(root)

    def identity(
        self, config: LengthgenConfig, data: LengthgenPlan, stored: Mapping[str, Any] | None
    ) -> Identity:
        if stored is not None:  # a format this code does not write (a newer version's run) is refused
            identity_version(stored)
        settings = run_identity(config, data)
        test = settings.pop("test")
        return Identity(settings, _digest(test), stale="the test sets differ from those this run was tested on",
                        inputs_name="test settings", stale_reason="test lengths, depths, examples or positions changed")  # fmt: skip

    def recorded(self, stored: Mapping[str, Any]) -> Identity:
        settings = _with_fit_examples(
            {k: v for k, v in stored.items() if k != "test"}, stored.get("test", {})
        )
        return Identity(settings, _digest(stored["test"]) if "test" in stored else None)

    def read_record(self, directory: Path, config: LengthgenConfig) -> LengthgenRecord:
        try:
            record = LengthgenRecord.from_json(read_json(directory / METRICS, {"accuracy": dict}))
        except (UnusableFile, ValueError) as exc:
            raise UnusableOutput(METRICS, str(exc)) from None
        try:
            _read_encoding(config, directory / ENCODING)
        except UnusableFile as exc:  # not this run's trained encoding: retrained, not trusted
            raise UnusableOutput(ENCODING, str(exc)) from None
        return record

    def metrics_text(self, record: LengthgenRecord) -> str:
        return json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n"

    def train(
        self, config: LengthgenConfig, data: LengthgenPlan, directory: Path, *, resume: bool, session: Session
    ) -> LengthgenRecord | None:
        write_config(directory, run_identity(config, data))
        return _train(config, data, directory, session, stop_after=self.stop_after, resume=resume)


def train_run(
    config: LengthgenConfig,
    plan: LengthgenPlan,
    root: Path,
    *,
    device: torch.device,
    stop_after: int | None = None,
    wait: bool = True,
    progress: bool = False,
) -> LengthgenRecord | None:
    """Train and test one run under ``root`` through the shared run store, resuming from its checkpoint;
    its record (``skipped`` when read back from a finished run with the same settings).

    The run is claimed first (:func:`~posenc_bench.experiment.claims.claim`): when another process holds it,
    ``wait=True`` waits, then reads its result, and ``wait=False`` returns ``None`` at once. ``stop_after``
    (tests) stops after that many steps of this call, leaving the checkpoint, and returns ``None``;
    ``progress``: a tqdm bar over the training steps.
    """
    return execute(config, plan, root=root, device=device, task=LengthgenRuns(stop_after=stop_after),
                   progress=progress, wait=wait)  # fmt: skip


def run_identity(config: LengthgenConfig, plan: LengthgenPlan) -> dict[str, Any]:
    """A run's ``config.json``: its settings and how it is tested (``test``), in identity format 1
    (:data:`~posenc_bench.experiment.config.IDENTITY_VERSION`: no version recorded). A run folder recording
    other settings is refused, other test settings make it stale (:class:`LengthgenRuns`); one recording a
    format this code does not write is refused."""
    settings = {**config.to_json(), "test": _test_settings(plan)}
    if config.random_positions:  # runs tested at 0 … s − 1 before (a stale protocol) are retrained
        settings["test"]["positions"] = "randomized"
    return settings


def _train(
    config: LengthgenConfig,
    plan: LengthgenPlan,
    folder: Path,
    session: Session,
    *,
    stop_after: int | None,
    resume: bool,
) -> LengthgenRecord | None:
    """Train and test one claimed run (:class:`LengthgenRuns`) on ``session``'s device, resuming from its
    checkpoint when ``resume`` (``session.progress``: a tqdm bar over the steps); its record, the trained
    encoding written as :data:`ENCODING`.

    With ``config.fit_accuracy`` set, each logged step (every ``checkpoint_every`` and the last) first
    measures :func:`fit_accuracy`; training stops there once it reaches the criterion, and the metrics
    gain ``fit = {"accuracy", "step", "reached"}`` (at the budget ``steps`` when never reached). A
    checkpoint is written only after a check that did not reach it, so a resumed run stops where an
    uninterrupted one does. The learning rate decays over the budget whether or not training stops early."""
    device = session.device
    model, optimiser, schedule = _fresh(config, device)
    step, rows, seconds, tokens = 0, [], 0.0, 0
    checkpoint = folder / CHECKPOINT
    state = (
        resumed(folder, lambda path: _resume(path, model, optimiser, schedule, device), session)
        if resume
        else None
    )
    if state is not None:
        step, rows, seconds, tokens = state["step"], state["log"], state["seconds"], state["tokens"]
    elif resume:  # an unreadable or foreign checkpoint, perhaps partly loaded: retrained from the start
        model, optimiser, schedule = _fresh(config, device)
    done_here = 0
    model.train()
    label = f"{config.task} {config.encoding} seed {config.seed}"
    steps = (
        Bar(total=config.steps, initial=step, desc=label, unit="step", leave=False)
        if session.progress
        else None
    )
    while step < config.steps:
        start = time.perf_counter()
        batch = training_batch(config, step)
        positions = None
        if config.random_positions:
            g = torch.Generator().manual_seed(int(_rng(config.seed, "positions", step).integers(2**31)))
            positions = randomized_positions(
                batch.tokens.shape[1] - 1, config.random_positions, generator=g
            ).to(device)
        loss = _loss(model, batch, device, positions)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        loss = loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        step += 1
        done_here += 1
        if steps is not None:
            steps.update()
        logged = step % config.checkpoint_every == 0 or step == config.steps
        if logged and device.type == "cuda":  # CUDA runs ahead of the host: time the queued steps too
            torch.cuda.synchronize(device)
        seconds += time.perf_counter() - start
        tokens += batch.tokens.size
        if logged:
            rows.append({"step": step, "loss": float(loss), "tokens_per_s": tokens / max(seconds, 1e-9)})
            if config.fit_accuracy is not None:
                rows[-1]["fit_accuracy"] = fit_accuracy(model, config, plan, device)
                if rows[-1]["fit_accuracy"] >= config.fit_accuracy:
                    write_text_atomic(folder / LOG, log_csv(rows))
                    break
            state = {"model": model.state_dict(), "optimiser": optimiser.state_dict(),
                     "schedule": schedule.state_dict(), "step": step, "log": rows,
                     "seconds": seconds, "tokens": tokens}  # fmt: skip
            save_checkpoint(checkpoint, state)
            write_text_atomic(folder / LOG, log_csv(rows))
        if stop_after is not None and done_here >= stop_after and step < config.steps:
            return None
    if steps is not None:
        steps.close()
    record = _tested(model, config, plan, device, rows, (seconds, tokens))
    encoding = model.encoder.encoding
    trained = {} if encoding is None else {k: v.detach().cpu() for k, v in encoding.state_dict().items()}
    save_state(folder / ENCODING, trained)
    return record


def _tested(
    model: torch.nn.Module,
    config: LengthgenConfig,
    plan: LengthgenPlan,
    device: torch.device,
    rows: list[dict[str, float]],
    trained: tuple[float, int],
) -> LengthgenRecord:
    """A trained run's record: :func:`evaluate`'s accuracy, the scaled accuracy when asked, the last logged
    loss, ``trained`` (seconds, tokens), and where training stopped against the fit criterion (``fit``) when
    the run has one."""
    tested = evaluate(model, config, plan, device)
    scaled = None
    if plan.rope_scaling is not None and "scaling" in registry.get(config.encoding).option_names():
        scaled = _scaled_accuracy(model, config, plan, device)
    fit = None
    if config.fit_accuracy is not None:  # the last logged step is where training stopped
        last = rows[-1]
        fit = FitReached(last["fit_accuracy"], int(last["step"]), last["fit_accuracy"] >= config.fit_accuracy)
    seconds, tokens = trained
    return LengthgenRecord(tested["accuracy"], tested["depths"], rows[-1]["loss"] if rows else None,
                           seconds, tokens, tokens / max(seconds, 1e-9), scaled=scaled, fit=fit)  # fmt: skip


def trained_decoder(config: LengthgenConfig, root: Path) -> CausalDecoder:
    """The decoder of a finished run under ``root`` on the CPU, its encoding module holding the trained
    state of the run's :data:`ENCODING` (the other weights are not kept: they are at initialisation);
    :class:`~posenc.UsageError` naming the file when it is not this run's encoding."""
    path = config.directory(root) / ENCODING
    try:
        return _read_encoding(config, path)
    except UnusableFile as exc:
        raise UsageError(f"{path} {exc}") from None


def _read_encoding(config: LengthgenConfig, path: Path) -> CausalDecoder:
    """:func:`trained_decoder` of the encoding state in ``path``; :class:`UnusableFile` if it does not fit."""
    model = build_model(config)
    state = load_state(path)
    if model.encoder.encoding is not None:
        _load_into(model.encoder.encoding, state, "the run's encoding")
    elif state != {}:
        raise UnusableFile("holds weights, but the run's encoding has none")
    return model.eval()


def _load_into(module: Any, state: Any, what: str) -> None:
    """``module.load_state_dict(state)`` (strict), or :class:`UnusableFile` saying that ``state`` is not ``what``'s."""
    try:
        module.load_state_dict(state)
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError):
        raise UnusableFile(f"does not hold {what} (other names, shapes or structure)") from None


def _resume(
    path: Path,
    model: torch.nn.Module,
    optimiser: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LambdaLR,
    device: torch.device,
) -> dict[str, Any]:
    """Load the checkpoint in ``path`` into ``model``, ``optimiser`` and ``schedule``; its progress fields.
    :class:`UnusableFile` when it is not a checkpoint of this run (the three may then be partly loaded)."""
    state = load_state(path, device=device)
    if isinstance(state, dict) and "sha256" in state:  # checkpoints written before it carry no digest
        state = intact(state)
    fields = {"model": dict, "optimiser": dict, "schedule": dict, "step": int, "log": list,
              "seconds": float, "tokens": int}  # fmt: skip
    if not isinstance(state, dict) or any(not isinstance(state.get(k), kind) for k, kind in fields.items()):
        raise UnusableFile(f"is not a lengthgen checkpoint (expected {', '.join(fields)})")
    _load_into(model, state["model"], "this run's model")
    _load_into(optimiser, state["optimiser"], "this run's optimiser")
    _load_into(schedule, state["schedule"], "this run's schedule")
    return state


def _test_settings(plan: LengthgenPlan) -> dict[str, Any]:
    return {"multiples": list(plan.test_multiples), "passkey_multiples": list(plan.passkey_multiples),
            "depths": list(plan.depths), "n_test": plan.n_test, "rope_scaling": plan.rope_scaling}  # fmt: skip


def _scaled_accuracy(
    model: torch.nn.Module, config: LengthgenConfig, plan: LengthgenPlan, device: torch.device
) -> dict[str, float]:
    """Accuracy per test length with the trained weights and rotary frequencies scaled by the
    length ratio ``T_test / T_train`` (the trained tables are non-persistent: the state loads as is)."""
    assert plan.rope_scaling is not None
    train_tokens = data.sequence_length(config.task, config.train_length)
    out = {}
    for n in plan.test_lengths(config.task):
        factor = max(1.0, data.sequence_length(config.task, n) / train_tokens)
        scaled = build_model(config, scaling=(plan.rope_scaling, factor)).to(device)
        scaled.load_state_dict(model.state_dict())
        out[str(n)] = evaluate(scaled, config, plan, device, lengths=[n])["accuracy"][str(n)]
    return out


# the grid and its tables ----------------------------------------------------------------------------


@dataclass
class LengthgenResult:
    """Every run's metrics by ``(task, encoding, seed)``, the tables, and the files written."""

    metrics: dict[tuple[str, str, int], LengthgenRecord]
    markdown: str
    paths: dict[str, Path]
    wall_seconds: float


def run_lengthgen(
    plan: LengthgenPlan, *, out: Path, device: torch.device, progress: Callable[[str], None] | None = print
) -> LengthgenResult:
    """Run (or resume) every run of ``plan`` under ``out`` and write ``lengthgen.{md,csv,json}``."""
    start = time.perf_counter()
    results: dict[tuple[str, str, int], LengthgenRecord] = {}
    configs = plan.configs()
    finished = sum((config.directory(out) / METRICS).is_file() for config in configs)
    if finished:
        print(f"resuming: {finished} of {len(configs)} runs done (under {out / 'runs'}); they are read back")

    def attempt(config: LengthgenConfig, wait: bool) -> tuple[LengthgenRecord, float] | None:
        t0 = time.perf_counter()
        record = train_run(config, plan, out, device=device, wait=wait, progress=progress is not None)
        return None if record is None else (record, time.perf_counter() - t0)

    for i, (record, seconds) in claim_each(configs, attempt):
        config = configs[i]
        results[(config.task, config.encoding, config.seed)] = record
        if progress is not None:
            progress(f"[{len(results)}/{len(configs)}] {config.task} {config.encoding} seed {config.seed}: "
                     f"{_progress(record, None if record.skipped else seconds)}")  # fmt: skip
    wall = time.perf_counter() - start
    tables = summarise(plan, results)
    tables["criteria"] = lengthgen_analysis.criteria_beyond_l(
        plan, lambda config: trained_decoder(config, out)
    )
    text, paths = _write(plan, tables, out, wall)
    return LengthgenResult(results, text, paths, wall)


def _progress(record: LengthgenRecord, seconds: float | None) -> str:
    """A finished run's accuracy per test length, and how long it trained (``seconds``; ``None``: read back)
    and where it stopped against its fit criterion, for the progress line."""
    acc = " ".join(f"{n}:{a:.2f}" for n, a in record.accuracy.items())
    how = "read back" if seconds is None else f"{seconds:.1f}s"
    if record.fit is not None:
        f = record.fit
        how += f"; {'fit' if f.reached else 'not fit'} {f.accuracy:.2f} at step {f.step}"
    return f"{acc} ({how})"


def _write(
    plan: LengthgenPlan, tables: dict[str, Any], out: Path, wall: float
) -> tuple[str, dict[str, Path]]:
    """Add the rank correlations to ``tables`` and write ``lengthgen.{md,csv,json,png}`` into ``out``."""
    tables["correlations"] = lengthgen_analysis.rank_correlations(plan, tables, tables["criteria"])
    text = (
        markdown(plan, tables, wall_seconds=wall)
        + "\n"
        + lengthgen_analysis.markdown(plan, tables, tables["criteria"], tables["correlations"])
    )
    paths = {"md": out / "lengthgen.md", "csv": out / "lengthgen.csv", "json": out / "lengthgen.json",
             "png": out / "lengthgen.png"}  # fmt: skip
    write_text_atomic(paths["md"], text)
    write_text_atomic(paths["csv"], table_csv(tables))
    accuracy: dict[str, dict[str, dict[int, float]]] = {}
    for r in tables["rows"]:
        accuracy.setdefault(r["task"], {}).setdefault(r["encoding"], {})[r["length"]] = r["mean"]
    lines: dict[str, dict[str, dict[int, float]]] = {"chance": {}, "floor": {}}
    for kind in lines:
        for c in tables[kind]:
            lines[kind].setdefault(c["task"], {})[c["length"]] = c["accuracy"]
    lengthgen_plot(accuracy, lines["chance"], paths["png"], train_length=plan.base.train_length,
                   floor=lines["floor"])  # fmt: skip
    write_text_atomic(paths["json"], json.dumps({"plan": _plan_json(plan), "wall_seconds": wall, **tables},
                                                indent=2, sort_keys=True) + "\n")  # fmt: skip
    return text, paths


def rewrite(folder: Path) -> dict[str, Path]:
    """Re-make ``folder/lengthgen.{md,csv,json,png}`` from the per-seed accuracies and criteria of its
    ``lengthgen.json`` (no training, no run folders): the paired tests, floors and correlations are
    recomputed with the current statistics."""
    folder = Path(folder)
    stored = json.loads((folder / "lengthgen.json").read_text(encoding="utf-8"))
    plan = plan_from_json(stored["plan"])
    rows = stored["rows"]
    tables = {"rows": rows, "chance": stored["chance"], "floor": trivial_floors(plan),
              "paired": paired_tests(plan, rows), "train_tokens": stored["train_tokens"],
              "train_seconds": stored["train_seconds"], "criteria": stored["criteria"]}  # fmt: skip
    if "fit" in stored:
        tables["fit"] = stored["fit"]
    return _write(plan, tables, folder, stored["wall_seconds"])[1]


def _plan_json(plan: LengthgenPlan) -> dict[str, Any]:
    return {"base": plan.base.to_json(), "tasks": list(plan.tasks), "encodings": list(plan.encodings),
            "seeds": plan.seeds, "seed_start": plan.seed_start, **_test_settings(plan)}  # fmt: skip


def _with_fit_examples(settings: dict[str, Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` of a run (or a grid's base) written before ``fit_examples`` existed, with the value it
    had: a fit criterion was then measured on the test sets' size, ``n_test`` examples per depth."""
    if "fit_accuracy" in settings and "fit_examples" not in settings and "n_test" in test:
        settings["fit_examples"] = test["n_test"]
    return settings


def plan_from_json(stored: dict[str, Any]) -> LengthgenPlan:
    """The :class:`LengthgenPlan` of a ``lengthgen.json``'s ``plan`` (:func:`_plan_json`); one written before
    ``fit_examples`` existed keeps the value it had (:func:`_with_fit_examples`)."""
    base = _with_fit_examples(dict(stored["base"]), stored)
    base["no_rope_layers"] = tuple(base.get("no_rope_layers", ()))
    return LengthgenPlan(
        LengthgenConfig(**base), tasks=tuple(stored["tasks"]), encodings=tuple(stored["encodings"]),
        seeds=stored["seeds"], seed_start=stored.get("seed_start", 0),
        test_multiples=tuple(stored["multiples"]), passkey_multiples=tuple(stored["passkey_multiples"]),
        depths=tuple(stored["depths"]), n_test=stored["n_test"], rope_scaling=stored["rope_scaling"],
    )  # fmt: skip


def _accuracy_row(task: str, encoding: str, n: int, records: list[LengthgenRecord]) -> dict[str, Any]:
    """One (task, encoding, length ``n``) cell over its seeds' records: the mean and std (``ddof=1``; 0 for
    one seed) of their exact match, their values, and the mean rotary-scaled accuracy when every seed has one."""
    values = np.array([r.accuracy[str(n)] for r in records])
    row = {"task": task, "encoding": encoding, "length": n, "mean": float(values.mean()),
           "std": float(values.std(ddof=1)) if values.size > 1 else 0.0, "seeds": values.tolist()}  # fmt: skip
    scaled = [(r.scaled or {}).get(str(n)) for r in records]
    if all(v is not None for v in scaled):
        row["scaled_mean"] = float(np.mean([v for v in scaled if v is not None]))
    return row


def summarise(plan: LengthgenPlan, results: dict[tuple[str, str, int], LengthgenRecord]) -> dict[str, Any]:
    """Mean ± std per (task, encoding, length), the no-skill line, the trivial-strategy floor
    (:func:`trivial_floors`), the paired differences against each reference (:func:`paired_tests`), and,
    for runs trained to a fit criterion, ``fit``: each run's held-out accuracy, steps and whether it reached it."""
    seeds = plan.seed_values()
    chance = [{"task": t, "length": n, "accuracy": data.task(t).chance(n, plan.base.vocab)}
              for t in plan.tasks for n in plan.test_lengths(t)]  # fmt: skip
    rows = [_accuracy_row(t, e, n, [results[(t, e, s)] for s in seeds])
            for t in plan.tasks for e in plan.encodings for n in plan.test_lengths(t)]  # fmt: skip
    runs = list(results.values())
    tables = {"rows": rows, "paired": paired_tests(plan, rows), "chance": chance, "floor": trivial_floors(plan),
              "train_tokens": int(sum(m.train_tokens for m in runs)),
              "train_seconds": float(sum(m.train_seconds for m in runs))}  # fmt: skip
    if plan.base.fit_accuracy is not None:  # per run: where training stopped (``_train``)
        stops = {key: record.fit for key, record in results.items() if record.fit is not None}
        tables["fit"] = [{"task": t, "encoding": e, "seed": s, **dataclasses.asdict(stops[(t, e, s)])}
                         for t in plan.tasks for e in plan.encodings for s in seeds]  # fmt: skip
    return tables
