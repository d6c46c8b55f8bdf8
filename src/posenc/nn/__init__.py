"""PyTorch modules: input encodings, rotary embeddings, attention biases, and an encoder that takes any.

Shapes are batch-first: tokens ``[b, s, d]``, attention ``[b, h, s, d_h]``. Every encoding
module implements one contract of :mod:`posenc.nn.contracts` (its ``family``).
"""

from posenc.nn.attention import MultiHeadAttention, TransformerEncoder, TransformerEncoderLayer
from posenc.nn.bias import ALiBiBias, ShawRelativeBias, T5RelativeBias, alibi_slopes
from posenc.nn.build import available_encodings, build_encoding
from posenc.nn.contextual import CoPE
from posenc.nn.contracts import (
    ContextualContract,
    EncodingContract,
    InputContract,
    PositionContext,
    QueryBiasContract,
    RotaryContract,
    ScoreBiasContract,
    ScoreTerm,
)
from posenc.nn.dual_chunk import DualChunkPositions, dual_chunk_positions
from posenc.nn.fope import FourierRotary
from posenc.nn.input import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding
from posenc.nn.multiaxis import MultiAxisRotary
from posenc.nn.prope import PartialRotary
from posenc.nn.randomized import RandomizedPositions, randomized_positions
from posenc.nn.relative import FIREBias, KerpleBias, KerplePowerBias, SandwichBias
from posenc.nn.rotary import RotaryEmbedding, apply_rotary, permute_rotary_weights

__all__ = [
    "ALiBiBias",
    "CoPE",
    "ContextualContract",
    "DFTEncoding",
    "DualChunkPositions",
    "EncodingContract",
    "FIREBias",
    "FourierRotary",
    "InputContract",
    "KerpleBias",
    "KerplePowerBias",
    "LearnableFrequencyEncoding",
    "LearnedEncoding",
    "MultiAxisRotary",
    "MultiHeadAttention",
    "PartialRotary",
    "PositionContext",
    "QueryBiasContract",
    "RandomizedPositions",
    "RotaryContract",
    "RotaryEmbedding",
    "SandwichBias",
    "ScoreBiasContract",
    "ScoreTerm",
    "ShawRelativeBias",
    "SinusoidalEncoding",
    "T5RelativeBias",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "alibi_slopes",
    "apply_rotary",
    "available_encodings",
    "build_encoding",
    "dual_chunk_positions",
    "permute_rotary_weights",
    "randomized_positions",
]
