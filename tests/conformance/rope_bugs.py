"""Bugs users met in real rope implementations, each as a config and two dumps: one made the right way,
one reproducing the bug. ``posenc check CONFIG --against DUMP`` must pass the first and fail the second,
naming the first bad position (and layer, module, axis or column where that is what the bug is about).

The dumps are made here with independent float64 NumPy formulas (Su et al. 2021, eq. 34; Wang et al. 2024,
sec. 2.1 for M-RoPE), not with posenc, so a fixture fails if posenc's truth moves. Run this file to write
every fixture into a folder: ``python tests/conformance/rope_bugs.py OUT``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Arrays = dict[str, Any]
N = 64
RNG = np.random.default_rng(2026)
Q = RNG.standard_normal((N, 16))
K = RNG.standard_normal((N, 16))


def inverse_frequencies(rotary_dim: int, base: float, denominator: int | None = None) -> np.ndarray:
    """``θ_i = base^(−2i/denominator)``, ``i < rotary_dim/2`` (the denominator is ``rotary_dim``)."""
    return base ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / (denominator or rotary_dim))


def rotate(x: np.ndarray, angles: np.ndarray, *, adjacent: bool = False, factor: float = 1.0) -> np.ndarray:
    """``x [n, d]`` rotated by ``angles [n, r/2]``: half-split pairs ``(i, i + r/2)`` or adjacent ``(2i, 2i+1)``."""
    half = angles.shape[1]
    cos, sin = factor * np.cos(angles), factor * np.sin(angles)
    out = x.copy()
    a, b = (
        (x[:, 0 : 2 * half : 2], x[:, 1 : 2 * half : 2]) if adjacent else (x[:, :half], x[:, half : 2 * half])
    )
    ra, rb = a * cos - b * sin, b * cos + a * sin
    if adjacent:
        out[:, 0 : 2 * half : 2], out[:, 1 : 2 * half : 2] = ra, rb
    else:
        out[:, :half], out[:, half : 2 * half] = ra, rb
    return out


def tables(angles: np.ndarray, factor: float = 1.0) -> Arrays:
    cos, sin = factor * np.cos(angles), factor * np.sin(angles)
    return {"cos": np.concatenate([cos, cos], 1), "sin": np.concatenate([sin, sin], 1)}


def mrope_pair_axes(sections: list[int], interleaved: bool) -> np.ndarray:
    """The axis of each pair, as transformers' Qwen2-VL (contiguous) and Qwen3-VL (``freqs_t[..., a:3·s_a:3]``)."""
    pairs = sum(sections)
    if not interleaved:
        return np.repeat(np.arange(len(sections)), sections)
    axes = np.zeros(pairs, dtype=int)
    for a in range(1, len(sections)):
        axes[a : len(sections) * sections[a] : len(sections)] = a
    return axes


def mrope_angles(positions: np.ndarray, theta: np.ndarray, axes: np.ndarray) -> np.ndarray:
    return positions[axes, :].T * theta


@dataclasses.dataclass(frozen=True)
class Fixture:
    """One bug class: where it was reported, the config, the right and wrong dumps, and what check must say."""

    name: str
    source: str
    bug: str
    config: dict[str, Any]
    right: Callable[[], Arrays]
    wrong: Callable[[], Arrays]
    says: str  # a regular expression the failing check's output must match


def _positions() -> np.ndarray:
    return np.arange(N, dtype=np.float64)


def _rotated(angles: np.ndarray, *, adjacent: bool = False, factor: float = 1.0, **extra: Any) -> Arrays:
    return {
        "positions": _positions(),
        "q": Q,
        "q_rot": rotate(Q, angles, adjacent=adjacent, factor=factor),
        **extra,
    }


LLAMA = {"head_dim": 16, "rope_theta": 10000.0, "max_position_embeddings": 4096}
T = _positions()[:, None]
PLAIN = T * inverse_frequencies(16, 10000.0)

