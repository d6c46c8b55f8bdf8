"""Multimodal rotary position ids (M-RoPE): ``[3, b, s]`` temporal / height / width ids of a mixed
text, image and video sequence, as the vision-language models of Hugging Face ``transformers`` build them.

Wang et al. 2024 (Qwen2-VL, sec. 2.1): text tokens get ``(c, c, c)`` with ``c`` counting on from the
previous token; an image or video whose merged patch grid is ``t × h' × w'`` (``h' = h/m``, ``w' = w/m``,
``m`` the spatial merge size) starting at ``c`` gets ``(c + τ_k, c + i, c + j)`` for its tokens in
row-major ``(k, i, j)`` order, after which ``c`` advances by ``max(h, w)/m``. The temporal ids ``τ_k``
are what the families differ in:

================================  =================================================================
family (``model_type``)           temporal id ``τ_k`` of frame-group ``k``
================================  =================================================================
Qwen2-VL, PaddleOCR-VL            ``k``
Qwen2.5-VL                        ``⌊k · (tokens_per_second · second_per_grid_ts)⌋`` for videos,
                                  in the dtype torch gives that product (Bai et al. 2025, sec. 2.1.3:
                                  absolute time); images ``k``
Qwen3-VL, Qwen3.5, GLM-4V family  ``0``: each video frame is its own grid ``(1, h, w)`` (the frames are
                                  separated by timestamp text)
Ernie-4.5-VL                      ``k`` over ``t / temporal_merge_size`` groups for videos
================================  =================================================================

:data:`FAMILIES` maps each ``model_type`` to these rules; :func:`position_ids_from_hf` reads them from a
config. Padding (``attention_mask`` 0) gets id 0 and is skipped, as in transformers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from posenc import validate


@dataclasses.dataclass(frozen=True)
class VisionIdRule:
    """How one model family forms its temporal ids (see the module docstring).

    Attributes:
        absolute_time: videos' temporal ids are ``⌊k·tokens_per_second·second_per_grid_ts⌋`` (Qwen2.5-VL).
        frames_apart: each video frame is its own grid ``(1, h, w)`` (Qwen3-VL, GLM-4V).
        temporal_merge: videos' ``t`` is divided by ``temporal_merge_size`` (Ernie-4.5-VL).
    """

    absolute_time: bool = False
    frames_apart: bool = False
    temporal_merge: bool = False


FAMILIES: dict[str, VisionIdRule] = {
    "qwen2_vl": VisionIdRule(),
    "paddleocr_vl": VisionIdRule(),
    "qwen2_5_vl": VisionIdRule(absolute_time=True),
    "qwen3_vl": VisionIdRule(frames_apart=True),
    "qwen3_vl_moe": VisionIdRule(frames_apart=True),
    "qwen3_5": VisionIdRule(frames_apart=True),
    "qwen3_5_moe": VisionIdRule(frames_apart=True),
    "glm4v": VisionIdRule(frames_apart=True),
    "glm4v_moe": VisionIdRule(frames_apart=True),
    "glm46v": VisionIdRule(frames_apart=True),
    "glm_ocr": VisionIdRule(frames_apart=True),
    "cosmos3_omni": VisionIdRule(frames_apart=True),
    "ernie4_5_vl_moe": VisionIdRule(temporal_merge=True),
}
"""``model_type`` → its :class:`VisionIdRule`, for every transformers 5.24 model whose ``get_rope_index``
takes ``mm_token_type_ids`` and builds ids this way (others: audio-interleaved Omni models, GLM-Image,
Hunyuan-VL, MiniCPM-V, are not covered)."""


def mrope_position_ids(
    token_types: torch.Tensor,
    *,
    image_grid_thw: torch.Tensor | None = None,
    video_grid_thw: torch.Tensor | None = None,
    spatial_merge_size: int = 2,
    attention_mask: torch.Tensor | None = None,
    tokens_per_second: float | None = None,
    second_per_grid_ts: torch.Tensor | Sequence[float] | None = None,
    frames_apart: bool = False,
    temporal_merge_size: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """M-RoPE position ids ``[3, b, s]`` and, per sequence, ``max id + 1 − length`` ``[b, 1]``.

    ``token_types [b, s]``: 0 text, 1 image, 2 video; each run of equal non-zero types is one image
    or video, whose ``(t, h, w)`` patch grid is the next row of ``image_grid_thw``/``video_grid_thw``
    ``[n, 3]`` (rows are consumed across the batch in order, as are ``second_per_grid_ts``).

    ``tokens_per_second`` (Qwen2.5-VL's ``vision_config.tokens_per_second``) turns on absolute time:
    video ``v``'s temporal ids are ``(arange(t) · (tokens_per_second · second_per_grid_ts[v])).long()``
    computed with torch's own types, as ``Qwen2_5_VLModel.get_rope_index`` does (a float32
    ``second_per_grid_ts`` — the processor's — gives a float32 product: with 25 tokens/s and 2/3 s, 8 of
    108 ids differ from the float64 product); without ``second_per_grid_ts`` each video's is 1.
    ``frames_apart`` splits every video grid into ``t`` grids ``(1, h, w)`` (Qwen3-VL, GLM-4V: the
    processor's ``video_grid_thw`` as given); ``temporal_merge_size`` divides videos' ``t`` (Ernie-4.5-VL).
    """
    if not isinstance(token_types, torch.Tensor) or token_types.dim() != 2:
        raise ValueError(
            f"token_types must be a [b, s] tensor of 0 (text), 1 (image), 2 (video), got {token_types!r}"
        )
    merge = validate.positive_int("spatial_merge_size", spatial_merge_size)
    temporal = validate.positive_int("temporal_merge_size", temporal_merge_size)
    videos = _grid_rows("video_grid_thw", video_grid_thw)
    if frames_apart:
        videos = [(1, h, w) for t, h, w in videos for _ in range(t)]
    grids = {1: iter(_grid_rows("image_grid_thw", image_grid_thw)), 2: iter(videos)}
    counts = {1: len(_grid_rows("image_grid_thw", image_grid_thw)), 2: len(videos)}
    seconds = _seconds(second_per_grid_ts, tokens_per_second)
    b, s = token_types.shape
    if attention_mask is not None and tuple(attention_mask.shape) != (b, s):
        raise ValueError(
            f"attention_mask must be [b, s] = {[b, s]} like token_types, got {list(attention_mask.shape)}"
        )
    mask = torch.ones(b, s, dtype=torch.bool) if attention_mask is None else attention_mask.to("cpu").bool()
    ids = torch.zeros(3, b, s, dtype=torch.long)
    deltas = []
    for row in range(b):
        types = token_types[row].to("cpu")[mask[row]].tolist()
        pieces: list[torch.Tensor] = []
        current, start = 0, 0
        while start < len(types):
            kind, end = types[start], start
            while end < len(types) and types[end] == kind:
                end += 1
            if kind == 0:
                pieces.append(torch.arange(end - start).expand(3, -1) + current)
                current += end - start
            elif kind in grids:
                name = "image_grid_thw" if kind == 1 else "video_grid_thw"
                grid = next(grids[kind], None)
                if grid is None:
                    raise ValueError(
                        f"{name} has {counts[kind]} rows, fewer than the runs of type {kind} in token_types"
                    )
                t, h, w = grid
                interval: Any = 1
                if kind == 2 and seconds is not None:
                    interval = tokens_per_second * next(seconds)  # torch's types, as transformers
                piece = _grid_ids(
                    current, t // (temporal if kind == 2 else 1), h // merge, w // merge, interval
                )
                if piece.shape[1] != end - start:
                    raise ValueError(
                        f"a run of {end - start} tokens of type {kind} does not fit its grid (t, h, w) = ({t}, {h}, "
                        f"{w}) with spatial_merge_size={merge}: expected {piece.shape[1]} tokens"
                    )
                pieces.append(piece)
                current += max(h, w) // merge
            else:
                raise ValueError(f"token_types must hold 0 (text), 1 (image) or 2 (video), got {kind}")
            start = end
        positions = torch.cat(pieces, dim=1) if pieces else torch.zeros(3, 0, dtype=torch.long)
        ids[:, row, mask[row]] = positions
        deltas.append((int(positions.max()) + 1 if positions.numel() else 0) - len(types))
    return ids.to(token_types.device), torch.tensor(deltas, device=token_types.device).unsqueeze(1)


def _grid_ids(start: int, t: int, h: int, w: int, interval: Any) -> torch.Tensor:
    """``[3, t·h·w]`` ids ``(start + ⌊k·interval⌋, start + i, start + j)`` in row-major order; the
    product ``arange(t) · interval`` is formed by torch (its dtype decides the rounding)."""
    temporal = (torch.arange(t) * interval).long()
    k, i, j = torch.meshgrid(temporal, torch.arange(h) + start, torch.arange(w) + start, indexing="ij")
    out = torch.stack([k, i, j]).reshape(3, -1)
    out[0] += start
    return out


def _seconds(
    second_per_grid_ts: torch.Tensor | Sequence[float] | None, tokens_per_second: float | None
) -> Iterator[Any] | None:
    if tokens_per_second is None:
        if second_per_grid_ts is not None:
            raise ValueError("second_per_grid_ts needs tokens_per_second (the vision config's, Qwen2.5-VL)")
        return None
    if (
        isinstance(tokens_per_second, bool)
        or not isinstance(tokens_per_second, (int, float))
        or tokens_per_second <= 0
    ):
        raise ValueError(f"tokens_per_second must be a positive number, got {tokens_per_second!r}")
    if second_per_grid_ts is None:
        return _ones()
    if isinstance(second_per_grid_ts, torch.Tensor):
        if (
            second_per_grid_ts.dim() != 1
            or second_per_grid_ts.is_complex()
            or second_per_grid_ts.dtype == torch.bool
        ):
            raise ValueError(
                f"second_per_grid_ts must be a [n_videos] tensor of seconds, got {second_per_grid_ts!r}"
            )
        rows: list[Any] = list(second_per_grid_ts.to("cpu"))  # 0-d tensors: their dtype sets the product's
        return iter(rows)
    return iter(list(second_per_grid_ts))


def _ones() -> Iterator[int]:
    while True:
        yield 1


def _grid_rows(name: str, grid: torch.Tensor | None) -> list[tuple[int, int, int]]:
    if grid is None:
        return []
    rows = torch.as_tensor(grid).tolist()
    if not all(isinstance(r, list) and len(r) == 3 for r in rows):
        raise ValueError(f"{name} must be [n, 3] (t, h, w per image or video), got {grid!r}")
    return [(int(t), int(h), int(w)) for t, h, w in rows]


def position_ids_from_hf(config: Any) -> dict[str, Any]:
    """The :func:`mrope_position_ids` options of a transformers vision-language config (object or dict):
    its ``model_type``'s :class:`VisionIdRule` and ``vision_config``'s ``spatial_merge_size``,
    ``tokens_per_second``, ``temporal_merge_size``."""
    get = (lambda c, k: c.get(k)) if isinstance(config, dict) else (lambda c, k: getattr(c, k, None))
    model_type = get(config, "model_type")
    if model_type not in FAMILIES:
        raise ValueError(
            f"config model_type must be one of {', '.join(sorted(FAMILIES))} (the M-RoPE id builders posenc "
            f"reproduces), got {model_type!r}"
        )
    rule, vision = FAMILIES[model_type], get(config, "vision_config")
    if vision is None:
        raise ValueError(f"config of model_type {model_type!r} needs a vision_config")
    out: dict[str, Any] = {
        "spatial_merge_size": get(vision, "spatial_merge_size"),
        "frames_apart": rule.frames_apart,
    }
    if rule.absolute_time:
        out["tokens_per_second"] = get(vision, "tokens_per_second")
    if rule.temporal_merge:
        out["temporal_merge_size"] = get(vision, "temporal_merge_size")
    return out
