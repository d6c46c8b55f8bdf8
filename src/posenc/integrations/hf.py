"""Swap a Hugging Face ``transformers`` model's rotary embedding for posenc's float64-angle one, verified.

transformers' rotary modules share one interface, ``forward(x, position_ids)``, and return the
tables their attention layers apply, in one of four *forms*::

    half_split   (cos, sin) [b, s, r], cat(freqs, freqs)          Llama, Mistral, Qwen, GPT-NeoX, Gemma …
    adjacent     (cos, sin) [b, s, r], repeat_interleave(freqs)   Cohere, Cohere2
    pairs        (cos, sin) [b, s, r/2], one value per pair       gpt-oss
    complex      freqs_cis  [b, s, r/2], cos + i·sin              Llama 4, DeepSeek-V2

each already multiplied by the rope type's attention factor, in ``x``'s dtype (``complex``: complex64).
Position ids are ``[b, s]``, or ``[3, b, s]`` for M-RoPE (Qwen2-VL, Qwen3-VL: time, height, width;
:class:`posenc.nn.multiaxis.MultiAxisRotary`). transformers forms the angles ``position_ids · inv_freq``
in float32, off by up to ``t·2^−24`` radians (0.06 at ``t = 10^6``); :class:`HFRotary` has the same
interface and forms them in float64.

:func:`swap_rotary` proves each replacement before it makes it: it calls the model's own rotary and
posenc's on the same probe positions (near ones, calls ending on either side of the context lengths where
``dynamic`` and ``longrope`` switch, and far ones up to 16× ``max_position_embeddings``) and replaces nothing unless every
table agrees within float32 round-off of the angles. Usage::

    from transformers import LlamaForCausalLM
    from posenc.integrations.hf import swap_rotary

    model = LlamaForCausalLM.from_pretrained(...)
    swap_rotary(model)            # same logits (float32 round-off), exact angles at any position

Nothing here imports transformers: the model is only walked and one attribute replaced.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from posenc.nn.multiaxis import MultiAxisRotary
from posenc.nn.rotary import RotaryEmbedding
from posenc.rope_spec import ModuleRope, hf_rope_spec

FORMS: tuple[str, ...] = ("half_split", "adjacent", "pairs", "complex")

_ROUNDING = 2.0**-21
"""Allowed difference per radian of angle between transformers' float32 tables and posenc's: the
product ``fl(t)·fl(θ)`` and ``θ``'s own rounding are ``≤ 2^−24`` relative each, kept with a margin of 8."""


