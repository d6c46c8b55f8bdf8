"""posenc's M-RoPE position ids against each transformers model family's own ``get_rope_index`` on seeded
random batches of text, images and videos with left and right padding (transformers' method is called on a
stand-in ``self`` holding only the config values it reads: no model is built, nothing is downloaded)."""

from __future__ import annotations

import functools
import importlib
import random
import types

import pytest
import torch
from peers import import_peer

from posenc.nn.multiaxis import mrope_position_ids as reexported
from posenc.nn.position_ids import FAMILIES, mrope_position_ids, position_ids_from_hf

import_peer("transformers", "transformers' get_rope_index is the peer")

MERGE = 2
TOKENS_PER_SECOND = 25
TEMPORAL_MERGE = 2
BATCHES = 60

CLASSES = {
    "qwen2_vl": "Qwen2VLModel",
    "paddleocr_vl": "PaddleOCRVLModel",
    "qwen2_5_vl": "Qwen2_5_VLModel",
    "qwen3_vl": "Qwen3VLModel",
    "qwen3_vl_moe": "Qwen3VLMoeModel",
    "qwen3_5": "Qwen3_5Model",
    "qwen3_5_moe": "Qwen3_5MoeModel",
    "glm4v": "Glm4vModel",
    "glm4v_moe": "Glm4vMoeModel",
    "glm46v": "Glm46VModel",
    "glm_ocr": "GlmOcrModel",
    "cosmos3_omni": "Cosmos3OmniModel",
    "ernie4_5_vl_moe": "Ernie4_5_VLMoeModel",
}


def their_get_rope_index(model_type: str):
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    cls = getattr(module, CLASSES[model_type])
    vision = types.SimpleNamespace(
        spatial_merge_size=MERGE, tokens_per_second=TOKENS_PER_SECOND, temporal_merge_size=TEMPORAL_MERGE
    )
    fake = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=vision, model_type=model_type))
    fake.get_vision_position_ids = functools.partial(cls.get_vision_position_ids, fake)
    return functools.partial(cls.get_rope_index, fake), fake.config


