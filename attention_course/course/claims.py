"""The claims ledger: every claim of the essay, its verdict and its evidence.

One structure, :data:`CLAIMS`, is read by chapter 7 (which renders the ledger)
and by ``tests/test_claims.py`` (which checks it against the chapters). Each
:class:`Claim` names the chapter whose verdict box decides it. The box carries
the label ``claim-<id>`` (``:name: claim-<id>`` on the admonition), so the
ledger links to it and the tests can compare the two verdicts
(:func:`attention_course.course.verdicts.chapter_problems`).

A claim's evidence is a format string whose fields are *glue names* of its
chapter: ``"{torch_err:.0e}"`` is filled with the number the chapter glued as
``torch_err``; so is its robustness (over how many seeds or inputs the verdict
holds). Glue names follow one rule: a name with a ``tol`` part (``torch_tol``,
``row_sum_tol64``) is a threshold the chapter chose, never a result, and may not
appear in the ledger; a measured round-off error is glued as its power-of-ten
ceiling (:func:`error_ceiling`), the same on every CPU. The numbers are never typed here: :mod:`attention_course.course.verdicts`
reads them from the chapters' stored outputs, and the package ships them as ``attention_course/data/evidence.json``
(:func:`load_evidence`), so that chapter 7 also runs where the other notebooks
are absent (on Colab, say). The tests fail when that file and the chapters
disagree; ``python -m attention_course evidence`` rewrites it. nbval re-checks
most of those outputs on every ``make test``; the numbers that end long training
runs come from cells marked ``# NBVAL_IGNORE_OUTPUT``, and there the chapter's
cell asserts the claim itself (``assert final_loss < 0.6``) instead.

Verdicts come in three kinds, and a chapter's verdict box shows its kind in the
title, right after the dash: ``Verdict: <claim> — holds``, ``— holds when
<condition>`` or ``— wrong as stated``. The box's class follows the kind
(``tip``, ``warning``, ``danger``).
"""

from __future__ import annotations

import json
import math
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

__all__ = [
    "Claim", "CLAIMS", "VERDICTS", "VERDICT_CLASS", "SECTIONS", "EVIDENCE_FILE", "by_id",
    "ledger_problems", "load_evidence", "evidence_text", "verdict_counts", "ledger_markdown",
    "is_threshold", "error_ceiling",
]  # fmt: skip

VERDICTS = ("holds", "holds when", "wrong as stated")
#: The admonition class that goes with each verdict.
VERDICT_CLASS = {"holds": "tip", "holds when": "warning", "wrong as stated": "danger"}
#: The essay's sections, in order; chapter N tests section N (the closing section's
#: own claims are tested in chapters 3 and 7).
SECTIONS = {
    1: "Mechanics",
    2: "Kernel smoothing",
    3: "Low rank",
    4: "Multi-head",
    5: "Message passing",
    6: "The scale",
    7: "The insight",
}
EVIDENCE_FILE = Path(__file__).resolve().parents[1] / "data" / "evidence.json"


