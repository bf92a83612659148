"""chapters/heads/roles.py: head-role scores on hand-made heads and uniform attention, against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.chapters.heads import roles as H

TOKS = ["[CLS]", "the", "cat", ",", "sat", ".", "[SEP]"]


def _maps(n, *patterns):
    return np.stack([np.stack(patterns)])  # (1, H, n, n)


def test_role_scores_on_hand_made_heads():
    n = len(TOKS)
    prev, nxt = np.eye(n, k=-1), np.eye(n, k=1)
    prev[0, 0] = nxt[-1, -1] = 1.0
    cls = np.zeros((n, n))
    cls[:, 0] = 1.0
    uniform = np.full((n, n), 1 / n)
    s = H.head_role_scores(_maps(n, prev, nxt, cls, uniform), TOKS)
    assert s["previous token"][0].tolist() == [1.0, 0.0, 0.2, 1 / n]  # word 1 of cls reads i - 1 = [CLS]
    assert s["next token"][0, 1] == 1.0 and s["[CLS]"][0, 2] == 1.0
    np.testing.assert_allclose(s["broad"][0], [0, 0, 0, 1], atol=1e-12)
    # words 1..5 of prev read [CLS], the, cat, ',', sat: one of five is punctuation
    assert abs(s["punctuation"][0, 0] - 1 / 5) < 1e-12
    assert H.top_heads(s)["[CLS]"] == (0, 2, 1.0)


def test_uniform_attention_scores_its_baselines_over_several_texts():
    texts = [TOKS, ["[CLS]", "a", "!", "b", "c", "d", "e", "?", "[SEP]"], ["[CLS]", "x", "[SEP]"]]
    maps = [np.full((2, 3, len(t), len(t)), 1 / len(t)) for t in texts]
    s = H.head_role_scores(maps, texts)
    base = H.uniform_role_baselines(texts)
    for role in H.ROLES:
        assert s[role].shape == (2, 3)
        np.testing.assert_allclose(s[role], base[role], atol=1e-12)


def test_role_scores_errors():
    with pytest.raises(ValueError, match=r"maps have shape \(1, 1, 6, 6\) for 7 tokens"):
        H.head_role_scores(np.ones((1, 1, 6, 6)) / 6, TOKS)
    with pytest.raises(ValueError, match="start with \\[CLS\\] and end with \\[SEP\\]"):
        H.head_role_scores(np.ones((1, 1, 3, 3)) / 3, ["a", "b", "c"])


# ------------------------------------------------------------------ a causal decoder (SmolLM2's arm)
def _causal(rng, L, h, n):
    """Random causal maps (L, h, n, n): each row a distribution over the keys j <= i."""
    w = rng.random((L, h, n, n)) * np.tril(np.ones((n, n)))
    return w / w.sum(-1, keepdims=True)


def test_causal_role_scores_are_a_loop_over_the_rows():
    """Previous token over rows i >= 2, start token over rows i >= 1, pooled over texts of two lengths.
    Guards against scoring row 1 for the previous token (its previous key is the sink) or row 0 at all."""
    rng = np.random.default_rng(0)
    maps = [_causal(rng, 2, 3, 5), _causal(rng, 2, 3, 8)]
    got = H.causal_role_scores(maps)
    prev = [[np.mean([A[l, h, i, i - 1] for A in maps for i in range(2, A.shape[-1])]) for h in range(3)] for l in range(2)]
    start = [[np.mean([A[l, h, i, 0] for A in maps for i in range(1, A.shape[-1])]) for h in range(3)] for l in range(2)]
    np.testing.assert_allclose(got["previous token"], prev, rtol=1e-12)
    np.testing.assert_allclose(got["start token"], start, rtol=1e-12)


def test_causal_uniform_attention_scores_its_closed_form_baselines():
    """Uniform attention over each causal row (models.decoder.causal_uniform) scores 1/(i+1) averaged
    over the same rows; the encoder's 1/n would be wrong here."""
    import torch

    from attention_course.models.decoder import causal_uniform

    lengths = [3, 6, 11]
    maps = [causal_uniform(torch.zeros(2, 2, n, n, dtype=torch.float64)).numpy() for n in lengths]
    got, chance = H.causal_role_scores(maps), H.causal_uniform_baselines(lengths)
    for role in H.CAUSAL_ROLES:
        np.testing.assert_allclose(got[role], chance[role], rtol=1e-12)
    harmonic = [sum(1 / m for m in range(1, n + 1)) for n in lengths]  # H_n: rows i = 0 .. n-1 give 1/(i+1)
    assert chance["start token"] == pytest.approx(sum(Hn - 1 for Hn in harmonic) / sum(n - 1 for n in lengths))
    assert chance["previous token"] == pytest.approx(sum(Hn - 1.5 for Hn in harmonic) / sum(n - 2 for n in lengths))


def test_causal_role_scores_errors():
    with pytest.raises(ValueError, match=r"maps have shape \(1, 1, 2, 2\); expected \(L, H, n, n\) with n >= 3"):
        H.causal_role_scores(np.ones((1, 1, 2, 2)))
    with pytest.raises(ValueError, match="put weight on keys j > i; expected causal maps"):
        H.causal_role_scores(np.full((1, 1, 4, 4), 0.25))
    with pytest.raises(ValueError, match=r"lengths \[2\]; expected at least one text of n >= 3"):
        H.causal_uniform_baselines([2])


def test_decoder_role_scores_do_not_move_when_queries_scale_up_and_keys_down():
    """q -> 3q with k -> k/3 (W_Q x 3, W_K / 3 after the RMSNorm) gives the same maps, so the same scores;
    scrambling W_Q and W_K (the control) does move them."""
    from dataclasses import replace

    import torch

    from attention_course.chapters.decoder.random_weights import random_decoder
    from attention_course.models.perturb import scrambled_weights

    w = random_decoder(0).to(torch.float64)
    ids = [[3, 1, 4, 1, 5, 9, 2], [2, 7, 1, 8, 2]]
    scaled = replace(w, layers=type(w.layers)(replace(l, W_q=l.W_q * 3, W_k=l.W_k / 3) for l in w.layers))
    base, moved = H.causal_role_scores(H.decoder_maps(w, ids)), H.causal_role_scores(H.decoder_maps(scaled, ids))
    scr = H.causal_role_scores(H.decoder_maps(scrambled_weights(w, seed=0, tensors=("W_q", "W_k")), ids))
    for role in H.CAUSAL_ROLES:
        np.testing.assert_allclose(moved[role], base[role], rtol=1e-10)  # float64 round-off of 30 ops
        assert not np.allclose(scr[role], base[role])


@pytest.mark.extended
def test_decoder_roles_run_reproduces_the_stored_scores_and_rule():
    """SmolLM2 on the chapter's sentences (about 30 s): each head's score within 2e-3 of the stored one
    (float32 maps; the store rounds to 1e-4), so the rule reads the same."""
    stored = H.load_decoder_roles()
    fresh = H.decoder_role_data(stored["texts"])
    assert fresh["lengths"] == stored["lengths"]
    for model in H.DECODER_MODELS:
        for role in H.CAUSAL_ROLES:
            np.testing.assert_allclose(fresh["models"][model][role], stored["models"][model][role], atol=2e-3)
    smol, scr = stored["models"]["SmolLM2"], stored["models"]["scrambled"]
    assert smol["previous token"].max() > 0.5 + 0.1 and scr["previous token"].max() < 0.5 - 0.1  # margins of the rule
