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
    assert "cos: first at position 777, column 0, max |error|" in out and "23 of 2000 positions" in out
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
        (
            {"cos": np.zeros((3, 16))},
            r"must hold 'positions' \[n\] \(M-RoPE: \[axes, n\]\) and 'cos' and 'sin'.*holds \['cos'\]",
        ),
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


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"head_dim": 16, "name": "\xff\xfe"}', r"not UTF-8 text \(byte 0xff at offset 26\)"),
        (
            json.dumps({**CONFIG, "rope_scaling": "linear"}).encode(),
            r"rope_parameters \(or rope_scaling\) must be an object.*got 'linear'",
        ),
        (
            json.dumps({**CONFIG, "rope_theta": [1e4, 1e6]}).encode(),
            r"config rope_theta must be a finite number, got \[10000.0",
        ),
        (b"[" * 100_000 + b"]" * 100_000, r"nested too deeply"),
        (
            json.dumps({"head_dim": 64, "partial_rotary_factor": 2.0}).encode(),
            r"partial_rotary_factor must be in \(0, 1\].*2.0",
        ),
        (
            json.dumps({**CONFIG, "rope_theta": "1e4"}).encode(),
            r"config rope_theta must be a finite number, got '1e4'",
        ),
        (
            json.dumps(
                {**CONFIG, "rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 1.5}}
            ).encode(),
            r"partial_rotary_factor must be in \(0, 1\].*1.5",
        ),
    ],
)
def test_a_config_posenc_cannot_read_is_a_one_line_error(tmp_path, capsys, content, message):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_directory_suggests_its_config_json(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    assert main(["check", str(tmp_path)]) == 2
    assert (
        f"is a directory; pass the config file in it: {tmp_path / 'config.json'}" in capsys.readouterr().err
    )


@pytest.mark.parametrize("value", ["1e20", "100000000000000000000", "0", "2.5", "many"])
def test_max_position_out_of_range_is_a_usage_error(config_path, capsys, value):
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(config_path), "--max-position", value])
    assert exit_info.value.code == 2
    assert "--max-position" in capsys.readouterr().err


def test_max_position_in_scientific_notation_is_read(config_path, capsys):
    assert main(["check", str(config_path), "--max-position", "1e3"]) == 0
    assert "[1e+02, 1e+03)" in capsys.readouterr().out


LLAMA4 = {
    "model_type": "llama4_text",
    "head_dim": 16,
    "num_hidden_layers": 4,
    "no_rope_layers": [1, 1, 1, 0],
    "attn_temperature_tuning": True,
    "floor_scale": 8192,
    "attn_scale": 0.1,
    "max_position_embeddings": 64,
    "rope_theta": 500.0,
}


def test_layer_groups_are_printed_with_nope_and_their_query_scale(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA4))
    assert main(["check", str(path), "--max-position", "100"]) == 0
    out = capsys.readouterr().out
    assert (
        "layers 0-2:\n  attention: rope_type default, base 500, rotary_dim 16 of head_dim 16, half_split pairs"
        in out
    )
    assert (
        "layers 3:\n  attention: no rope (NoPE); queries × (ln(⌊(n + 1)/8192⌋ + 1)·0.1 + 1), n the token's"
        in out
    )