class HFRotary(nn.Module):
    """A drop-in for a transformers rotary module: ``forward(x, position_ids)`` → the tables in ``form``.

    Args:
        rope: a :class:`posenc.nn.RotaryEmbedding` without xPos; a dict ``{layer_type: RotaryEmbedding}``
            for models with one rope per layer type (Gemma 3), called as ``forward(x, position_ids,
            layer_type=…)``; or a half-split :class:`MultiAxisRotary` (M-RoPE), which takes
            ``position_ids [A, b, s]`` (``[b, s]`` stands for all axes, as in Qwen2-VL).
        form: the tables returned (module docstring); for a ``RotaryEmbedding`` ``half_split`` or
            ``adjacent`` must equal its layout (``pairs``/``complex`` take any layout).
        axes_last: position ids are ``[N, A]`` and the tables ``[N, r]`` (the vision towers' axial
            rope of Qwen2-VL/Qwen3-VL, rope type ``axial``); only with a :class:`MultiAxisRotary`.
    """

    def __init__(
        self,
        rope: RotaryEmbedding | MultiAxisRotary | dict[str, RotaryEmbedding],
        *,
        form: str = "half_split",
        axes_last: bool = False,
    ) -> None:
        super().__init__()
        if axes_last and not isinstance(rope, MultiAxisRotary):
            raise ValueError("axes_last=True needs a MultiAxisRotary (positions [N, axes])")
        self.axes_last = axes_last
        if form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(map(repr, FORMS))}, got {form!r}")
        ropes = rope if isinstance(rope, dict) else {"": rope}
        for r in ropes.values():
            if not isinstance(r, (RotaryEmbedding, MultiAxisRotary)):
                raise TypeError(
                    f"rope must be a posenc RotaryEmbedding or MultiAxisRotary, got {type(r).__name__}"
                )
            if getattr(r, "xpos_scale_base", None) is not None:
                raise ValueError("transformers applies one (cos, sin) to q and k: rope must have no xPos")
            if form in ("half_split", "adjacent") and r.layout != form:
                raise ValueError(
                    f"form={form!r} returns tables in that layout: rope must have layout={form!r}, "
                    f"got layout={r.layout!r}"
                )
        self.form = form
        self.ropes = nn.ModuleDict(ropes) if "" not in ropes else None
        self.rope = ropes.get("")

    @classmethod
    def from_config(cls, config: object, *, form: str = "half_split") -> HFRotary:
        """The posenc rotary for a transformers config, built from :func:`posenc.rope_spec.hf_rope_spec`:
        M-RoPE where the spec has an ``mrope_section``, one rope per layer type where the config keys its
        rope parameters by layer type (only the types some layer uses with a rope: transformers builds no
        other), else one rope for the layers that rotate (NoPE layers take none)."""
        layout = "adjacent" if form == "adjacent" else "half_split"
        parameters = getattr(config, "rope_parameters", None) or {}
        if parameters.get("rope_type") == "axial":  # Qwen2-VL/Qwen3-VL vision: (h, w) over halves of d_h/2
            head_dim = getattr(config, "head_dim", None) or (
                (getattr(config, "embed_dim", None) or config.hidden_size) // config.num_attention_heads  # type: ignore[attr-defined]
            )
            half = 2 * (head_dim // 4)
            rope = MultiAxisRotary.axial(
                head_dim, [half, half], base=parameters.get("rope_theta", 10000.0), layout=layout
            )
            return cls(rope, form=form, axes_last=True)
        ropes = spec_ropes(config)
        if any(m.mrope_section is not None for m in ropes.values()):
            if form != "half_split":
                raise ValueError(f"M-RoPE tables are built in the half_split form only, got form={form!r}")
            return cls(MultiAxisRotary.from_hf(config), form=form)
        max_len = min(int(getattr(config, "max_position_embeddings", None) or 2048), 8192)
        if None in ropes:
            return cls(rotary_from_spec(ropes[None], layout=layout, max_len=max_len), form=form)
        return cls(
            {str(t): rotary_from_spec(m, layout=layout, max_len=max_len) for t, m in ropes.items()}, form=form
        )

    def _rope_for(self, layer_type: str | None) -> RotaryEmbedding | MultiAxisRotary:
        if self.ropes is not None:
            if layer_type is None or layer_type not in self.ropes:
                raise ValueError(f"layer_type must be one of {list(self.ropes)}, got {layer_type!r}")
            rope: Any = self.ropes[layer_type]
            return rope
        assert self.rope is not None
        return self.rope

    @torch.no_grad()
    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor] | torch.Tensor:
        """The tables in :attr:`form` for ``position_ids [b, s]`` (M-RoPE: ``[A, b, s]`` or ``[b, s]``)."""
        rope = self._rope_for(layer_type)
        if isinstance(rope, MultiAxisRotary):
            if self.axes_last:
                position_ids = position_ids.transpose(0, -1)
            elif position_ids.dim() == 2:
                position_ids = position_ids.expand(rope.n_axes, -1, -1)
            cos, sin = rope.cos_sin(position_ids, dtype=torch.float64)
        else:
            if position_ids.dim() != 2:
                raise ValueError(
                    f"position_ids must be [b, s] for a 1-D rotary, got shape {list(position_ids.shape)}"
                    + (
                        " (3 axes of positions: an M-RoPE model; its config needs mrope_section)"
                        if position_ids.dim() == 3
                        else ""
                    )
                )
            cos, sin = rope.cos_sin(
                position_ids.shape[-1], positions=position_ids, dtype=torch.float64, device=x.device
            )
        if self.form in ("half_split", "adjacent"):
            return cos.to(x.dtype), sin.to(x.dtype)
        half = rope.rotary_dim // 2
        pick = (lambda t: t[..., :half]) if rope.layout == "half_split" else (lambda t: t[..., 0::2])
        if self.form == "pairs":
            return pick(cos).to(x.dtype), pick(sin).to(x.dtype)
        return torch.complex(pick(cos), pick(sin)).to(torch.complex64)