@dataclass(frozen=True)
class Claim:
    """One claim of the essay, in the course's words, with where it is decided.

    Attributes
    ----------
    id : str
        Short kebab-case name; the chapter's verdict box is labelled ``claim-<id>``.
    section : int
        The essay section (1-6, or 7 for its closing "insight") that makes the claim.
    chapter : str
        Stem of the notebook that tests it, e.g. ``"01_mechanics"``.
    text : str
        The claim, paraphrased.
    verdict : str
        One of :data:`VERDICTS`.
    finding : str
        What the chapter found, in words: the condition for *holds when*, what is
        wrong for *wrong as stated*.
    evidence : str
        A format string over the chapter's glue names, e.g.
        ``"{row_sum_tol64:.0e}"``.
    implied : bool
        True when the essay implies the claim rather than states it. Chapter 7
        counts the essay's own claims apart from these, which the course added.
    reading : str
        The strongest reasonable reading of the essay's words that the chapter
        tests; when the words are ambiguous, both readings and which one is
        tested. Plain text, no numbers.
    baseline : str
        What the deciding number is compared with, so that it means something
        (uniform attention, random subspaces, a shuffled sentence, ...). Plain text.
    robustness : str
        Over how many seeds, inputs or sizes the verdict holds, with the spread: a
        format string over glue names like ``evidence``, or words such as
        ``"deterministic: closed form, float64"`` where nothing is random.

    The chapter's verdict box shows the last three, right after its ``:name:``
    line, as :func:`attention_course.course.verdicts.box_fields_markdown` writes them.
    """

    id: str
    section: int
    chapter: str
    text: str
    verdict: str
    finding: str
    evidence: str
    implied: bool = False
    reading: str = ""
    baseline: str = ""
    robustness: str = ""

    @property
    def label(self) -> str:
        """The label of the chapter's verdict box, ``claim-<id>``."""
        return f"claim-{self.id}"

    @property
    def evidence_names(self) -> tuple[str, ...]:
        """The glue names the evidence string uses, in order of appearance."""
        return _field_names(self.evidence)

    @property
    def robustness_names(self) -> tuple[str, ...]:
        """The glue names the robustness string uses, in order of appearance."""
        return _field_names(self.robustness)

    @property
    def glue_names(self) -> tuple[str, ...]:
        """Every glue name the claim uses: its evidence's, then its robustness's."""
        return tuple(dict.fromkeys(self.evidence_names + self.robustness_names))


def _field_names(fmt: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(fmt) if f))


C1, C2, C3 = "01_mechanics", "02_kernel_smoothing", "03_low_rank"
C4, C5, C6 = "04_multi_head", "05_message_passing", "06_scaling"
C7 = "07_insight"