def test_json_output_holds_the_groups_and_the_budget(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA4))
    assert main(["check", str(path), "--max-position", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [g["layers"] for g in report["layer_groups"]] == [[0, 1, 2], [3]]
    assert report["layer_groups"][1]["modules"][0]["rope"] is False
    assert report["ropes"][0]["resolved"]["base"] == 500.0
    assert [row["start"] for row in report["ropes"][0]["decades"]] == [1.0, 10.0]


def test_a_dump_of_a_nope_layer_that_was_rotated_names_the_layer(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA4))
    positions = np.arange(32)
    q = np.random.default_rng(0).standard_normal((32, 16))
    rope = RotaryEmbedding(16, base=500.0)
    rotated = rope(torch.from_numpy(q)[None, None], torch.from_numpy(q)[None, None])[0][0, 0].numpy()
    good, bad = tmp_path / "good.npz", tmp_path / "bad.npz"
    np.savez(good, positions=positions, q=q, q_rot=q, layer=np.array(3))
    np.savez(bad, positions=positions, q=q, q_rot=rotated, layer=np.array(3))
    assert main(["check", str(path), "--against", str(good)]) == 0
    assert "(layer 3, attention, NoPE): q_rot agree" in capsys.readouterr().out
    assert main(["check", str(path), "--against", str(bad), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)["against"]
    assert found["layer"] == 3 and found["disagreements"][0]["first_position"] == 1.0


@pytest.mark.parametrize("model_type", ["qwen2_5_vl", "qwen3_vl", "ernie4_5_vl_moe"])
def test_position_ids_dumped_by_transformers_pass_and_one_changed_id_is_named(tmp_path, capsys, model_type):
    """Ids from the family's own get_rope_index (called on a stand-in self with the config values it reads)."""
    import functools
    import importlib
    import types

    import_peer("transformers", "transformers' get_rope_index makes the dump")
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    cls = next(c for c in vars(module).values() if isinstance(c, type) and "get_rope_index" in vars(c))
    vision = {"spatial_merge_size": 2, "tokens_per_second": 25, "temporal_merge_size": 2}
    fake = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(**vision)))
    fake.get_vision_position_ids = functools.partial(cls.get_vision_position_ids, fake)
    frames = [0, 2, 2, 2, 2, 0, 2, 2, 2, 2] if model_type == "qwen3_vl" else [0, 2, 2, 2, 2, 2, 2, 2, 2]
    types_ = torch.tensor([[0, 0, 1, 1, 1, 1, 0, *frames, 0]])
    videos = torch.tensor([[2, 4, 4]]) if model_type != "ernie4_5_vl_moe" else torch.tensor([[4, 4, 4]])
    if model_type == "ernie4_5_vl_moe":
        types_ = torch.tensor([[0, 0, 1, 1, 1, 1, 0, 0] + [2] * 8 + [0]])
    images = torch.tensor([[1, 4, 4]])
    extra = (
        {"second_per_grid_ts": torch.tensor([2 / 3], dtype=torch.float32)}
        if model_type == "qwen2_5_vl"
        else {}
    )
    ids, _ = cls.get_rope_index(fake, torch.zeros_like(types_), types_, images, videos.clone(), **extra)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": model_type, "head_dim": 16, "vision_config": vision}))
    arrays = {
        "token_types": types_.numpy(),
        "image_grid_thw": images.numpy(),
        "video_grid_thw": videos.numpy(),
    }
    arrays.update({k: v.numpy() for k, v in extra.items()})
    np.savez(tmp_path / "right.npz", position_ids=ids.numpy(), **arrays)
    changed = ids.clone()
    changed[2, 0, 5] += 1  # the last image token's width id
    np.savez(tmp_path / "wrong.npz", position_ids=changed.numpy(), **arrays)
    assert main(["check", str(config), "--against", str(tmp_path / "right.npz")]) == 0
    assert "position ids agree" in capsys.readouterr().out
    assert main(["check", str(config), "--against", str(tmp_path / "wrong.npz")]) == 1
    assert "differ first at row 0, token 5: axis w is" in capsys.readouterr().out


def test_a_config_with_one_rope_per_layer_type_and_no_layer_list_checks_each(tmp_path, capsys):
    config = {
        "head_dim": 16,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["check", str(path), "--max-position", "100"]) == 0
    out = capsys.readouterr().out
    assert "layers all (sliding_attention):" in out and "layers all (full_attention):" in out
    assert "resolved (full_attention):\n  rope_type: linear" in out
    assert main(["check", str(path), "--max-position", "100", "--layer-type", "full_attention"]) == 0
    assert "sliding_attention" not in capsys.readouterr().out


