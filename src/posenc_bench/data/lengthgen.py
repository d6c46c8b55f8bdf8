"""Algorithmic sequence tasks for length generalisation, generated in code from a seed.

Every example is one token sequence ``prompt ‖ answer``; a causal decoder reads it shifted by one
and is scored on the answer tokens only. A task's *length* ``n`` is its number of items (symbols to
copy, bits, digits, filler tokens, key–value pairs), so "train on ``n ≤ L``, test at ``4L``" means
the same thing for every task. Token ids: ``0`` separator, ``1`` marker, ``2 …`` the symbols
(``vocab`` of them; digits and bits are the first symbols).

=========  ==========================================  ========  =====================================
task       prompt                                       answer    what it asks of positions
=========  ==========================================  ========  =====================================
copy       ``x₁ … x_n ∣``                               ``x``     attend to the token ``n + 1`` back
reverse    ``x₁ … x_n ∣``                               ``x`` ⟲   attend to mirrored positions
sort       ``x₁ … x_n ∣``                               sorted    counting (order is content)
parity     ``b₁ … b_n ∣``                               ``⊕ b``   none (a count mod 2)
addition   ``a ∣ b ∣`` (``n`` digits each, LSB first)   ``a + b`` align digit ``i`` of a, b, sum
mode       ``x₁ … x_n ∣``                               mode      counting (ties: the smallest symbol)
count      ``x₁ … x_n ∣ q``                             ``#q``    match ``q`` at every position and count
passkey    filler with ``⋆ k`` at depth ``δ·n``, ``∣``   ``k``     find the marker at any distance
recall     ``k₁ v₁ … k_n v_n ∣ k_q``                    ``v_q``   the token after a matching key
=========  ==========================================  ========  =====================================

Copy, reverse and passkey follow Kazemnejad et al. 2023 and Ruoss et al. 2023 (Deletang et al.'s
task suite); passkey retrieval is Mohtashami & Jaggi 2023; associative recall Ba et al. 2016 /
Olsson et al. 2022; mode and count are the counting tasks of Kazemnejad et al. 2023 (their "Mode" and
"Count" families). Count's query ``q`` is a symbol of the sequence, so ``#q ∈ 1 … n``; it is written in
decimal, least significant digit first, zero-padded to the digits of ``n``. The no-skill accuracy of a task is that of guessing every answer token
uniformly from its alphabet: ``|A|^(−answer length)``.

Each task also has a **trivial strategy** (:attr:`Task.trivial`), a rule that reads no position beyond
the sequence's start and solves only the examples that need none; its exact match on a test set
(:meth:`Task.floor`) is the floor a model must clear before its score says anything about positions:

=========  ==================================================================================
task       trivial strategy (exact only on the examples it covers)
=========  ==================================================================================
copy       the input's most frequent symbol ``n`` times (ties: the smallest): constant inputs
reverse    the same as copy
sort       the same as copy
parity     the constant answer 0 (even): half the inputs
addition   the constant answer 0…0: ``a = b = 0``
mode       the input's smallest symbol: inputs whose symbols all differ, and more
count      the constant count 1: queries that occur once
passkey    the token after the first one: the key when the marker opens the sequence (depth 0)
recall     the value of the first pair: queries of the first key
=========  ==================================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SEP, MARK = 0, 1
SPECIAL = 2
"""Number of special tokens before the symbols."""


@dataclass(frozen=True)
class Batch:
    """``tokens [b, T]`` int64 and the number of answer tokens at the end of every row."""

    tokens: np.ndarray
    answer: int


Generate = Callable[[np.random.Generator, int, int, int, float], np.ndarray]
"""``(rng, batch, n, vocab, depth) → [batch, T]`` int64 tokens."""

Trivial = Callable[[np.ndarray, int], np.ndarray]
"""``(prompt [batch, P], n) → [batch, answer]``: a trivial strategy's answer tokens (module docstring)."""