CLAIMS: tuple[Claim, ...] = (
    # 1. Mechanics
    Claim("formula", 1, C1,
          "Attention is softmax(QKᵀ/√d_k)·V, with Q, K and V linear projections of the input.",
          "holds", "The package's version of the formula is what PyTorch computes, for every mask type.",
          "largest difference from PyTorch's SDPA below {torch_err:.0e} (float64)",
          reading="The formula, applied to linear projections of the input, is the computation that "
          "Transformer libraries perform, with any mask, with queries and keys of different "
          "lengths, custom scales and batched heads.",
          baseline="PyTorch's fused scaled_dot_product_attention, an independent implementation, on the same "
          "float64 inputs.",
          robustness="{torch_cases} mask and shape cases on one seeded batch of heads, in float64; "
          "deterministic given the seed (the test suite repeats it on random shapes, with "
          "gradients)"),
    Claim("rows-sum-to-one", 1, C1,
          "Every row of A is a set of non-negative weights over the positions that add up to one.",
          "holds", "A fully masked row is the one exception: it has no distribution (the package returns zeros).",
          "largest error of a row sum below {row_sum_err64:.0e} (float64) and {row_sum_err32:.0e} (float32)",
          reading="Every row of A is a probability distribution over positions: non-negative weights that "
          "add up to one, for any inputs, including very large logits and single precision.",
          baseline="Exactly one, up to the round-off that adding up one row's weights can produce; and a "
          "naive softmax, which overflows at such logits.",
          robustness="all {row_sum_n} random problems of random sizes and logit scales, in float64 and "
          "float32; deterministic given the seed"),
    Claim("convex-combination", 1, C1,
          "Each output is a convex combination of the value vectors.",
          "holds when", "there is no attention dropout and every query sees at least one key.",
          "with dropout p = 0.1, {hull_dropout:.1%} of outputs leave the hull",
          reading="Each output is a convex combination of the values whenever attention is used as written; "
          "tested also where the premises fail in practice: attention dropout in training, and a "
          "query that may attend to no key.",
          baseline="The same random problems without dropout or masking, where every output must lie in the "
          "hull; the hull test never looks at the weights.",
          robustness="with dropout the share outside is {hull_dropout_min:.3f} to {hull_dropout_max:.3f} over "
          "{hull_seeds} seeds of {hull_n} random problems each; without dropout every output of one seed's "
          "problems is inside, as the algebra requires"),
    Claim("square-matrix", 1, C1,
          "A is an n × n matrix.",
          "holds when", "queries and keys come from one sequence; in general A is T × S.",
          "a cross-attention example gives A of shape {cross_T} × {cross_S}",
          reading="A has one row per query and one column per key, which is n × n when both come from the "
          "same n positions; the essay's n × n is read as a statement about attention in general.",
          baseline="Self-attention on one sequence, where A is square.",
          robustness="deterministic: the shape follows from the formula for any inputs"),
    # 2. Kernel smoothing
    Claim("nadaraya-watson", 2, C2,
          "Attention is Nadaraya-Watson regression with a softmax kernel.",
          "holds", "Exactly; a Gaussian kernel is attention with one extra bias per key.",
          "Gaussian NW and attention with a key bias differ by less than {identity_err:.0e}; "
          "without the bias they differ by {no_bias_gap:.2f}",
          reading="Attention is not merely like Nadaraya-Watson regression but the same computation: for a "
          "standard kernel, the estimator's output equals an attention layer's output exactly.",
          baseline="The estimator computed from its kernel formula, and plain scaled dot-product attention "
          "without the key bias, on the same inputs.",
          robustness="deterministic: an algebraic identity, checked in float64 on one seeded problem, by the "
          "package and by PyTorch"),
    Claim("local-average", 2, C2,
          "The estimate is a weighted average of nearby observations; the kernel sets what 'nearby' means.",
          "holds", "The kernel's width decides between averaging the curve away and copying the noise.",
          "test MSE {mse_w03:.2f} → {mse_w3:.2f} → {mse_w30:.2f} at inverse widths w = 1/h = 0.3, 3, 30",
          reading="The estimate at a query is a weighted average of the observations near it, and the "
          "kernel's width decides what counts as near: the width trades copying the noise against "
          "blurring the curve.",
          baseline="The same estimator with a much wider kernel (close to predicting the mean) and a much "
          "narrower one (close to copying the nearest point), on the same data.",
          robustness="the middle width is best on a fraction {u_shaped:.2f} of {u_draws} further draws of the "
          "data; median test MSE {med_w03:.2f} → {med_w3:.2f} → {med_w30:.2f}"),
    Claim("learned-width", 2, C2,
          "The similarity can be learned from data rather than fixed.",
          "holds when", "the training objective leaves each point out; otherwise the width drifts.",
          "leave-one-out learns inverse width w = {w_loo:.2f} (test MSE {mse_loo:.3f}); "
          "self-included drifts to w = {w_self:.2f} (test MSE {mse_self:.3f})",
          implied=True,
          reading="The width of the similarity can be learned from data by gradient descent, and the "
          "learned width is a good one for prediction.",
          baseline="The width that is best on the noiseless test curve, found by a grid search; and the same "
          "descent, run for as many steps, on the objective that lets each point see its own "
          "target.",
          robustness="on {lw_draws} further draws of the data, leave-one-out predicts better in {lw_n_better} "
          "and the self-included width drifts narrower in {lw_n_drift}; full-batch gradient descent from one "
          "starting width"),
    Claim("learned-metric", 2, C2,
          "Because the metric is learned, the model finds out for itself which input directions matter.",
          "holds", "On a task where one input coordinate matters, the learned W singles it out.",
          "test MSE {metric_before:.3f} → {metric_after:.4f}; column norm {norm_x0:.2f} for x₀, "
          "at most {norm_rest:.2f} for the others",
          reading="Because the metric is learned, the model finds out for itself which input directions "
          "matter, and predicts better for it.",
          baseline="The fixed metric W = I on the same data, and predicting the mean of the targets.",
          robustness="one draw of the data and one training run from W = I; not repeated over draws or seeds"),
    Claim("softmax-kernel", 2, C2,
          "The softmax weights are a smoothing kernel in the statistician's sense.",
          "holds when", "all keys share one norm; in general the kernel is asymmetric and not PSD.",
          "asymmetry {asym:.2f}; symmetrised, smallest/largest eigenvalue {eig_ratio:.2f}",
          implied=True,
          reading="The softmax weights are a smoothing kernel in the statistician's sense: a symmetric, "
          "positive semi-definite similarity that is largest at the query itself.",
          baseline="The Gaussian kernel and the dot-product kernel with tied projections (W_Q = W_K) on the "
          "same points, both symmetric and positive semi-definite.",
          robustness="the symmetrised untied kernel has a negative eigenvalue in {kernel_not_psd} of "
          "{kernel_draws} further draws of inputs and projections; the own-key rate comes from one draw of "
          "{self_n} keys"),
    # 3. Low rank
    Claim("low-rank", 3, C3,
          "Attention matrices are close to a matrix of small rank.",
          "holds when", "attention is soft; sharp attention is sparse but high-rank.",
          "effective rank {syn_erank_lo:.3g} at β = 0.2 and {syn_erank_hi:.3g} at β = 4 (n = {syn_n}); "
          "the rank-16 and top-16 errors cross at β = {syn_cross:.2f}"),
    Claim("low-rank-real", 3, C3,
          "Trained models' attention matrices are approximately low-rank.",
          "holds when", "the head is soft, as most MiniLM heads are; a minority is sparse but high-rank.",
          "on sentences of about {real_n} tokens, {real_lowrank} of {real_heads} MiniLM heads are within "
          "10% of rank {real_k}; "
          "{real_sparse_hr} sparse but high-rank"),
    Claim("structure-implies-low-rank", 3, C3,
          "Structure with few degrees of freedom (low-rank logits) gives a low-rank attention matrix.",
          "wrong as stated", "Low-rank logits give a full-rank softmax; only approximate low rank survives, "
          "and only when the logits are soft.",
          "logits of rank {exp_rank_logits} give a full-rank attention matrix (rank {exp_rank_soft})",
          implied=True),
    Claim("efficient-attention", 3, C3,
          "Efficient attention methods work because attention is nearly low-rank.",
          "holds when", "the method is a low-rank one and the input is low-rank; linear attention, "
          "sparse patterns and FlashAttention work for other reasons.",
          "time slopes: naive {slope_naive:.2f}, linear {slope_linear:.2f}; exact chunked attention, "
          "which owes nothing to low rank, needs {mem_ratio:.2%} of naive's memory at n = {bench_top_n}"),
    # 4. Multi-head
    Claim("head-width", 4, C4,
          "A head of width d/h can express any attention pattern.",
          "wrong as stated", "A dense pattern needs a head as wide as the sequence; a sparse one does not.",
          "best width-4 head on a dense 16-token target: KL {kl_dense_4:.3f} nats (uniform: {kl_dense_0:.2f})",
          implied=True),
    Claim("different-subspaces", 4, C4,
          "Every head looks at the input through its own subspace.",
          "holds when", "'different' means partly overlapping: the subspaces are closer than random ones.",
          "median smallest angle between MiniLM heads {angle_l1:.1f}° (layer 1), {angle_l6:.1f}° (layer 6); "
          "random: {angle_random:.1f}°"),
    Claim("rank-one-modes", 4, C4,
          "Heads are independent rank-1 modes, like the terms of an SVD.",
          "wrong as stated", "Heads have rank d_k, overlap, are not unique and do not add up.",
          "each head's form has rank {head_rank}; cross terms carry {cross_min:.2f}–{cross_max:.2f} "
          "of the squared norm"),
    Claim("head-relations", 4, C4,
          "Different heads capture different relations: syntax, meaning, position.",
          "holds when", "a head has one clear job, as some do; many park their weight on a special token.",
          "top previous-token head: {role_prev:.2f} of its weight on the previous word; "
          "{n_cls_heads} heads put most weight on [CLS]"),
    Claim("heads-specialise", 4, C4,
          "Training divides the work among the heads.",
          "holds", "A 2-layer model forms previous-token and induction heads, with some redundancy.",
          "held-out loss after 300 steps {loss_2_at_300:.2f} nats (2 layers) vs {loss_1:.2f} (1 layer); removing one "
          "induction head costs at most {abl_ind_max:.2f} nats, removing all four {abl_layer2:.2f}",
          implied=True),
    # 5. Message passing
    Claim("message-passing", 5, C5,
          "One self-attention layer is one round of message passing on a graph.",
          "holds", "The edge-by-edge and matrix forms are the same computation; the mask is the graph.",
          "edge-wise and matrix forms differ by less than {mp_err:.0e} (float64)",
          reading="One self-attention layer and one round of message passing on the graph whose edges are "
          "the mask are the same computation, edge for edge.",
          baseline="The matrix form of attention, computed by the package, on the same inputs and masks.",
          robustness="deterministic: an algebraic identity, checked in float64 on {mp_cases} topologies of one "
          "seeded problem"),
    Claim("learned-topology", 5, C5,
          "The graph's topology is learned per input.",
          "wrong as stated", "The weights are computed per input; the edge set is fixed by the mask.",
          "{n_zero} of {n_weights:,} MiniLM weights are exactly zero; a row spreads over about "
          "{eff_degree:.2f} of {n_tokens} tokens",
          reading="Two readings: the edge weights are computed per input, or the edge set is. The weights "
          "reading is true but does not set attention apart from GAT; the edge-set reading would, "
          "and it is the one the verdict decides.",
          baseline="A masked layer on two different inputs, whose edge sets coincide; and GCN, whose weights "
          "are fixed by the graph.",
          robustness="one sentence through MiniLM, all {n_weights} weights of its heads; that no weight is "
          "exactly zero holds for any input, because a softmax is positive"),
    Claim("l-hops", 5, C5,
          "Stacking L layers lets information travel L hops.",
          "holds when", "the graph is sparse; on a complete graph one layer already reaches everything.",
          "banded mask: receptive half-widths {rf_widths} after 1, 2, … layers; no mask: {rf_complete} "
          "after one layer",
          reading="After L layers an output can depend on inputs up to L hops away and no further, so depth "
          "is what carries information across the graph.",
          baseline="The graph-theoretic prediction, the support of (A + I)^L, and the same stack without a "
          "mask.",
          robustness="one seeded stack on {rf_T} tokens, up to {rf_layers} layers; which Jacobian blocks are "
          "non-zero is the same for almost every draw of the weights"),
    Claim("depth-keeps-information", 5, C5,
          "Deeper stacks keep spreading useful information.",
          "holds when", "there are skip connections, and only for a while: pure attention collapses to "
          "rank 1 within a few layers, and skips slow the collapse without stopping it.",
          "distance to rank 1 without skips: {pure_1:.2g} after 1 layer, below {pure_4:.0e} after 4; "
          "with skips {skip_12:.2g} after 12, still shrinking ×{skip_rate:.2f} per layer",
          implied=True,
          reading="Stacking more layers keeps spreading useful information between the tokens rather than "
          "washing it out.",
          baseline="A rank-1 token matrix, every token the same vector, which pure attention converges to; "
          "and the same stacks with skip connections, MLPs and LayerNorm, or a smaller value gain.",
          robustness="medians over {rc_seeds} seeds of random stacks; the asserted orders of magnitude hold "
          "for the medians, the spread over seeds is not reported"),
    Claim("unlike-gnns", 5, C5,
          "Unlike a classical graph network's, attention's edge weights are computed from the content, "
          "query by query.",
          "holds", "Each query ranks the keys for itself. GCN's weights come from the graph alone, and GAT, "
          "whose weights also depend on the input, ranks the senders the same way for every node.",
          "graphs where all nodes share one favourite sender: GAT {shared_gat:.2f}, "
          "dot-product attention {shared_dot_product:.3f}",
          reading="What sets attention apart from classical graph networks is that its edge weights are "
          "computed from the content, query by query.",
          baseline="GCN, whose weights are fixed by the graph, and GAT and GATv2, whose weights also depend "
          "on the input, with random weights on the same graphs.",
          robustness="{shared_n} random graphs drawn from one seed; for GAT the shared ranking is algebraic "
          "and holds on every graph"),
    # 6. The scale
    Claim("variance-dk", 6, C6,
          "q·k has variance ~ d_k, and dividing by √d_k brings it back to O(1).",
          "holds when", "the entries are independent, as at initialisation; trained models are above it.",
          "variance {var_4:.1f}, {var_64:.1f}, {var_1024:.0f} at d_k = 4, 64, 1024; "
          "log-log slope {slope_raw:.3f} (scaled: {slope_scaled:.3f})",
          reading="For random queries and keys the variance of q·k grows in proportion to d_k, and dividing "
          "by √d_k makes it independent of d_k; read as a statement about initialisation, and "
          "checked on a trained model too.",
          baseline="The closed form d_k σ_q² σ_k² for independent entries, with the Monte-Carlo standard "
          "error of each estimate; for MiniLM, the same formula with its measured entry variances.",
          robustness="{var_n_dims} widths of {var_samples} Gaussian pairs each, one seed: every estimate "
          "within {max_z:.2f} standard errors of d_k; in MiniLM every head is above the formula, "
          "{minilm_ratio_min:.2f} to {minilm_ratio_max:.2f} times it"),
    Claim("saturation", 6, C6,
          "Unscaled scores at large d_k push the softmax into saturation.",
          "holds", "Saturation is gradual: it needs hundreds of dimensions before most rows are one-hot.",
          "d_k = 1024 unscaled: mean largest weight {maxw_none_1024:.3f}; "
          "{frac_none_1024:.0%} of rows above 0.99",
          reading="Without the scale, large d_k drives the softmax towards one-hot rows: one weight near "
          "one, the rest near zero.",
          baseline="The same scores divided by √d_k, and the uniform row, whose entropy is ln S.",
          robustness="{sat_rows} random rows per width from one seed, the same rows for every scale; on real "
          "scores, every query row of MiniLM's heads over the chapter's sentences"),
    Claim("gradient-vanishes", 6, C6,
          "In saturation the gradient vanishes.",
          "wrong as stated", "It vanishes only for keys that get no weight, or at widths of hundreds.",
          "at initialisation the unscaled W_Q/W_K gradient is {g0_ratio_min:.1f}–{g0_ratio_max:.1f}× larger",
          reading="In the saturated regime the gradient that reaches the query and key weights becomes too "
          "small to train them.",
          baseline="The same model and initial weights with the 1/√d_k scale, and the softmax Jacobian of "
          "scaled scores.",
          robustness="the unscaled W_Q/W_K gradient at initialisation is the larger one in {g0_n_larger} of "
          "{g0_n_runs} seed-and-width runs of the stored comparison"),
    Claim("scale-decides-training", 6, C6,
          "Without the scale the model fails to train; with it, it trains.",
          "holds when", "d_k ≥ 64 here, and for another reason than the essay gives.",
          "held-out loss at d_k = 64: unscaled {full_none_64:.2f} (chance {ln64:.2f}), scaled {full_sqrt_64:.3f}",
          reading="Whether a model trains at all depends on the scale: with it the model learns, without it "
          "it does not.",
          baseline="The same model, data, initialisation and number of steps with each scale (1/√d_k, none, "
          "1/d_k), and the chance level, the loss of a uniform guess.",
          robustness="unscaled fails in {full_n_fail} of {full_n_wide} seed-and-width runs with d_k ≥ 64 "
          "(held-out loss {full_none_wide_min:.2f} to {full_none_wide_max:.2f}) and 1/√d_k trains "
          "in all {full_n_runs}; the live run on this machine agrees"),
    # 7. The insight (the closing section's claims that the chapters above do not already cover)
    Claim("content-not-position", 7, C7,
          "The attention graph is shaped by the content of the tokens, not by their positions.",
          "wrong as stated", "The edge set is fixed by the mask, and some heads follow position: MiniLM's "
          "top previous-token head keeps pointing at the previous word when the words are shuffled.",
          "weight that head puts on the previous token: {prev_share:.2f} on the sentence, "
          "{prev_share_shuffled:.2f} with its words shuffled",
          reading="What a head attends to is decided by the content of the tokens rather than their "
          "positions; refuted if a head of a trained model keeps attending to the same relative "
          "position when the content is scrambled.",
          baseline="The same head on the same words shuffled into nonsense: the content at each position "
          "changes, the positions do not.",
          robustness="{prev_n_shuffles} shuffles of one sentence: the head keeps at least "
          "{prev_share_shuffled_min:.2f} of its weight on the previous token in every one"),
    Claim("feasible-without-low-rank", 7, C3,
          "Real data's low-rank structure is what makes computing all pairs feasible.",
          "wrong as stated", "Exact attention over all pairs fits in memory without any low rank "
          "(chunked attention, FlashAttention); low rank matters only for the approximate methods.",
          "chunked attention differs from exact by less than {chunk_err:.0e} and needs {mem_ratio:.2%} of "
          "naive's memory at n = {bench_top_n}"),
)