def test_a_dump_of_every_layer_names_the_layer_that_disagrees(tmp_path, capsys):
    """One npz for all layers: 'layer' [L] and q/q_rot [L, n, d]; Llama 4's NoPE layer 3 was rotated."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA4))
    q = np.random.default_rng(1).standard_normal((32, 16))
    rope = RotaryEmbedding(16, base=500.0)
    rotated = rope(torch.from_numpy(q)[None, None], torch.from_numpy(q)[None, None])[0][0, 0].numpy()
    dump = tmp_path / "layers.npz"
    np.savez(
        dump, positions=np.arange(32), layer=np.arange(4), q=np.stack([q] * 4), q_rot=np.stack([rotated] * 4)
    )
    assert main(["check", str(path), "--against", str(dump)]) == 1
    out = capsys.readouterr().out
    assert all(f"(layer {i}, attention): q_rot agree" in out for i in range(3))
    assert "(layer 3, attention, NoPE): disagreements" in out
    assert main(["check", str(path), "--against", str(dump), "--json"]) == 1
    against = json.loads(capsys.readouterr().out)["against"]
    assert against["layer"] == [0, 1, 2, 3] and [d["layer"] for d in against["disagreements"]] == [3]


def test_a_fope_config_is_reported_as_vllm_serves_it(tmp_path, capsys):
    config = {
        "head_dim": 16, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "rope_scaling": {"rope_type": "default", "rope_theta": 100.0, "fope_sep_head": True, "fope_init_factor": 0.1},
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.warns(UserWarning, match="fope_init_factor, fope_sep_head: ignored, as transformers ignores"):
        assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    # θ_j = 100^(−j/8) > 2π/64 ≈ 0.0982 ⇔ j < 8·ln(64/2π)/ln 100 ≈ 4.03: j = 0 … 4, 5 of the 8 pairs
    assert "FoPE (vLLM's; transformers ignores its keys): 5 of 8 frequencies kept (θ_j > 2π/64)" in out
    assert "cos_coef/sin_coef [2, 5, 5]" in out and "cos 1/sin 0 on the other 3 pairs" in out
    with pytest.warns(UserWarning):
        assert main(["check", str(path), "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["layer_groups"]
    assert group["modules"][0]["fope"]["kept_frequencies"] == 5


def test_a_composite_config_is_checked_per_sub_config(tmp_path, capsys):
    """An encoder-decoder or Omni config keeps its ropes in sub-configs: each is printed and budgeted in turn; one
    whose rope posenc does not read (a vision rope) is named with the reason."""
    encoder = {
        "head_dim": 16,
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500.0},
    }
    decoder = {**encoder, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}
    vision = {"head_dim": 16, "rope_parameters": {"rope_type": "axial", "rope_theta": 1e4}}
    config = {"model_type": "t5gemma", "encoder": encoder, "decoder": decoder, "vision_config": vision}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["check", str(path), "--max-position", "1000"]) == 0
    out = capsys.readouterr().out
    assert "(sub-configs: encoder, decoder, vision_config)" in out
    encoder_part, decoder_part = out.split("sub-config decoder:")
    assert "sub-config encoder:" in encoder_part and "base 500" in encoder_part
    assert "rope_type linear" in decoder_part and "factor: 2" in decoder_part
    assert "sub-config vision_config: not read (config rope_type must be" in out and "got 'axial'" in out
    assert out.count("max |error| against float64 angles") == 2
    assert main(["check", str(path), "--json", "--max-position", "1000"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["path"] for s in report["submodels"]] == ["encoder", "decoder", "vision_config"]
    assert report["submodels"][1]["ropes"][0]["resolved"]["rope_type"] == "linear"
    assert main(["check", str(path), "--against", str(tmp_path / "dump.npz")]) == 2
    assert "--against: CONFIG" in capsys.readouterr().err


def test_a_2d_vision_rope_is_printed_without_a_1d_budget(tmp_path, capsys):
    config = {
        "model_type": "pixtral",
        "head_dim": 16,
        "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 1e4},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "rope_type axial" in out
        and "2 position axes (no 1-D float32 budget" in out
        and "Pixtral's 2-D rope" in out
    )
    assert "max |error|" not in out