def random_batch(rng: random.Random, model_type: str):
    """A batch of 1–3 rows of text runs, images and videos (as the processor lays them out for this family)
    padded on the left or right, with its grids and (Qwen2.5-VL) seconds per temporal grid."""
    rule = FAMILIES[model_type]
    rows, images, videos, seconds = [], [], [], []
    for _ in range(rng.randint(1, 3)):
        row = [0] * rng.randint(0, 3)
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice([0, 1, 2])
            if kind == 0:
                row += [0] * rng.randint(1, 4)
                continue
            row.append(0)  # the vision-start token that keeps two images (or videos) apart
            h, w = MERGE * rng.randint(1, 3), MERGE * rng.randint(1, 3)
            tokens = (h // MERGE) * (w // MERGE)
            if kind == 1:
                images.append([1, h, w])
                row += [1] * tokens
            elif rule.frames_apart:  # the frames of one video, each after its timestamp text
                t = rng.randint(1, 3)
                videos.append([t, h, w])
                for _ in range(t):
                    row += [0] * rng.randint(1, 2) + [2] * tokens
            else:
                t = (TEMPORAL_MERGE if rule.temporal_merge else 1) * rng.randint(1, 5)
                videos.append([t, h, w])
                seconds.append(rng.choice([2 / 3, 0.35, 0.5, 1.0, 2.0, 1 / 3, 0.1]))
                row += [2] * (t // (TEMPORAL_MERGE if rule.temporal_merge else 1)) * tokens
        rows.append(row + [0])
    s = max(map(len, rows)) + rng.randint(0, 2)
    token_types = torch.zeros(len(rows), s, dtype=torch.long)
    mask = torch.zeros(len(rows), s, dtype=torch.long)
    for i, row in enumerate(rows):
        start = s - len(row) if rng.random() < 0.5 else 0
        token_types[i, start : start + len(row)] = torch.tensor(row)
        mask[i, start : start + len(row)] = 1
    grid = lambda g: torch.tensor(g, dtype=torch.long) if g else None
    return token_types, mask, grid(images), grid(videos), seconds


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_position_ids_equal_transformers_on_generated_batches(model_type):
    get_rope_index, config = their_get_rope_index(model_type)
    options = position_ids_from_hf(config)
    rng = random.Random(model_type)
    videos_seen = 0
    for _ in range(BATCHES):
        token_types, mask, images, videos, seconds = random_batch(rng, model_type)
        extra = {}
        if FAMILIES[model_type].absolute_time and seconds:
            extra["second_per_grid_ts"] = torch.tensor(seconds, dtype=torch.float32)  # as the processor gives
        ids = torch.zeros_like(token_types)
        theirs, their_deltas = get_rope_index(
            ids, token_types, image_grid_thw=images, video_grid_thw=videos, attention_mask=mask, **extra
        )
        ours, our_deltas = mrope_position_ids(
            token_types,
            image_grid_thw=images,
            video_grid_thw=None if videos is None else videos.clone(),
            attention_mask=mask,
            **options,
            **extra,
        )
        assert torch.equal(ours, theirs), (model_type, token_types, images, videos, seconds)
        assert torch.equal(our_deltas, their_deltas)
        videos_seen += 0 if videos is None else len(videos)
    assert videos_seen >= 20  # the batches really hold videos


def qwen25(seconds, t=4):
    """One text token, then each video (``t`` temporal grids of one merged patch) and a text token."""
    types_ = torch.tensor([[0] + ([2] * t + [0]) * len(seconds)])
    return types_, torch.tensor([[t, 2, 2]] * len(seconds))


@pytest.mark.parametrize("spg", [2 / 3, 0.35])
def test_qwen25_absolute_time_rounds_in_float32_as_transformers(spg):
    """25 tokens/s at fps 3 (2/3 s per grid): the float64 interval 25·(2/3) gives 8 of 27 temporal ids one
    lower than transformers' float32 one; posenc, given the processor's float32 seconds, gives transformers'."""
    get_rope_index, _ = their_get_rope_index("qwen2_5_vl")
    frames = {2 / 3: 27, 0.35: 144}[spg]
    token_types, videos = qwen25([spg], t=frames)
    seconds = torch.tensor([spg], dtype=torch.float32)
    theirs, _ = get_rope_index(
        torch.zeros_like(token_types), token_types, video_grid_thw=videos, second_per_grid_ts=seconds
    )
    ours, _ = mrope_position_ids(
        token_types,
        video_grid_thw=videos,
        spatial_merge_size=MERGE,
        tokens_per_second=TOKENS_PER_SECOND,
        second_per_grid_ts=seconds,
    )
    assert torch.equal(ours, theirs)
    interval = TOKENS_PER_SECOND * spg  # the float64 interval a caller would write
    float64_ids = torch.tensor([1 + int(k * interval) for k in range(frames)])
    wrong = int((theirs[0, 0, 1:-1] != float64_ids).sum())
    assert wrong == {2 / 3: 8, 0.35: 0}[spg]  # 25·0.35 is exactly 8.75 in both; 25·(2/3) is not


@pytest.mark.parametrize("dtype", [torch.float64, None])
def test_qwen25_seconds_as_float64_or_a_list_follow_torchs_types_too(dtype):
    get_rope_index, _ = their_get_rope_index("qwen2_5_vl")
    token_types, videos = qwen25([2 / 3, 0.35, 1.5])
    seconds = [2 / 3, 0.35, 1.5] if dtype is None else torch.tensor([2 / 3, 0.35, 1.5], dtype=dtype)
    theirs, _ = get_rope_index(
        torch.zeros_like(token_types), token_types, video_grid_thw=videos, second_per_grid_ts=seconds
    )
    ours, _ = mrope_position_ids(
        token_types,
        video_grid_thw=videos,
        spatial_merge_size=MERGE,
        tokens_per_second=TOKENS_PER_SECOND,
        second_per_grid_ts=seconds,
    )
    assert torch.equal(ours, theirs)


def test_multiaxis_reexports_the_builder():
    assert reexported is mrope_position_ids


def test_bad_options_are_refused_naming_them():
    types_ = torch.tensor([[0, 2, 0]])
    with pytest.raises(ValueError, match="second_per_grid_ts needs tokens_per_second"):
        mrope_position_ids(types_, video_grid_thw=torch.tensor([[1, 2, 2]]), second_per_grid_ts=[1.0])
    with pytest.raises(ValueError, match="tokens_per_second must be a positive number, got -1"):
        mrope_position_ids(types_, video_grid_thw=torch.tensor([[1, 2, 2]]), tokens_per_second=-1)
    with pytest.raises(ValueError, match="attention_mask must be \\[b, s\\]"):
        mrope_position_ids(types_, video_grid_thw=torch.tensor([[1, 2, 2]]), attention_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="model_type must be one of"):
        position_ids_from_hf({"model_type": "llama"})
