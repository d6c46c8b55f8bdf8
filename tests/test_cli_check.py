"""``posenc check`` end to end: a config's float32 error budget per decade, and dumps held against the truth."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from peers import import_peer

from posenc import conformance
from posenc.cli import main
from posenc.nn import RotaryEmbedding

CONFIG = {"head_dim": 16, "rope_theta": 500.0, "max_position_embeddings": 64}


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    return path


def decade_row(out: str, start: str) -> list[float]:
    line = next(line for line in out.splitlines() if line.strip().startswith(f"[{start},"))
    return [float(v) for v in line.split(")")[1].split()]


def test_check_prints_the_float32_error_per_decade(config_path, capsys):
    assert main(["check", str(config_path), "--max-position", "1000000"]) == 0
    out = capsys.readouterr().out
    assert "rope_type: default" in out and "attention factor (resolved): 1" in out
    hf_table, _, hf_rotated, ours_table, ours_rotated = decade_row(out, "1e+05")
    # float32 angles lose t·2^-24 rad: ~6e-3 at 10^5 (docs/conventions.md, Precision: 7.1e-3)
    assert 1e-3 < hf_rotated < 5e-2 and hf_table > 1e-3
    assert ours_table < 1e-7 and ours_rotated < 1e-6
    near = decade_row(out, "1e+00")
    assert near[0] < 1e-6  # near the start transformers' float32 tables are as good as posenc's
    assert "bfloat16 256" in out and "float16 2,048" in out and "float32 16,777,216" in out


def test_decade_errors_grow_tenfold_per_decade_for_float32_angles():
    truth = conformance.Truth.from_config(CONFIG)
    rows = conformance.decade_errors(truth, max_position=10**6)
    hf = [r["hf_table"] for r in rows[2:]]
    assert all(4 < b / a < 25 for a, b in zip(hf, hf[1:]))
    assert max(r["posenc_table"] for r in rows) < 6e-8


def test_resolved_scaling_names_longropes_switch(tmp_path, capsys):
    config = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 1024,
        "rope_scaling": {
            "rope_type": "longrope",
            "short_factor": [1.0] * 4,
            "long_factor": [2.0, 3.0, 4.0, 5.0],
        },
    }
    path = tmp_path / "phi3.json"
    path.write_text(json.dumps(config))
    assert main(["check", str(path), "--max-position", "100"]) == 0
    out = capsys.readouterr().out
    assert "long factors from position 1024" in out
    assert re.search(r"attention factor \(resolved\): 1\.0954", out)  # sqrt(1 + ln 4 / ln 1024)


def test_an_mrope_config_is_checked_with_its_frequencies(tmp_path, capsys):
    path = tmp_path / "qwen2vl.json"
    path.write_text(
        json.dumps({"text_config": {**CONFIG, "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}})
    )
    assert main(["check", str(path), "--max-position", "1000"]) == 0
    assert "rope_type: default" in capsys.readouterr().out


def dump(path, positions, **arrays):
    np.savez(path, positions=np.asarray(positions), **arrays)
    return str(path)


def truth_tables(positions, dtype=torch.float32, layout="half_split"):
    rope = RotaryEmbedding.from_hf(CONFIG, layout=layout)
    cos, sin = rope.tables(torch.as_tensor(positions), dtype=dtype)
    return cos.numpy(), sin.numpy()


def test_a_correct_dump_agrees(config_path, tmp_path, capsys):
    positions = np.arange(0, 10**6, 997)
    cos, sin = truth_tables(positions)
    path = dump(tmp_path / "good.npz", positions, cos=cos, sin=sin)
    assert main(["check", str(config_path), "--against", path]) == 0
    assert "cos, sin agree with the truth at all 1004 positions" in capsys.readouterr().out


def test_a_wrong_dump_names_its_first_bad_position(config_path, tmp_path, capsys):
    positions = np.arange(2000)
    cos, sin = truth_tables(positions)
    cos[777:800] = truth_tables(np.arange(777, 800) - 1)[0]  # an off-by-one stretch
    sin[1500] *= 1.01
    path = dump(tmp_path / "bad.npz", positions, cos=cos, sin=sin)
    assert main(["check", str(config_path), "--against", path]) == 1
    out = capsys.readouterr().out
    assert "cos: first at position 777, max |error|" in out and "23 of 2000 positions" in out
    assert "positions 777 … 799" in out
    assert "sin: first at position 1500," in out


def test_transformers_own_float32_tables_are_caught_at_long_range(config_path, tmp_path, capsys):
    import_peer("transformers", "transformers' rotary is the framework dumped here")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(
        hidden_size=64, num_attention_heads=4, head_dim=16, rope_theta=500.0, max_position_embeddings=64
    )
    rotary = LlamaRotaryEmbedding(config)
    positions = np.concatenate([np.arange(0, 100), np.arange(10**5, 10**5 + 100)])
    cos, sin = rotary(torch.zeros(1), torch.as_tensor(positions)[None])
    path = dump(tmp_path / "hf.npz", positions, cos=cos[0].numpy(), sin=sin[0].numpy())
    assert main(["check", str(config_path), "--against", path]) == 1
    out = capsys.readouterr().out
    first = int(re.search(r"cos: first at position (\d+)", out).group(1))
    assert first >= 10**5  # exact enough near the start, off by ~t·2^-24 far away


def test_rotated_queries_in_the_adjacent_layout(config_path, tmp_path, capsys):
    positions = np.arange(50, 90)
    q = np.random.default_rng(0).standard_normal((40, 16))
    rope = RotaryEmbedding.from_hf(CONFIG, layout="adjacent")
    q_rot = rope(
        torch.as_tensor(q)[None, None], torch.as_tensor(q)[None, None], q_positions=torch.as_tensor(positions)
    )[0]
    good = dump(tmp_path / "q.npz", positions, q=q, q_rot=q_rot[0, 0].numpy(), layout=np.array("adjacent"))
    assert main(["check", str(config_path), "--against", good]) == 0
    bad = dump(tmp_path / "q_half.npz", positions, q=q, q_rot=q_rot[0, 0].numpy())  # read as half_split
    assert main(["check", str(config_path), "--against", bad]) == 1
    assert "q_rot: first at position 50," in capsys.readouterr().out


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"cos": np.zeros((3, 16))}, r"must hold 'positions' \[n\] and 'cos' and 'sin'.*holds \['cos'\]"),
        ({"positions": np.arange(3), "cos": np.zeros((3, 16))}, r"holds \['cos', 'positions'\]"),
        (
            {"positions": np.arange(3), "cos": np.zeros((3, 8)), "sin": np.zeros((3, 8))},
            r"npz 'cos' must be \[3, 16\]",
        ),
        (
            {
                "positions": np.arange(3),
                "cos": np.zeros((3, 16)),
                "sin": np.zeros((3, 16)),
                "layout": np.array("x"),
            },
            r"npz 'layout' must be one of half_split, adjacent, pairs",
        ),
    ],
)
def test_a_dump_without_the_documented_arrays_is_refused(config_path, tmp_path, capsys, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    assert main(["check", str(config_path), "--against", str(path)]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_bad_files_and_configs_are_one_line_errors(config_path, tmp_path, capsys):
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"not a zip")
    assert main(["check", str(config_path), "--against", str(corrupt)]) == 2
    assert "not a readable .npz file" in capsys.readouterr().err
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({**CONFIG, "rope_parameters": {"rope_type": "quadratic"}}))
    assert main(["check", str(unknown)]) == 2
    assert "config rope_type must be 'default' or one of" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