# ------------------------------------------------------------- validation
_THRESHOLD = re.compile(r"(?:^|_)tol\d*(?:_|$)")


def is_threshold(name: str) -> bool:
    """Whether a glue name is a threshold by the naming rule: it has a ``tol`` part.

    Examples
    --------
    >>> [is_threshold(n) for n in ("torch_tol", "row_sum_tol64", "torch_err", "stolen", "tol_x")]
    [True, True, False, False, True]
    """
    return bool(_THRESHOLD.search(name))


def error_ceiling(error: float) -> float:
    """The smallest power of ten at or above a measured error (``1e-300`` for an error of 0).

    Round-off differs in its last bits between CPUs (AVX-512, AVX2, no SIMD), and
    nbval compares a chapter's glued outputs, so a chapter glues a round-off
    error through this ceiling: "the largest difference is below 1e-15".

    Examples
    --------
    >>> error_ceiling(8.9e-16), error_ceiling(1.07e-15), error_ceiling(1e-15), error_ceiling(0.0)
    (1e-15, 1e-14, 1e-15, 1e-300)
    """
    if not error > 0:
        return 1e-300
    exponent = math.ceil(math.log10(error))
    while float(f"1e{exponent}") < error:  # log10 may round down just below a power of ten
        exponent += 1
    return float(f"1e{exponent}")


