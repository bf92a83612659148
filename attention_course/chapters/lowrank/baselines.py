r"""Baselines for "approximately low-rank": the uniform part, the input length, and sink heads.

Three things make an attention matrix *look* low-rank without carrying structure:

* **the uniform part.** A soft head is close to the uniform matrix :math:`\tfrac1S \mathbf 1\mathbf 1^\top`,
  which has rank 1 and says nothing about the input. :func:`uniform_error` is the error of
  that trivial approximation, and :func:`centred_rank_k_error` the rank-:math:`k` error of
  what is left once the mean row is removed:

  .. math::

      \bar A = A - \mathbf 1 \mu^\top,\quad \mu = \tfrac1T A^\top \mathbf 1, \qquad
      e_k^{\text{centred}} = \frac{\|\bar A - \bar A_k\|_F}{\|\bar A\|_F};

* **short inputs.** A rank of 8 is small only if :math:`n \gg 8`. :func:`loglog_slope` fits the
  growth of the effective rank with :math:`n`, on inputs made by :func:`long_text` (sentences
  shipped in this module, joined up to MiniLM's 512 positions);
* **sink heads.** A head whose rows all put their weight on ``[CLS]`` or ``[SEP]`` has
  nearly rank 1 because it is a no-op (Clark et al. 2019); :func:`sink_share` measures it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core._backend import Array, to_numpy
from .spectra import rank_k_error, topk_sparsify

__all__ = ["SENTENCES", "uniform_error", "centred_rank_k_error", "rank_vs_topk", "sink_share", "loglog_slope"]

SENTENCES = (
    "The committee postponed its final decision on the new library because several members wanted "
    "more time to read the long report from the city engineers.",
    "After the storm finally passed over the harbour, the old fishermen repaired their torn nets and "
    "sailed back out to the open sea before sunrise.",
    "She explained to the villagers that the new stone bridge would connect the two small farms on "
    "opposite banks of the river by next summer.",
    "Although the recipe in her grandmother's notebook looked simple, the bread took three attempts "
    "and a warmer kitchen before it finally rose properly.",
    "The museum reopened last spring with a much larger collection of paintings, letters and "
    "photographs from the nineteenth century than anyone had expected.",
    "Two students spent the whole afternoon in the laboratory measuring how quickly the warm water "
    "cooled in cups made of glass, paper and steel.",
    "When the train stopped between two stations, the passengers opened the windows and listened to "
    "the birds in the quiet fields beside the track.",
    "The new mayor promised to repair the roads before winter, but the budget she inherited left "
    "very little money for anything except salaries.",
    "His brother had never seen the mountains, so they drove north for two days and camped beside a "
    "cold lake under a sky full of stars.",
    "The doctor asked the patient to describe the pain carefully, because the same symptom can have "
    "many different causes in older people.",
    "In the small bookshop near the station, an old man sold maps of cities that had changed their "
    "names several times during the last century.",
    "The engineers tested the bridge with heavy trucks for a week before they allowed the first "
    "buses and bicycles to cross the river.",
    "Every morning the baker opened the shop at six, and by eight o'clock the shelves were already "
    "half empty because the bread was so good.",
    "The children built a small boat out of wood and string and watched it drift slowly down the "
    "stream until it disappeared behind the trees.",
    "Nobody in the village could remember who had planted the enormous oak tree that stood in the "
    "middle of the square in front of the church.",
    "The orchestra rehearsed the difficult symphony for months, and on the night of the concert the "
    "hall was full of friends, critics and curious students.",
    "A sudden change in the weather forced the climbers to turn back only a few hundred metres below "
    "the summit of the mountain.",
    "The library lends not only books but also tools, musical instruments and games, which has made "
    "it popular with families in the neighbourhood.",
    "After years of careful work, the historians finally published a complete edition of the "
    "letters that the poet wrote to her sister.",
    "The farmers met in the old school to discuss whether they should share one large machine "
    "instead of each buying a smaller one.",
)


def long_text(n_sentences: int = len(SENTENCES)) -> str:
    """The first ``n_sentences`` of :data:`SENTENCES` joined by spaces (about 29 WordPiece tokens each).

    Examples
    --------
    >>> len(SENTENCES), long_text(2).count(".")
    (20, 2)
    """
    if int(n_sentences) != n_sentences or not 1 <= n_sentences <= len(SENTENCES):
        raise ValueError(f"n_sentences={n_sentences!r}; expected 1 <= n_sentences <= {len(SENTENCES)}")
    return " ".join(SENTENCES[: int(n_sentences)])


def uniform_error(A: Array) -> np.ndarray:
    r"""Relative error of the uniform matrix, :math:`\|A - \tfrac1S\mathbf 1\mathbf 1^\top\|_F / \|A\|_F`.

    The baseline for any rank-:math:`k` error of a row-stochastic matrix: the uniform matrix
    has rank 1 and carries no information about the input.

    Parameters
    ----------
    A : array, shape (..., T, S)

    Returns
    -------
    numpy.ndarray, shape (...,)

    Examples
    --------
    >>> float(uniform_error(np.eye(2)).round(4))  # |I - J/2| / |I| = sqrt(4 * 0.25) / sqrt(2)
    0.7071
    """
    a = to_numpy(A)
    return np.linalg.norm(a - 1.0 / a.shape[-1], axis=(-2, -1)) / np.linalg.norm(a, axis=(-2, -1))


def centred_rank_k_error(A: Array, k: int) -> np.ndarray:
    r"""Rank-``k`` error of :math:`A` with its mean row removed, relative to the centred matrix.

    .. math::

        \bar A = A - \mathbf 1 \mu^\top, \quad \mu_j = \tfrac1T \sum_i A_{ij}, \qquad
        \frac{\|\bar A - \bar A_k\|_F}{\|\bar A\|_F}

    Parameters
    ----------
    A : array, shape (..., T, S); no matrix may have all rows equal (then :math:`\bar A = 0`).
    k : int

    Returns
    -------
    numpy.ndarray, shape (...,)

    Examples
    --------
    >>> A = np.array([[0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
    >>> float(rank_k_error(A, 1).round(3)), abs(float(centred_rank_k_error(A, 1).round(3)))
    (0.46, 0.0)
    """
    a = to_numpy(A)
    return rank_k_error(a - a.mean(axis=-2, keepdims=True), k)  # (..., T, S) minus its mean row


def rank_vs_topk(A: Array, k: int) -> tuple[float, float, bool]:
    r"""Rank-``k`` against top-``k`` at equal budget, both measured on the informative part of ``A``.

    .. math::

        e_{\text{rank}} = \frac{\|\bar A - \bar A_k\|_F}{\|\bar A\|_F}, \qquad
        e_{\text{top}} = \frac{\|A - \operatorname{top}_k(A)\|_F}{\|\bar A\|_F}, \qquad
        \bar A = A - \mathbf 1 \mu^\top

    The rank-:math:`k` approximation is :math:`\mathbf 1\mu^\top + \bar A_k` and stores
    :math:`k(T + S) + S` numbers; top-:math:`k` keeps ``k`` entries per row, a value and an index
    each, :math:`2kT` numbers: equal budgets when :math:`T = S`. Both errors are divided by
    :math:`\|\bar A\|_F`, so an approximation that only recovers the uniform part scores about 1.

    Parameters
    ----------
    A : array, shape (T, S), rows not all equal
    k : int

    Returns
    -------
    (rank_error, topk_error, rank_wins) : (float, float, bool)

    Examples
    --------
    >>> rank_vs_topk(np.eye(4), 1)   # a permutation: sparse, not low-rank
    (0.816..., 0.0, False)
    """
    a = np.asarray(to_numpy(A), dtype=float)
    centred = a - a.mean(axis=-2, keepdims=True)  # (T, S) minus the mean row
    rank_err = float(rank_k_error(centred, k))
    topk_err = float(np.linalg.norm(a - topk_sparsify(a, k)) / np.linalg.norm(centred))
    return rank_err, topk_err, rank_err < topk_err


def sink_share(A: Array, positions: Sequence[int]) -> np.ndarray:
    """Mean over queries of the weight on the key ``positions`` (e.g. ``[0, n - 1]``: [CLS], [SEP]).

    Parameters
    ----------
    A : array, shape (..., T, S)
    positions : sequence of int, key indices

    Returns
    -------
    numpy.ndarray, shape (...,), in [0, 1] for row-stochastic ``A``.

    Examples
    --------
    >>> float(sink_share(np.array([[0.9, 0.1], [0.5, 0.5]]), [0]))
    0.7
    """
    a = to_numpy(A)
    return a[..., list(positions)].sum(axis=-1).mean(axis=-1)


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    r"""Least-squares slope :math:`b` of :math:`\log y = a + b \log x` (the exponent of a power law).

    :math:`b = 1`: ``y`` grows in proportion to ``x``; :math:`b = 0`: ``y`` does not grow.

    Examples
    --------
    >>> round(loglog_slope([1, 10, 100], [3, 300, 30000]), 6)
    2.0
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1 or xa.size < 2:
        raise ValueError(f"x has shape {xa.shape} and y has shape {ya.shape}; expected two 1-D sequences "
                         f"of the same length >= 2")
    if not (np.all(xa > 0) and np.all(ya > 0) and np.all(np.isfinite(xa * ya))):
        raise ValueError(f"x={xa.tolist()} and y={ya.tolist()} must be positive and finite")
    return float(np.polyfit(np.log(xa), np.log(ya), 1)[0])  # [slope, intercept][0]


def logit_std(A: Array, floor: float = 1e-300) -> np.ndarray:
    r"""Sharpness of a head: the standard deviation of each row's logits, averaged over rows.

    Row :math:`i` of a softmax is :math:`A_{ij} = e^{L_{ij}} / \sum_{j'} e^{L_{ij'}}`, so
    :math:`\log A_{ij}` is :math:`L_{ij}` minus a constant per row and has the same spread:

    .. math::

        s = \frac1T \sum_i \operatorname{std}_j \log A_{ij}

    Synthetic attention :math:`\operatorname{softmax}(\beta QK^\top/\sqrt d)` with Gaussian
    ``Q, K`` has :math:`s \approx \beta`. Weights that underflowed to 0 are raised to ``floor``.

    Parameters
    ----------
    A : array, shape (..., T, S), rows of a softmax without masked keys
    floor : float

    Returns
    -------
    numpy.ndarray, shape (...,)

    Examples
    --------
    >>> L = np.array([[0.0, 1.0], [2.0, 0.0]])   # row stds 0.5 and 1.0
    >>> A = np.exp(L) / np.exp(L).sum(axis=1, keepdims=True)
    >>> float(logit_std(A).round(6))
    0.75
    """
    a = to_numpy(A)
    return np.log(np.maximum(a, floor)).std(axis=-1).mean(axis=-1)
