"""Chapter 3's function tests: attention replacement, associative recall, low-rank baselines.

References are written independently here (numpy loops, numpy.linalg.svd) and compared
in float64, where round-off is about 1e-15 per operation; tolerances 1e-10 leave room for
the depth of a two-layer forward pass.
"""

import numpy as np
import pytest
import torch

from attention_course.chapters.lowrank import head_swap as sw
from attention_course.chapters.lowrank import baselines as lb
from attention_course.chapters.lowrank import recall as rc
from attention_course.chapters.lowrank.spectra import rank_k_error
from attention_course.models.encoder import BertLayerWeights, BertWeights, bert_encode
from attention_course.models.tiny import ModelConfig, TinyTransformer


def _stochastic(T, S, seed=0):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(size=(T, S)))
    return a / a.sum(axis=1, keepdims=True)


def test_rank_k_weights_matches_numpy_svd_and_stays_causal():
    A = _stochastic(7, 7)
    U, s, Vh = np.linalg.svd(A)
    ref = (U[:, :3] * s[:3]) @ Vh[:3]
    out = sw.rank_k_weights(torch.from_numpy(A), 3).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)
    causal = sw.rank_k_weights(torch.from_numpy(A), 3, causal=True).numpy()
    np.testing.assert_allclose(causal, np.tril(ref), atol=1e-12)


def test_topk_weights_matches_a_loop():
    A = _stochastic(5, 6, seed=1)
    out = sw.topk_weights(torch.from_numpy(A), 2).numpy()
    for i in range(5):
        keep = np.argsort(-A[i])[:2]
        ref = np.zeros(6)
        ref[keep] = A[i, keep] / A[i, keep].sum()
        np.testing.assert_allclose(out[i], ref, atol=1e-15)


def test_uniform_weights_rows_sum_to_one_over_allowed_keys():
    w = sw.uniform_weights(torch.zeros(2, 3, 4, 4, dtype=torch.float64), causal=True)
    np.testing.assert_allclose(w.sum(-1).numpy(), 1.0)
    assert w[0, 0, 1, 2] == 0 and w[0, 0, 3, 0] == 0.25


@pytest.mark.parametrize("bad", [-1, 5, 1.5])
def test_rank_k_weights_rejects_bad_k(bad):
    with pytest.raises(ValueError, match="expected 0 <= k <= 4"):
        sw.rank_k_weights(torch.zeros(4, 4), bad)


def test_topk_weights_rejects_bad_k():
    with pytest.raises(ValueError, match="expected 1 <= k <= 4"):
        sw.topk_weights(torch.zeros(4, 4), 0)


def test_tiny_forward_identity_equals_model_and_transform_is_applied():
    model = TinyTransformer(ModelConfig(mlp=True), seed=1).double()
    tokens = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(tokens)[0]
        assert torch.equal(sw.tiny_forward_with(model, tokens, lambda w, layer: w), ref)  # the model's own pass
        # full-rank truncation (k = T) changes nothing but round-off
        full = sw.tiny_forward_with(model, tokens, lambda w, layer: sw.rank_k_weights(w, 12, causal=True))
        torch.testing.assert_close(full, ref, rtol=1e-10, atol=1e-10)
        # uniform attention differs, and equals a model whose every head averages the values
        uni = sw.tiny_forward_with(model, tokens, lambda w, layer: sw.uniform_weights(w, causal=True))
        assert (uni - ref).abs().max() > 1e-3


def _tiny_bert(seed=0, h=2):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    layers = tuple(BertLayerWeights(*[r(8, 8) for _ in range(4)], *[r(8) for _ in range(6)],
                                    r(8, 16), r(16), r(16, 8), r(8), r(8), r(8)) for _ in range(2))
    return BertWeights(r(20, 8), r(16, 8), r(2, 8), r(8), r(8), layers, num_heads=h, layer_norm_eps=1e-12)


def test_bert_forward_identity_equals_bert_encode():
    W = _tiny_bert()
    ids = torch.tensor([[1, 5, 7, 2, 9]])
    hidden, att = sw.bert_forward_with(W, ids, lambda w, layer: w)
    ref = bert_encode(W, ids)
    for a, b in zip(hidden + att, ref.hidden_states + ref.attentions):
        assert torch.equal(a, b)  # bert_encode's own pass
    changed, _ = sw.bert_forward_with(W, ids, lambda w, layer: sw.uniform_weights(w))
    assert (changed[-1] - ref.hidden_states[-1]).abs().max() > 1e-3


def test_recall_accuracy_matches_a_loop():
    n, d, d_v, seed = 12, 4, 6, 3
    acc = rc.recall_accuracy(n, d, d_v, seed)
    rng = np.random.default_rng(seed)
    k, v = rng.normal(size=(n, d)), rng.normal(size=(n, d_v))
    hits = {"softmax": 0, "linear": 0, "linear_identity": 0}
    phi = lambda x: np.where(x > 0, x + 1, np.exp(x))  # noqa: E731
    for i in range(n):
        w = np.exp(k @ k[i] / np.sqrt(d))
        outs = {"softmax": (w / w.sum()) @ v,
                "linear": sum(phi(k[i]) @ phi(k[j]) * v[j] for j in range(n)) / sum(phi(k[i]) @ phi(k[j]) for j in range(n)),
                "linear_identity": sum((k[i] @ k[j]) * v[j] for j in range(n))}
        for name, o in outs.items():
            cos = [o @ v[j] / np.linalg.norm(v[j]) for j in range(n)]
            hits[name] += int(np.argmax(cos) == i)
    for name, h in hits.items():
        assert acc[name] == h / n, name