def ledger_problems(claims: Iterable[Claim] = CLAIMS) -> list[str]:
    """List what is missing or malformed in a ledger (empty when all is well).

    Examples
    --------
    >>> bad = Claim("x", 9, "", "a claim", "maybe", "", "within {x_tol:.0e}")
    >>> for p in ledger_problems([bad]):
    ...     print(p)
    x: section 9 is not one of 1-7
    x: no chapter
    x: verdict 'maybe' is not one of holds / holds when / wrong as stated
    x: no finding
    x: no reading
    x: no baseline
    x: no robustness
    x: uses the threshold x_tol as evidence (a name with a 'tol' part is a threshold, not a result)
    """
    problems, seen = [], set()
    for c in claims:
        if c.id in seen:
            problems.append(f"{c.id}: id used twice")
        seen.add(c.id)
        if c.section not in SECTIONS:
            problems.append(f"{c.id}: section {c.section} is not one of {min(SECTIONS)}-{max(SECTIONS)}")
        if not c.chapter:
            problems.append(f"{c.id}: no chapter")
        if not c.text.strip():
            problems.append(f"{c.id}: no claim text")
        if c.verdict not in VERDICTS:
            problems.append(f"{c.id}: verdict {c.verdict!r} is not one of {' / '.join(VERDICTS)}")
        if not c.finding.strip():
            problems.append(f"{c.id}: no finding")
        for field in ("reading", "baseline", "robustness"):
            if not getattr(c, field).strip():
                problems.append(f"{c.id}: no {field}")
        for field in ("reading", "baseline"):
            if "{" in getattr(c, field) or "}" in getattr(c, field):
                problems.append(f"{c.id}: the {field} is plain text, but has a brace")
        if not c.evidence_names:
            problems.append(f"{c.id}: the evidence names no glued number")
        for name in filter(is_threshold, c.glue_names):
            problems.append(f"{c.id}: uses the threshold {name} as evidence "
                            "(a name with a 'tol' part is a threshold, not a result)")
    return problems


