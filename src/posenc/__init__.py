"""posenc — positional encodings for Transformers, exactly right.

NumPy tables and analysis import nothing heavy: ``import posenc`` loads neither torch
nor matplotlib. PyTorch modules live in :mod:`posenc.nn`.

>>> import posenc
>>> posenc.sinusoidal(80, 256).shape
(80, 256)
"""

from posenc import spectrum
from posenc.errors import UsageError
from posenc.tables import dft, sinusoidal

__all__ = ["UsageError", "dft", "sinusoidal", "spectrum"]
__version__ = "0.1.0"