def test_linear_memory_fails_beyond_its_dimension_softmax_does_not():
    """The rank argument: a d x d_v state cannot hold n >> d pairs; softmax keeps every pair."""
    acc = rc.recall_accuracy(n=512, d=32, seed=0)
    assert acc["softmax"] > 0.9 and acc["linear_identity"] < 0.5 and acc["linear"] < 0.1


def test_uniform_and_centred_errors_match_numpy():
    A = _stochastic(9, 9, seed=2)
    U = np.full_like(A, 1 / 9)
    assert lb.uniform_error(A) == pytest.approx(np.linalg.norm(A - U) / np.linalg.norm(A), rel=1e-12)
    C = A - A.mean(axis=0)
    s = np.linalg.svd(C, compute_uv=False)
    assert lb.centred_rank_k_error(A, 3) == pytest.approx(np.sqrt((s[3:] ** 2).sum() / (s**2).sum()), rel=1e-10)
    # removing the mean row can only make the relative error of a near-uniform matrix larger
    soft = 0.9 * np.full((9, 9), 1 / 9) + 0.1 * A
    assert lb.centred_rank_k_error(soft, 3) > rank_k_error(soft, 3)


def test_sink_share_and_loglog_slope():
    A = np.array([[0.6, 0.1, 0.3], [0.2, 0.2, 0.6]])
    assert lb.sink_share(A, [0, 2]) == pytest.approx((0.9 + 0.8) / 2)
    B = np.random.default_rng(5).dirichlet(np.ones(6), size=(2, 3, 4))  # (L, H, T, S): chapter 7's word rows
    ref = [[np.mean([B[l, h, i, 0] + B[l, h, i, 5] for i in range(4)]) for h in range(3)] for l in range(2)]
    np.testing.assert_allclose(lb.sink_share(B, [0, 5]), ref, rtol=1e-14)  # (L, H)
    assert lb.loglog_slope([10, 100, 1000], [3.0, 3.0, 3.0]) == pytest.approx(0.0, abs=1e-12)
    assert lb.loglog_slope([2, 4, 8], [1.0, 4.0, 16.0]) == pytest.approx(2.0)
    x = np.array([2.0, 3.0, 10.0, 50.0])
    assert lb.loglog_slope(x, 0.7 * x**-1.5) == pytest.approx(-1.5, rel=1e-12)
    with pytest.raises(ValueError, match=r"shape \(3,\) and y has shape \(2,\)"):
        lb.loglog_slope([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="positive"):
        lb.loglog_slope([1, 2, 3], [1, 0, 2])


def test_long_text_rejects_bad_counts():
    with pytest.raises(ValueError, match="expected 1 <= n_sentences <= 20"):
        lb.long_text(0)


def test_stored_run_supports_the_chapter_verdicts():
    """The shipped JSON (python -m attention_course lowrank-run) backs the prose:
    effective rank proportional to n, and top-2 beating rank 8 in every seed of the induction model."""
    from attention_course.chapters.lowrank import in_function as lfx

    run = lfx.load()
    assert {"machine", "config", "length", "minilm_swap", "tiny_swap", "recall"} <= set(run)
    ns = [r["n"] for r in run["length"]]
    med = [float(np.median(r["effective_rank"])) for r in run["length"]]
    assert ns == sorted(ns) and ns[-1] == 512 and all(len(r["effective_rank"]) == 72 for r in run["length"])
    assert 0.8 < lb.loglog_slope(ns, med) < 1.2  # grows like n, not like a constant rank
    for row in run["tiny_swap"]:
        assert row["topk_2"] < 0.2 < 1.0 < row["rank_8"] < row["uniform"]
    for row in run["minilm_swap"]:
        assert 0 < row["rank_8"] < row["uniform"] + 0.1


def test_logit_std_recovers_the_logits_spread():
    rng = np.random.default_rng(4)
    L = rng.normal(scale=2.0, size=(6, 11)) + rng.normal(size=(6, 1))  # a per-row shift must not matter
    A = np.exp(L) / np.exp(L).sum(axis=1, keepdims=True)
    want = np.mean([np.std(row) for row in L])  # numpy std of the logits themselves
    assert abs(float(lb.logit_std(A)) - want) < 1e-12  # log(softmax) = L - const per row, float64


def test_soft_synthetic_attention_needs_rank_about_d_k_whatever_n():
    """Chapter 3's low-rank verdict: at beta = 0.2 the centred matrix is within ~0.15 of rank d = 32
    at n = 256 and 1024 (the chapter shows 0.121 and 0.138), and far from it at beta = 1 (0.512)."""
    from attention_course.chapters.lowrank.spectra import synthetic_attention

    for n in (256, 1024):
        assert lb.centred_rank_k_error(synthetic_attention(n, 32, 0.2, seed=0), 32) < 0.16
    assert lb.centred_rank_k_error(synthetic_attention(256, 32, 0.2, seed=0), 16) > 0.4  # k < d_k fails
    assert lb.centred_rank_k_error(synthetic_attention(256, 32, 1.0, seed=0), 32) > 0.4


def test_stored_run_is_bimodal_by_layer():
    """The stored effective ranks grow about like n in layers 1-4 and clearly slower in layers 5-6
    (chapter 3 shows median slopes 0.84-1.06 and 0.70, 0.63)."""
    from attention_course.chapters.lowrank import in_function as lfx

    rows = lfx.load()["length"]
    ns = [r["n"] for r in rows]
    E = np.array([r["effective_rank"] for r in rows]).reshape(len(rows), 6, 12)  # (lengths, layer, head)
    slope = np.median([[lb.loglog_slope(ns, E[:, l, h]) for h in range(12)] for l in range(6)], axis=1)
    assert slope[:4].min() > 0.8 and slope[4:].max() < 0.75
