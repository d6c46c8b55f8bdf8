"""Build any registered encoding by name: the one place where registry names become PyTorch modules.

Each encoding class names the sizes it needs in its constructor; :func:`build_encoding` supplies
those it asks for — ``d_model`` (input encodings), ``head_dim = d_model / n_heads`` (rotary,
Shaw), ``n_heads`` (ALiBi, T5), ``max_len`` (learned tables, rotary cache) — and passes the
remaining ``options`` through, so a new encoding needs only a registry entry
(:func:`posenc.registry.register`).
"""

from __future__ import annotations

import dataclasses
import inspect

import torch
from torch import nn

from posenc import registry, validate
from posenc.nn.contracts import EncodingContract
from posenc.registry import EncodingInfo, EncodingView

SIZES = registry.MODEL_SIZES
"""Constructor parameters the builder fills in from the model's sizes."""


def available_encodings() -> list[str]:
    """Names of every registered encoding (:func:`posenc.registry.names`)."""
    return registry.names()


def head_dim(d_model: int, n_heads: int) -> int:
    """``d_model / n_heads``; raises naming both when ``n_heads`` does not divide ``d_model``."""
    d_model = validate.positive_int("d_model", d_model)
    n_heads = validate.positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(
            f"d_model={d_model} must be divisible by n_heads={n_heads} (head_dim = d_model / n_heads)"
        )
    return d_model // n_heads


def build_encoding(
    name_or_module: str | nn.Module | None, *, d_model: int, n_heads: int, max_len: int, **options: object
) -> EncodingContract | None:
    """The encoding module for a registry name (``None`` for ``"none"``); a module is returned as given.

    Args:
        name_or_module: a name of :func:`available_encodings`, an ``nn.Module``, or ``None``.
        d_model, n_heads, max_len: the model's sizes, given to the constructor where it asks for them.
        **options: further constructor options of that encoding (e.g. ``layout="adjacent"`` for ``"rope"``).

    Raises ``ValueError`` for an unregistered name (listing the registered ones) and ``TypeError``
    for an option the encoding does not take (listing those it does).
    """
    sizes = {
        "d_model": d_model,
        "n_heads": n_heads,
        "head_dim": head_dim(d_model, n_heads),
        "max_len": validate.positive_int("max_len", max_len),
    }
    if name_or_module is None or isinstance(name_or_module, nn.Module):
        if options:
            raise TypeError(f"options {sorted(options)} apply only when the encoding is given by name")
        if name_or_module is not None and not isinstance(name_or_module, EncodingContract):
            raise TypeError(
                f"{type(name_or_module).__name__} is not a positional encoding: subclass a contract of "
                "posenc.nn.contracts (InputContract, RotaryContract, ScoreBiasContract, QueryBiasContract, "
                "ContextualContract)"
            )
        return name_or_module
    info = registry.get(name_or_module)
    if info.module is None:
        if options:
            raise TypeError(f"encoding {info.name!r} takes no options, got {sorted(options)}")
        return None
    cls = info.module_class()
    params = inspect.signature(cls).parameters
    accepted = sorted(p for p in params if p not in SIZES)
    for key in options:
        if key in SIZES:
            raise TypeError(
                f"{key} is set by the model; pass it to the model, not as an option of {info.name!r}"
            )
        if key not in params:
            raise TypeError(
                f"encoding {info.name!r} has no option {key!r}; its options: {', '.join(accepted)}"
            )
    module: EncodingContract = cls(**{k: v for k, v in sizes.items() if k in params}, **options)
    return module


def analysis_view(
    info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
) -> EncodingView:
    """The analysis view of a registered module: built at width ``dim`` under ``torch.manual_seed(seed)``
    (the global RNG is left as it was) and seen through its contract's ``analysis_view``."""
    if info.family != "bias":
        n_heads = 1  # only score biases have heads; d need not be divisible by n_heads otherwise
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = build_encoding(info.name, d_model=dim, n_heads=n_heads, max_len=length)
    if module is None:
        raise ValueError(f"encoding {info.name!r} has no module to analyse")
    view = module.analysis_view(name=info.name, dim=dim, seed=seed)
    built = (
        f"the {info.name} module built for d_model = {dim}, {n_heads} head{'s' if n_heads > 1 else ''}, "
        f"positions 0…{length - 1}, at initialisation (seed {seed})"
    )
    note = view.notes.get("view")
    return dataclasses.replace(view, notes={**view.notes, "view": f"{built}; {note}" if note else built})