@dataclass(frozen=True)
class Task:
    """One task: how to generate it and what chance and vocabulary it implies.

    Attributes:
        name: the ``--lengthgen-tasks`` name.
        generate: the generator (:data:`Generate`).
        answer_length: ``n ↦`` answer tokens.
        alphabet: ``vocab ↦`` size of the answer alphabet (for the no-skill accuracy).
        min_vocab: ``n ↦`` the fewest symbols the task needs at length ``n``.
        trivial: the trivial strategy (:data:`Trivial`; module docstring), ``trivial_rule`` in words.
        uses_depth: whether ``depth`` (passkey) matters.
    """

    name: str
    generate: Generate
    answer_length: Callable[[int], int]
    alphabet: Callable[[int], int]
    min_vocab: Callable[[int], int]
    trivial: Trivial
    trivial_rule: str
    uses_depth: bool = False

    def chance(self, n: int, vocab: int) -> float:
        """No-skill exact-match accuracy: every answer token guessed uniformly, ``|A|^(−answer)``."""
        return float(self.alphabet(vocab) ** -float(self.answer_length(n)))

    def batch(self, rng: np.random.Generator, size: int, n: int, vocab: int, depth: float = 0.5) -> Batch:
        """``size`` examples of length ``n`` (``depth`` ∈ [0, 1]: where passkey's key sits)."""
        if vocab < self.min_vocab(n):
            raise ValueError(
                f"vocab={vocab} is too small for task {self.name!r} at length {n}: it needs >= {self.min_vocab(n)}"
            )
        tokens = self.generate(rng, size, n, vocab, depth)
        return Batch(tokens.astype(np.int64), self.answer_length(n))

    def floor(self, batch: Batch, n: int) -> float:
        """Exact match of the trivial strategy on ``batch`` (of length ``n``): the share of rows whose
        every answer token it gets right."""
        a = batch.answer
        guess = self.trivial(batch.tokens[:, :-a], n)
        return float(np.mean((guess == batch.tokens[:, -a:]).all(axis=1)))


def _symbols(rng: np.random.Generator, size: int, n: int, vocab: int) -> np.ndarray:
    return rng.integers(SPECIAL, SPECIAL + vocab, size=(size, n))


def _column(value: int, size: int) -> np.ndarray:
    return np.full((size, 1), value)