def load_evidence(path: Union[str, Path] = EVIDENCE_FILE) -> dict[str, dict[str, Any]]:
    """Read the evidence shipped with the package (see :func:`attention_course.course.verdicts.collect_evidence`)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def evidence_text(c: Claim, values: Mapping[str, Any]) -> str:
    """Fill a claim's evidence string with its glued values.

    Examples
    --------
    >>> evidence_text(by_id("formula"), {"torch_err": 1e-15})
    "largest difference from PyTorch's SDPA below 1e-15 (float64)"
    """
    return c.evidence.format(**values)


def verdict_counts(claims: Iterable[Claim] = CLAIMS) -> dict[str, int]:
    """How many claims got each verdict.

    Examples
    --------
    >>> counts = verdict_counts()
    >>> sum(counts.values()) == len(CLAIMS)
    True
    """
    counts = dict.fromkeys(VERDICTS, 0)
    for c in claims:
        counts[c.verdict] += 1
    return counts


def by_id(claim_id: str) -> Claim:
    """Look a claim up by id (KeyError naming the known ids otherwise)."""
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}; known: {', '.join(c.id for c in CLAIMS)}")


# ------------------------------------------------------------------ display
# Plain symbols that common text fonts have (emoji need an emoji font).
MISSING_EVIDENCE = "(not collected yet: run `python -m attention_course evidence`)"
_MARK = {"holds": "✓", "holds when": "⚠", "wrong as stated": "✗"}


def ledger_markdown(evidence: Mapping[str, Mapping[str, Any]], claims: Iterable[Claim] = CLAIMS) -> str:
    """The ledger as a Markdown table: claim and reading, verdict, numbers and baseline, robustness, link.

    The link is a Markdown link to the box's label, ``[ch. 1](#claim-formula)``.
    Rendered as MyST (cell metadata ``mystnb: {markdown_format: myst}``), it leads
    to the box in the built book, and a missing label is a build warning; in
    JupyterLab it reads as plain "ch. 1". A cell's second part follows a ``<br>``.

    Examples
    --------
    >>> c = by_id("square-matrix")
    >>> row = ledger_markdown({c.id: {"cross_T": 3, "cross_S": 7}}, [c]).splitlines()[2]
    >>> for cell in row.strip("| ").split(" | "):
    ...     print(cell[:72])
    1
    A is an n × n matrix.<br>*Read as:* A has one row per query and one colu
    ⚠ holds when queries and keys come from one sequence; in general A is T 
    a cross-attention example gives A of shape 3 × 7<br>*Against:* Self-atte
    deterministic: the shape follows from the formula for any inputs
    [ch. 1](#claim-square-matrix)
    """
    rows = ["| § | Claim, and the reading tested | Verdict | Deciding numbers, and what they are compared with "
            "| Holds over | Tested in |", "|---|---|---|---|---|---|"]
    for c in claims:
        text = c.text + (" *(implied)*" if c.implied else "") + (f"<br>*Read as:* {c.reading}" if c.reading else "")
        verdict = f"{_MARK[c.verdict]} {c.verdict}"
        verdict += (" " if c.verdict == "holds when" else ": ") + c.finding.rstrip(".")
        numbers, robustness = MISSING_EVIDENCE, MISSING_EVIDENCE
        if set(c.glue_names) <= set(evidence.get(c.id, ())):  # else the shipped evidence is out of date
            numbers, robustness = evidence_text(c, evidence[c.id]), c.robustness.format(**evidence[c.id]) or "—"
        numbers += f"<br>*Against:* {c.baseline}" if c.baseline else ""
        cells = [str(c.section), text, verdict, numbers, robustness, f"[ch. {int(c.chapter[:2])}](#{c.label})"]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)