DSV32 = {"model_type": "deepseek_v32", "num_hidden_layers": 2, "head_dim": 16, "rope_theta": 10000.0}
LLAMA4 = {
    "model_type": "llama4_text",
    "num_hidden_layers": 4,
    "no_rope_layers": [1, 1, 1, 0],
    "head_dim": 16,
    "rope_theta": 500000.0,
}
L4 = T * inverse_frequencies(16, 500000.0)
QWEN3VL = {
    "model_type": "qwen3_vl",
    "head_dim": 16,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5e5,
        "mrope_section": [4, 2, 2],
        "mrope_interleaved": True,
    },
}
GRID = np.stack([np.arange(N), np.arange(N) % 8 + 3, np.arange(N) // 8 + 5]).astype(np.float64)  # t, h, w
THETA_VL = inverse_frequencies(16, 5e5)
FOUR_AXES = {
    "head_dim": 16,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 2, 2, 2]},
}
GRID4 = np.vstack([GRID, (np.arange(N) % 5 + 7)[None].astype(np.float64)])
THETA4 = inverse_frequencies(16, 1e4)
PARTIAL = {"head_dim": 32, "partial_rotary_factor": 0.5, "rope_theta": 10000.0}
SGLANG_DIM = {"head_dim": 80, "partial_rotary_factor": 0.6, "rope_theta": 10000.0}
Q80 = RNG.standard_normal((N, 80))
LLAMA3 = {
    "head_dim": 16,
    "rope_theta": 500000.0,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
FAR = np.arange(0, 2_000_000, 15_625, dtype=np.float64)
YARN = {
    "head_dim": 16,
    "rope_theta": 10000.0,
    "max_position_embeddings": 4096,
    "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
}
GEMMA3 = {
    "model_type": "gemma3_text",
    "num_hidden_layers": 2,
    "head_dim": 16,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
    },
}
COHERE = {"model_type": "cohere", "num_hidden_layers": 1, "head_dim": 16, "rope_theta": 10000.0}
QWEN25VL = {
    "model_type": "qwen2_5_vl",
    "text_config": {"head_dim": 16, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]}},
    "vision_config": {"spatial_merge_size": 2, "tokens_per_second": 25},
}


def _llama3_theta() -> np.ndarray:
    """Meta's Llama 3.1 scaling (its reference code): wavelengths above L/low ÷ factor, below L/high kept."""
    theta = inverse_frequencies(16, 500000.0)
    wavelength = 2 * np.pi / theta
    smooth = (8192 / wavelength - 1.0) / (4.0 - 1.0)
    out = np.where(wavelength > 8192, theta / 8, (1 - smooth) * theta / 8 + smooth * theta)
    return np.where(wavelength < 8192 / 4, theta, out)