def spec_ropes(config: object) -> dict[str | None, ModuleRope]:
    """The ropes one transformers rotary module of ``config`` must produce, by the layer type it is called
    with (``None``: called without one), from :func:`posenc.rope_spec.hf_rope_spec`.

    transformers' rotary module serves every rotating layer and sub-module of its model with one table per
    layer type (DeepSeek-V3.2's indexer and MLA read the same tables, each in its own pair layout), so the
    rotating modules of one layer type must agree on the frequencies (type, base, rotary dims, parameters,
    attention factor); they are refused otherwise, naming both. NoPE modules need no table.
    """
    out: dict[str | None, ModuleRope] = {}
    for group in hf_rope_spec(config):
        for module in group.modules:
            if not module.rope:
                continue
            seen = out.setdefault(module.layer_type, module)
            if _frequencies(seen) != _frequencies(module):
                raise ValueError(
                    f"layers {group.describe_layers()} ({module.module}) rotate with {_frequencies(module)}, "
                    f"but the rotary module's {module.layer_type or 'one'} table has {_frequencies(seen)}"
                )
    if not out:
        raise ValueError("the config's rope spec gives no layer a rope (every layer NoPE): no table to build")
    return out


def _frequencies(module: ModuleRope) -> tuple[object, ...]:
    return (
        module.rope_type,
        module.head_dim,
        module.rotary_dim,
        module.base,
        sorted(module.parameters.items()),
        module.attention_factor,
    )


def rotary_from_spec(module: ModuleRope, *, layout: str, max_len: int = 2048) -> RotaryEmbedding:
    """The :class:`posenc.nn.RotaryEmbedding` of one rotating :class:`posenc.rope_spec.ModuleRope`: its rope
    type, base, head and rotary dims and resolved parameters, tables in ``layout``. Its attention factor
    (YaRN's ``0.1·ln(s) + 1``, LongRoPE's, or the config's own) must equal the spec's."""
    if not module.rope:
        raise ValueError(f"module {module.module!r} is NoPE in the spec: it has no rotary embedding")
    if module.axis_frequencies is not None:
        raise ValueError(
            f"module {module.module!r} has a {len(module.axis_frequencies)}-axis {module.rope_type} rope: build "
            "posenc.nn.MultiAxisRotary(head_dim, axis_frequencies) for it"
        )
    options = dict(module.parameters)
    factor = options.pop("factor", None)
    scaled = module.rope_type not in (None, "default")
    assert module.head_dim is not None and module.base is not None
    rope = RotaryEmbedding(
        module.head_dim,
        base=module.base,
        rotary_dim=module.rotary_dim,
        layout=layout,
        scaling=module.rope_type if scaled else None,
        scaling_factor=factor if scaled else None,
        scaling_options=options if scaled else None,
        max_len=max_len,
    )
    expected = 1.0 if module.attention_factor is None else module.attention_factor
    if abs(rope.attention_factor - expected) > 1e-12 * max(1.0, abs(expected)):
        raise ValueError(
            f"module {module.module!r}: the rotary built from the spec has attention factor "
            f"{rope.attention_factor!r}, the spec {expected!r}"
        )
    return rope


class RotaryMismatch(ValueError):
    """A model's rotary that posenc would not reproduce; the message names the model, module and difference."""