def _copy(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    x = _symbols(rng, size, n, vocab)
    return np.concatenate([x, _column(SEP, size), x], axis=1)


def _reverse(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    x = _symbols(rng, size, n, vocab)
    return np.concatenate([x, _column(SEP, size), x[:, ::-1]], axis=1)


def _sort(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    x = _symbols(rng, size, n, vocab)
    return np.concatenate([x, _column(SEP, size), np.sort(x, axis=1)], axis=1)


def _parity(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    bits = rng.integers(0, 2, size=(size, n))
    answer = bits.sum(axis=1, keepdims=True) % 2
    return np.concatenate([bits + SPECIAL, _column(SEP, size), answer + SPECIAL], axis=1)


def _addition(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    a, b = rng.integers(0, 10, size=(size, n)), rng.integers(0, 10, size=(size, n))  # digits, LSB first
    total = np.zeros((size, n + 1), dtype=np.int64)
    carry = np.zeros(size, dtype=np.int64)
    for i in range(n):
        s = a[:, i] + b[:, i] + carry
        total[:, i], carry = s % 10, s // 10
    total[:, n] = carry
    sep = _column(SEP, size)
    return np.concatenate([a + SPECIAL, sep, b + SPECIAL, sep, total + SPECIAL], axis=1)


def _mode(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    x = _symbols(rng, size, n, vocab)
    counts = np.stack([(x == SPECIAL + v).sum(axis=1) for v in range(vocab)], axis=1)
    mode = SPECIAL + counts.argmax(axis=1)  # argmax takes the first maximum: the smallest symbol
    return np.concatenate([x, _column(SEP, size), mode[:, None]], axis=1)


def _digits(n: int) -> int:
    return len(str(n))


def _count(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    x = _symbols(rng, size, n, vocab)
    query = x[np.arange(size), rng.integers(0, n, size=size)][:, None]
    count = (x == query).sum(axis=1, keepdims=True)
    digits = count // 10 ** np.arange(_digits(n)) % 10  # least significant first
    return np.concatenate([x, _column(SEP, size), query, digits + SPECIAL], axis=1)


def _passkey(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    filler = _symbols(rng, size, n, vocab)
    key = _symbols(rng, size, 1, vocab)
    at = round(depth * n)
    return np.concatenate(
        [filler[:, :at], _column(MARK, size), key, filler[:, at:], _column(SEP, size), key], axis=1
    )


def _recall(rng: np.random.Generator, size: int, n: int, vocab: int, depth: float) -> np.ndarray:
    keys = np.argsort(rng.random((size, vocab)), axis=1)[:, :n] + SPECIAL  # n distinct keys per row
    values = _symbols(rng, size, n, vocab)
    pairs = np.stack([keys, values], axis=2).reshape(size, 2 * n)
    pick = rng.integers(0, n, size=size)
    rows = np.arange(size)
    query, answer = keys[rows, pick][:, None], values[rows, pick][:, None]
    return np.concatenate([pairs, _column(SEP, size), query, answer], axis=1)


def _two(n: int) -> int:
    return 2


def _majority_n_times(prompt: np.ndarray, n: int) -> np.ndarray:
    x = prompt[:, :n]
    counts = (x[:, :, None] == x[:, None, :]).sum(axis=2)  # [b, n]: occurrences of each item's symbol
    best = counts.max(axis=1, keepdims=True)
    majority = np.where(counts == best, x, np.iinfo(np.int64).max).min(axis=1)  # ties: the smallest
    return np.repeat(majority[:, None], n, axis=1)


def _constant(symbol: int, length: Callable[[int], int]) -> Trivial:
    return lambda prompt, n: np.full((prompt.shape[0], length(n)), SPECIAL + symbol)


def _smallest(prompt: np.ndarray, n: int) -> np.ndarray:
    return prompt[:, :n].min(axis=1, keepdims=True)


def _count_one(prompt: np.ndarray, n: int) -> np.ndarray:
    digits = np.zeros((prompt.shape[0], _digits(n)), dtype=np.int64)
    digits[:, 0] = 1  # 1, least significant digit first, zero-padded
    return digits + SPECIAL


def _second_token(prompt: np.ndarray, n: int) -> np.ndarray:
    return prompt[:, 1:2]


_MAJORITY = "the input's most frequent symbol n times (exact on constant inputs)"


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("copy", _copy, lambda n: n, lambda v: v, _two, _majority_n_times, _MAJORITY),
        Task("reverse", _reverse, lambda n: n, lambda v: v, _two, _majority_n_times, _MAJORITY),
        Task("sort", _sort, lambda n: n, lambda v: v, _two, _majority_n_times, _MAJORITY),
        Task("parity", _parity, lambda n: 1, lambda v: 2, _two, _constant(0, lambda n: 1), "the constant 0"),
        Task(
            "addition",
            _addition,
            lambda n: n + 1,
            lambda v: 10,
            lambda n: 10,
            _constant(0, lambda n: n + 1),
            "the constant sum 0",
        ),
        Task("mode", _mode, lambda n: 1, lambda v: v, _two, _smallest, "the input's smallest symbol"),
        Task("count", _count, _digits, lambda v: 10, lambda n: 10, _count_one, "the constant count 1"),
        Task(
            "passkey",
            _passkey,
            lambda n: 1,
            lambda v: v,
            _two,
            _second_token,
            "the token after the first (the key at depth 0)",
            uses_depth=True,
        ),
        Task(
            "recall",
            _recall,
            lambda n: 1,
            lambda v: v,
            lambda n: max(2, n),
            _second_token,
            "the value of the first pair",
        ),
    )
}
"""The tasks by name."""


def task(name: str) -> Task:
    """The task called ``name``; an unknown name raises ``ValueError`` listing the known ones."""
    if name not in TASKS:
        raise ValueError(f"unknown lengthgen task {name!r}; valid: {', '.join(TASKS)}")
    return TASKS[name]


def sequence_length(name: str, n: int) -> int:
    """Tokens of one example of task ``name`` at length ``n`` (the longest position it needs, plus 1)."""
    return int(task(name).generate(np.random.default_rng(0), 1, n, max(10, n), 0.5).shape[1])
