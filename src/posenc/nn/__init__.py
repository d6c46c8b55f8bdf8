"""PyTorch modules: input encodings, rotary embeddings, attention biases, and an encoder that takes any.

Shapes are batch-first: tokens ``[b, s, d]``, attention ``[b, h, s, d_h]``.
"""

from posenc.nn.input import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding

__all__ = ["DFTEncoding", "LearnableFrequencyEncoding", "LearnedEncoding", "SinusoidalEncoding"]
