"""Measure every claim of the papers for any encoding: NumPy only (no torch, no matplotlib at import).

=================  ==========================================================  =====================
module             what it measures                                            source
=================  ==========================================================  =====================
``shift``          the linear shift operator ``T^(k)``; best linear shift map  Denk (2019)
``kernel``         Gram matrix, Toeplitz test, kernel vs distance, Su's decay  Su (2021)
``bilinear``       Su's ``p_mᵀ diag(h) p_n``: relative and absolute parts      Su (2021)
``fourier``        eq. 15 frequency distribution, low-pass count, spectra      Idé et al. (2024) §3
``faithfulness``   Algorithm 1 reconstruction, peak, injectivity, decoding     Idé et al. (2024)
``views``          how each registered encoding is seen (table/bias/freqs)
``scorecard``      all criteria for a registered encoding at ``(S, d)``        Kazemnejad (2019)
=================  ==========================================================  =====================
"""

from posenc.analysis.bilinear import (
    FORM_KEYS,
    bilinear_parts,
    form_summary,
    pair_coefficients,
    weighted_decay_integral,
)
from posenc.analysis.faithfulness import (
    Peak,
    dft_basis,
    inverse_dft_accuracy,
    min_pairwise_distance,
    nearest_neighbour_accuracy,
    one_hot,
    peak,
    reconstruct,
)
from posenc.analysis.fourier import (
    column_bins,
    crossing_index,
    default_bandwidth,
    dft_distribution,
    frequency_distribution,
    low_pass_count,
    table_spectrum,
)
from posenc.analysis.kernel import (
    SU_SCHEDULES,
    Geometric,
    decay_integral,
    frequency_kernel,
    gram,
    kernel_by_distance,
    riemann_limit,
    su_decay,
    toeplitz_deviation,
)
from posenc.analysis.scorecard import CRITERIA, MEANINGS, Scorecard, score_view, scorecard, scorecards
from posenc.analysis.shift import dft_shift_operator, linear_shift_residual, operator_residual, shift_operator
from posenc.analysis.views import EncodingView, encoding_view

__all__ = [
    "CRITERIA",
    "FORM_KEYS",
    "MEANINGS",
    "SU_SCHEDULES",
    "EncodingView",
    "Geometric",
    "Peak",
    "Scorecard",
    "bilinear_parts",
    "column_bins",
    "crossing_index",
    "decay_integral",
    "default_bandwidth",
    "dft_basis",
    "dft_distribution",
    "dft_shift_operator",
    "encoding_view",
    "form_summary",
    "frequency_distribution",
    "frequency_kernel",
    "gram",
    "inverse_dft_accuracy",
    "kernel_by_distance",
    "linear_shift_residual",
    "low_pass_count",
    "min_pairwise_distance",
    "nearest_neighbour_accuracy",
    "one_hot",
    "operator_residual",
    "pair_coefficients",
    "peak",
    "reconstruct",
    "riemann_limit",
    "score_view",
    "scorecard",
    "scorecards",
    "shift_operator",
    "su_decay",
    "table_spectrum",
    "toeplitz_deviation",
    "weighted_decay_integral",
]