def _yarn() -> tuple[np.ndarray, float]:
    """Peng et al. 2023 (YaRN, eqs. 17–23) with β_fast 32, β_slow 1, truncated ramp bounds; a = 0.1 ln s + 1."""
    r, base, s, original = 16, 10000.0, 4.0, 1024
    dim = lambda rotations: r * np.log(original / (rotations * 2 * np.pi)) / (2 * np.log(base))
    low, high = max(np.floor(dim(32)), 0), min(np.ceil(dim(1)), r - 1)
    ramp = np.clip((np.arange(r // 2) - low) / (high - low), 0, 1)
    theta = inverse_frequencies(r, base)
    return theta / s * ramp + theta * (1 - ramp), 0.1 * np.log(s) + 1


def _qwen25_ids(interval: Callable[[int], int]) -> Arrays:
    """Text, one video of 27 temporal grids of 2×2 patches (1 merged token each), text; 2/3 s per grid."""
    types = np.array([[0] + [2] * 27 + [0]])
    t = np.array([1 + interval(k) for k in range(27)])
    # the text after a vision run starts at its start + max(h, w)/merge = 1 + 1 (Wang et al. 2024, sec. 2.1)
    ids = np.concatenate([[[0]] * 3, np.stack([t, np.ones(27, int), np.ones(27, int)]), [[2]] * 3], axis=1)
    return {
        "position_ids": ids[:, None, :].astype(np.int64),
        "token_types": types,
        "video_grid_thw": np.array([[27, 2, 2]]),
        "second_per_grid_ts": np.array([2 / 3], dtype=np.float32),
    }


FIXTURES: list[Fixture] = [
    Fixture(
        "indexer_pairs",
        "vllm PR 28968, sglang 13530 (DeepSeek-V3.2 indexer; transformers 5.24 reads GLM-MoE-DSA's indexer as adjacent, like its MLA)",
        "the indexer rotated with the MLA's adjacent pairs; transformers' DeepSeek-V3.2 indexer uses half-split",
        DSV32,
        lambda: _rotated(PLAIN, layer=np.array(0), module=np.array("indexer")),
        lambda: _rotated(PLAIN, adjacent=True, layer=np.array(0), module=np.array("indexer")),
        r"\(layer 0, indexer\).*q_rot: first at position 1, column 0",
    ),
    Fixture(
        "mla_pairs",
        "vllm PR 28968 (the other half of the same fix)",
        "DeepSeek-V3.2's MLA rotated with half-split pairs; it rotates adjacent ones",
        DSV32,
        lambda: _rotated(PLAIN, adjacent=True, layer=np.array(1)),
        lambda: _rotated(PLAIN, layer=np.array(1)),
        r"\(layer 1, attention\).*q_rot: first at position 1, column 0",
    ),
    Fixture(
        "mrope_interleaved_read_as_sections",
        "QwenLM/Qwen3-VL issue 1800",
        "Qwen3-VL's interleaved M-RoPE assignment read as Qwen2-VL's contiguous sections",
        QWEN3VL,
        lambda: {"positions": GRID, **tables(mrope_angles(GRID, THETA_VL, mrope_pair_axes([4, 2, 2], True)))},
        lambda: {
            "positions": GRID,
            **tables(mrope_angles(GRID, THETA_VL, mrope_pair_axes([4, 2, 2], False))),
        },
        r"cos: first at position 0, column 1 \(axis h\)",
    ),
    Fixture(
        "mrope_axes_dropped",
        "sglang PR 35744 (grounding 26 % → 81.7 % once fixed)",
        "a fused kernel that rotates every pair by the temporal id, dropping the height and width axes",
        QWEN3VL,
        lambda: {"positions": GRID, **tables(mrope_angles(GRID, THETA_VL, mrope_pair_axes([4, 2, 2], True)))},
        lambda: {"positions": GRID, **tables(mrope_angles(GRID, THETA_VL, np.zeros(8, dtype=int)))},
        r"cos: first at position 0, column 1 \(axis h\).*\n    axis h: first at position 0, .*\n    axis w: first "
        r"at position 0, .*\n    positions",  # the temporal axis agrees, so it is not listed
    ),
    Fixture(
        "four_axes_against_three",
        "vllm issue 55140",
        "a 4-axis M-RoPE run by code with 3 axes hard-coded (the 4th section follows axis 0)",
        FOUR_AXES,
        lambda: {
            "positions": GRID4,
            **tables(mrope_angles(GRID4, THETA4, mrope_pair_axes([2, 2, 2, 2], False))),
        },
        lambda: {
            "positions": GRID4,
            **tables(mrope_angles(GRID4, THETA4, np.array([0, 0, 1, 1, 2, 2, 0, 0]))),
        },
        r"cos: first at position 0, column 6 \(axis axis 3\)",
    ),
    Fixture(
        "partial_rotary_exponent",
        "the partial-rotary denominator (rotary_dim vs head_dim), e.g. GPT-NeoX / Phi ports",
        "θ_i = ρ^(−2i/head_dim) where the rotary covers half the head (ρ^(−2i/rotary_dim))",
        PARTIAL,
        lambda: {"positions": _positions(), **tables(T * inverse_frequencies(16, 10000.0))},
        lambda: {"positions": _positions(), **tables(T * inverse_frequencies(16, 10000.0, denominator=32))},
        r"cos: first at position 1, column 1",
    ),
    Fixture(
        "columns_past_the_rope_dim",
        "sglang issue 35096",
        "a kernel that rotates a power-of-two span (64) past a rope dim of 48, into the pass-through columns",
        SGLANG_DIM,
        lambda: {
            "positions": _positions(),
            "q": Q80,
            "q_rot": rotate(Q80, T * inverse_frequencies(48, 10000.0)),
        },
        lambda: {
            "positions": _positions(),
            "q": Q80,
            "q_rot": np.concatenate(
                [
                    rotate(Q80[:, :48], T * inverse_frequencies(48, 10000.0)),
                    rotate(Q80[:, 48:64], T * inverse_frequencies(16, 10000.0)),
                    Q80[:, 64:],
                ],
                axis=1,
            ),
        },
        r"q_rot: first at position 1, column 48",
    ),
    Fixture(
        "nope_polarity",
        "transformers issue 43756, PR 37344",
        "no_rope_layers read with the opposite polarity: Llama 4's NoPE layer 3 rotated",
        LLAMA4,
        lambda: {"positions": _positions(), "q": Q, "q_rot": Q, "layer": np.array(3)},
        lambda: _rotated(L4, layer=np.array(3)),
        r"\(layer 3, attention, NoPE\).*q_rot: first at position 1",
    ),
    Fixture(
        "rope_freqs_not_applied",
        "ik_llama.cpp PR 2291",
        "Llama 3.1's scaled frequencies (rope_freqs) never reach the rope: the plain ones are used",
        LLAMA3,
        lambda: {"positions": FAR, **tables(FAR[:, None] * _llama3_theta())},
        lambda: {"positions": FAR, **tables(FAR[:, None] * inverse_frequencies(16, 500000.0))},
        r"cos: first at position 15625, column \d",
    ),
    Fixture(
        "q_k_cross_wired",
        "hpcaitech/ColossalAI issue 6428",
        "a fused kernel that writes the rotated query into the key output",
        LLAMA,
        lambda: {"positions": _positions(), "k": K, "k_rot": rotate(K, PLAIN)},
        lambda: {"positions": _positions(), "k": K, "k_rot": rotate(Q, PLAIN)},
        r"k_rot: first at position 0, column 0",
    ),
    Fixture(
        "yarn_attention_factor_dropped",
        "YaRN ports that keep the frequencies but drop the 0.1·ln s + 1 factor on cos/sin",
        "yarn tables without the attention factor",
        YARN,
        lambda: {"positions": _positions(), **tables(T * _yarn()[0], _yarn()[1])},
        lambda: {"positions": _positions(), **tables(T * _yarn()[0])},
        r"cos: first at position 0, column 0",
    ),
    Fixture(
        "float32_angles",
        "transformers' own float32 inv_freq × position (any framework forming angles in float32)",
        "angles t·θ formed in float32: off by up to t·2^−24 rad, past the tolerance beyond ~10^2.5",
        LLAMA,
        lambda: {"positions": FAR, **tables(FAR[:, None] * inverse_frequencies(16, 10000.0))},
        lambda: {
            "positions": FAR,
            **tables(
                (
                    FAR[:, None].astype(np.float32) * inverse_frequencies(16, 10000.0).astype(np.float32)
                ).astype(np.float64)
            ),
        },
        r"cos: first at position 15625, column 1",
    ),
    Fixture(
        "layer_type_base",
        "Gemma 3's per-layer-type ropes (local base 10^4, global 10^6) assigned to the wrong layers",
        "Gemma 3's sliding layer 0 rotated with the full-attention base",
        GEMMA3,
        lambda: _rotated(T * inverse_frequencies(16, 10000.0), layer=np.array(0)),
        lambda: _rotated(T * inverse_frequencies(16, 1000000.0), layer=np.array(0)),
        r"\(layer 0, attention\).*q_rot: first at position 1, column 1",
    ),
    Fixture(
        "adjacent_model_in_half_split",
        "Cohere / GPT-J weights run through a rotate_half (half-split) kernel",
        "Cohere's adjacent pairs rotated as half-split pairs",
        COHERE,
        lambda: _rotated(PLAIN, adjacent=True, layer=np.array(0)),
        lambda: _rotated(PLAIN, layer=np.array(0)),
        r"\(layer 0, attention\).*q_rot: first at position 1, column 0",
    ),
    Fixture(
        "qwen25_time_in_float64",
        "posenc's own mrope_position_ids before this fix; any port of Qwen2.5-VL's get_rope_index in float64",
        "Qwen2.5-VL's temporal ids ⌊k·25·(2/3)⌋ formed in float64 (transformers forms them in float32)",
        QWEN25VL,
        lambda: _qwen25_ids(lambda k: int(np.float32(k) * np.float32(25 * np.float32(2 / 3)))),
        lambda: _qwen25_ids(lambda k: int(k * (25 * (2 / 3)))),
        r"position ids differ first at row 0, token 4: axis t is 50, expected 51",
    ),
]


def write(fixture: Fixture, folder: Path) -> tuple[Path, Path, Path]:
    """The fixture's ``config.json``, ``right.npz`` and ``wrong.npz`` in ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.json"
    config.write_text(json.dumps(fixture.config))
    right, wrong = folder / "right.npz", folder / "wrong.npz"
    np.savez(right, **fixture.right())
    np.savez(wrong, **fixture.wrong())
    return config, right, wrong


def check_output(fixture: Fixture, folder: Path) -> str:
    """What ``posenc check config.json --against wrong.npz`` prints about the dump (run from ``folder``)."""
    import contextlib
    import io
    import os

    from posenc.cli import main

    write(fixture, folder)
    buffer, here = io.StringIO(), os.getcwd()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(buffer):
            main(["check", "config.json", "--against", "wrong.npz"])
    finally:
        os.chdir(here)
    text = buffer.getvalue()
    return text[text.index("\nwrong.npz") + 1 :].rstrip()


GALLERY_HEAD = """# What `posenc check` catches

Each entry is a bug users met in a real rope implementation, kept as a fixture in
`tests/conformance/rope_bugs.py`: a config, a dump made the right way (which `posenc check CONFIG --against
right.npz` passes) and a dump reproducing the bug (which it fails, with the output shown). Write them all with
`python tests/conformance/rope_bugs.py OUT`; this page is generated by `python tests/conformance/rope_bugs.py
--gallery docs/check_gallery.md` and a test keeps it equal to what check prints. The dump layout is in
`docs/conventions.md`.
"""


def gallery(folder: Path) -> str:
    parts = [GALLERY_HEAD]
    for f in FIXTURES:
        parts.append(
            f"\n## `{f.name}`\n\n{f.bug[0].upper()}{f.bug[1:]}. Reported in: {f.source}.\n\n```console\n"
            f"$ posenc check config.json --against wrong.npz\n...\n{check_output(f, folder / f.name)}\n```\n"
        )
    return "".join(parts)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--gallery":
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            Path(sys.argv[2]).write_text(gallery(Path(scratch)))
        print(f"wrote {sys.argv[2]}")
    else:
        out = Path(sys.argv[1] if len(sys.argv) > 1 else "conformance-fixtures")
        for f in FIXTURES:
            write(f, out / f.name)
        print(f"{len(FIXTURES)} fixtures written to {out}")