def _probe_positions(config: object, axes: int, axes_last: bool) -> list[torch.Tensor]:
    """The position ids of the probe calls: near (0 … 63); for each context length ``L`` of the
    config (``max_position_embeddings``, ``original_max_position_embeddings``), calls ending at
    ``L − 1`` and at ``L`` (LongRoPE switches, dynamic NTK starts growing, between the two); far
    (around ``max_position_embeddings``, up to 16× it and 10^5); near again (dynamic returns to its
    original frequencies). Shaped ``[1, n]``, ``[A, 1, n]`` or, ``axes_last``, ``[n, A]``."""
    longest = int(getattr(config, "max_position_embeddings", None) or 2048)
    parameters = getattr(config, "rope_parameters", None) or {}
    original = getattr(config, "original_max_position_embeddings", None) or (
        parameters.get("original_max_position_embeddings") if isinstance(parameters, dict) else None
    )
    near = torch.arange(64)
    calls = [near]
    for length in sorted({longest, int(original or longest)}):
        edge = torch.arange(max(length - 64, 0), length)
        calls += [edge, edge + 1]
    far = torch.tensor([0, 1, longest - 1, longest, longest + 1, 2 * longest, 16 * longest + 3, 100_003])
    calls += [far, near]
    if axes == 1:
        return [p[None] for p in calls]
    # distinct coordinates per axis, so that a wrong section assignment shows
    stacked = [torch.stack([p * (2 * a + 1) // (a + 1) + a for a in range(axes)]) for p in calls]
    return [p.T.contiguous() if axes_last else p[:, None] for p in stacked]


def _tables(out: object) -> list[torch.Tensor] | None:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    return None


def _difference(theirs: object, ours: object, positions: torch.Tensor, *, axes_last: bool) -> str | None:
    """``None`` when ``ours`` equals ``theirs`` within float32 angle round-off; else what differs."""
    a, b = _tables(theirs), _tables(ours)
    if a is None:
        return f"it returns {type(theirs).__name__}, not tensors"
    assert b is not None
    if len(a) != len(b) or any(x.shape != y.shape or x.is_complex() != y.is_complex() for x, y in zip(a, b)):
        return (
            f"it returns {[(list(x.shape), str(x.dtype)) for x in a]}, posenc's form "
            f"{[(list(y.shape), str(y.dtype)) for y in b]}"
        )
    reach = (
        positions.abs().amax(dim=-1 if axes_last else 0).to(torch.float64).reshape(-1)
    )  # largest coordinate
    for name, x, y in zip(("cos", "sin"), a, b):
        x64 = torch.view_as_real(x).flatten(-2) if x.is_complex() else x
        y64 = torch.view_as_real(y).flatten(-2) if y.is_complex() else y
        x64, y64 = (
            x64.to(torch.float64).reshape(reach.numel(), -1),
            y64.to(torch.float64).reshape(reach.numel(), -1),
        )
        scale = max(float(y64.abs().max()), 1.0)
        allowed = scale * (1e-5 + _ROUNDING * reach)[:, None]
        bad = (x64 - y64).abs() > allowed
        if bool(bad.any()):
            row, col = (int(i) for i in bad.nonzero()[0])
            what = "tables" if x.is_complex() else name
            return (
                f"{what} differ first at position {int(reach[row])}, column {col}: theirs {float(x64[row, col]):.6g}, "
                f"posenc's {float(y64[row, col]):.6g} (max |difference| {float((x64 - y64).abs().max()):.3g})"
            )
    return None


def _posenc_rotary(config: object, form: str) -> HFRotary:
    return HFRotary.from_config(config, form=form)


_UNREADABLE = "posenc cannot read its config"
_SIGNIFICAND_BITS = {torch.bfloat16: 8, torch.float16: 11}


def _primed(ours: HFRotary, module: nn.Module) -> HFRotary:
    """``ours`` in the state of a dynamic-NTK ``module`` that already ran past its context: transformers'
    ``dynamic_rope_update`` keeps the longest length seen in ``max_seq_len_cached`` (and returns to the
    original frequencies only on a call shorter than ``original_max_seq_len``); one call at that length
    puts posenc's rope in the same state."""
    seen, original = (
        getattr(module, "max_seq_len_cached", None),
        getattr(module, "original_max_seq_len", None),
    )
    if (
        isinstance(seen, torch.Tensor) and seen.numel() == 1
    ):  # transformers stores the call's max + 1 as found
        seen = int(seen)
    rope = ours.rope
    if (
        getattr(module, "rope_type", None) == "dynamic"
        and isinstance(rope, RotaryEmbedding)
        and isinstance(seen, int)
        and isinstance(original, int)
        and seen > original
    ):
        device = next((b.device for b in ours.buffers()), torch.device("cpu"))
        ours(torch.zeros(1, 1, 1, device=device), torch.tensor([[seen - 1]], device=device))
    return ours


def _verify(module: nn.Module, make: Callable[[str], HFRotary]) -> tuple[HFRotary | None, list[str]]:
    """The first form whose posenc rotary gives ``module``'s tables on every probe, and why the others failed."""
    config = module.config
    if len(inspect.signature(module.forward).parameters) < 2:
        return None, [
            "its forward takes no position ids (a fixed table, e.g. Llama 4's vision rope over one image grid), "
            "so posenc can neither probe nor replace it"
        ]
    device = next((b.device for b in module.buffers()), torch.device("cpu"))
    inv_freq = getattr(module, "inv_freq", None)
    if isinstance(inv_freq, torch.Tensor) and inv_freq.dtype not in (torch.float32, torch.float64):
        return None, [
            f"its inv_freq buffer is {inv_freq.dtype} (the model was cast with .to({inv_freq.dtype})), so its "
            f"frequencies are rounded to {_SIGNIFICAND_BITS.get(inv_freq.dtype, 'fewer')} significant bits and its rotation is not "
            "the config's; swap before casting (swap_rotary(model), then model.to(...)): posenc's tables follow "
            "the input's dtype"
        ]
    reasons = []
    for form in FORMS:
        try:
            ours = _primed(make(form).to(device), module)
        except Exception as error:  # a config posenc cannot read (or that refuses to be read): a refusal
            return None, [f"{_UNREADABLE}: {type(error).__name__}: {error}"]
        theirs = copy.deepcopy(module)  # probing may change a dynamic rope's state: never the model's own
        layer_types = list(ours.ropes) if ours.ropes is not None else [None]
        axes = ours.rope.n_axes if isinstance(ours.rope, MultiAxisRotary) else 1
        axes_last = ours.axes_last
        difference = None
        for layer_type in layer_types:
            kwargs = {} if layer_type is None else {"layer_type": layer_type}
            for positions in _probe_positions(config, axes, axes_last):
                x = torch.zeros(1, 1, 1, device=device)
                p = positions.to(device)
                try:
                    expected = theirs(x, p, **kwargs)
                except Exception as error:  # their module's own failure, reported, not ours
                    return None, [f"it fails on position_ids of shape {list(p.shape)}: {error}"]
                difference = _difference(expected, ours(x, p, **kwargs), positions, axes_last=axes_last)
                if difference is not None:
                    break
            if difference is not None:
                break
        if difference is None:
            return _primed(make(form).to(device), module), []
        reasons.append(f"as {form}: {difference}")
    return None, reasons


def _rope_flag_disagreements(model: nn.Module) -> list[str]:
    """Attention modules whose own rope flag (``use_rope`` with a ``layer_idx``: Llama 4, SmolLM3, Mistral
    Large 4) says otherwise than :func:`posenc.rope_spec.hf_rope_spec` of their config for that layer."""
    out = []
    specs: dict[int, dict[int, bool]] = {}
    for name, module in model.named_modules():
        flag, index, config = (getattr(module, k, None) for k in ("use_rope", "layer_idx", "config"))
        if flag is None or not isinstance(index, int) or config is None:
            continue
        if id(config) not in specs:
            try:
                groups = hf_rope_spec(config)
            except (ValueError, TypeError):  # an unreadable config: its rotary's own check refuses it
                groups = []
            specs[id(config)] = {i: any(m.rope for m in g.modules) for g in groups for i in g.layers}
        expected = specs[id(config)].get(index)
        if expected is not None and bool(flag) != expected:
            out.append(
                f"{name} (layer {index}) has use_rope={flag!r}, but its config's rope spec makes layer "
                f"{index} {'rotate' if expected else 'NoPE'}"
            )
    return out


def swap_rotary(model: nn.Module) -> list[str]:
    """Replace every transformers rotary module inside ``model`` by a verified :class:`HFRotary`; return their names.

    A rotary module is recognised by its class name ending in ``RotaryEmbedding`` and its ``config``
    (the model config it was built from). Its replacement is built from that config's
    :func:`posenc.rope_spec.hf_rope_spec` (:func:`spec_ropes`: per layer type, rope type, base, rotary
    dims, scaling parameters and attention factor; :meth:`MultiAxisRotary.from_hf` for M-RoPE). Before
    anything is replaced, each module and its posenc replacement are called on the probe positions of
    the module docstring, in each of the four table forms (how transformers' module hands the tables to
    its attention, which is not the attention's pair layout: GLM's adjacent pairs read half-split
    tables); the first form that agrees everywhere is installed. An attention module whose ``use_rope``
    flag disagrees with the spec's rope or NoPE for its layer is refused (the spec and the model would
    rotate different layers).
    Raises :class:`RotaryMismatch` (a ``ValueError``), naming the model class, the module and the
    first difference, and leaves the model untouched if any module cannot be reproduced (a rotary
    whose forward takes no position ids, a fixed table such as Llama 4's vision rope, is refused); raises
    ``ValueError`` if ``model`` has none.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    plan = []
    refusals = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if not (type(child).__name__.endswith("RotaryEmbedding") and hasattr(child, "config")):
                continue
            path = f"{name}.{child_name}" if name else child_name
            replacement, reasons = _verify(child, functools.partial(_posenc_rotary, child.config))
            if replacement is None:
                refusals.append(f"{path} ({type(child).__name__}): " + "; ".join(reasons))
            else:
                plan.append((module, child_name, path, replacement))
    refusals += _rope_flag_disagreements(model)
    if refusals:
        unreadable = [r for r in refusals if _UNREADABLE in r]
        lead = (
            f"{unreadable[0].split(' (')[0]}'s config could not be read"
            if unreadable
            else "posenc's rotary would not give the same rotation"
        )
        raise RotaryMismatch(
            f"swap_rotary refused {type(model).__name__}: {lead}, so nothing was replaced. "
            + " | ".join(refusals)
        )
    if not plan:
        raise ValueError(
            f"{type(model).__name__} has no transformers rotary embedding (a *RotaryEmbedding with a config)"
        )
    for module, child_name, _, replacement in plan:
        setattr(module, child_name, replacement)
    return [path for *_, path, _ in plan]
