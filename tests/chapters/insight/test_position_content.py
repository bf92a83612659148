"""chapters/insight/position_content.py: content or position, head by head, against loop references in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course import ShapeError
from attention_course.chapters.insight import position_content as pc
from attention_course.chapters.graphs.topology import shuffled_sentences


def _reference_scores(A, B, perm, causal=False):
    """One (m, m) pair, query by query with np.corrcoef: (by word, by offset) means.

    The compared keys of each row are listed one by one and renormalised over; a row with fewer
    than two of them has no correlation and is skipped.
    """
    m = len(perm)
    where = np.argsort(perm)
    words, offsets = [], []
    for i in range(m):
        sees = [j for j in range(m) if not causal or j <= i]
        word_pairs = [(A[i, j], B[where[i], where[j]]) for j in sees if not causal or where[j] <= where[i]]
        offset_pairs = [(A[i, j], B[where[i], where[i] + j - i]) for j in sees if 0 <= where[i] + j - i < m]
        for pairs, out in ((word_pairs, words), (offset_pairs, offsets)):
            if len(pairs) < 2:
                continue
            x, y = (np.array(v) / np.sum(v) for v in zip(*pairs))  # renormalised over the compared keys
            out.append(0.0 if x.std() < 1e-12 or y.std() < 1e-12 else np.corrcoef(x, y)[0, 1])
    return np.mean(words), np.mean(offsets)


def _causal_rows(rng, shape):
    """Random causal rows (..., m, m): row i over keys 0..i."""
    m = shape[-1]
    A = rng.dirichlet(np.full(m, 0.4), size=shape[:-1]) * np.tril(np.ones((m, m)))
    return A / A.sum(-1, keepdims=True)


def test_follow_scores_match_a_loop_with_numpy_corrcoef():
    rng = np.random.default_rng(0)
    m = 7
    A = rng.dirichlet(np.full(m, 0.4), size=(2, 3, m))  # (L=2, H=3, m, m)
    Bs = [rng.dirichlet(np.full(m, 0.4), size=(2, 3, m)) for _ in range(3)]
    perms = [rng.permutation(m).tolist() for _ in range(3)]
    w, o = pc.follow_scores(A, Bs, perms)
    for l in range(2):
        for h in range(3):
            ref = np.mean([_reference_scores(A[l, h], B[l, h], p) for B, p in zip(Bs, perms)], axis=0)
            np.testing.assert_allclose((w[l, h], o[l, h]), ref, rtol=1e-10, atol=1e-12)  # float64 sums


def test_causal_follow_scores_compare_only_pairs_visible_in_both_orders():
    """A decoder's rows against the loop: keys before the query in both orders; offsets looking back."""
    rng = np.random.default_rng(5)
    m = 8
    A = _causal_rows(rng, (2, 3, m, m))
    Bs = [_causal_rows(rng, (2, 3, m, m)) for _ in range(3)]
    perms = [rng.permutation(m).tolist() for _ in range(3)]
    w, o = pc.follow_scores(A, Bs, perms, causal=True)
    for l in range(2):
        for h in range(3):
            ref = np.mean([_reference_scores(A[l, h], B[l, h], p, causal=True) for B, p in zip(Bs, perms)], axis=0)
            np.testing.assert_allclose((w[l, h], o[l, h]), ref, rtol=1e-10, atol=1e-12)
    w_all, o_all = pc.follow_scores(A, Bs, perms)  # reading the masked zeros as weights changes the scores
    assert np.abs(w_all - w).max() > 0.05 and np.abs(o_all - o).max() > 0.05


def test_a_causal_previous_token_head_follows_the_offsets_and_a_fixed_word_head_the_words():
    perms = [np.random.default_rng(s).permutation(9).tolist() + [9] for s in range(4)]
    prev = pc.rule_maps(perms, "previous")
    w, o = pc.follow_scores(prev[0], prev[1:], perms, causal=True)
    assert o[0, 0] == pytest.approx(1.0) and w[0, 0] < 0.3


@pytest.mark.parametrize("rule, kind", [("previous", "position"), ("first word", "content"), ("uniform", "mixed")])
def test_the_baseline_rules_land_in_their_kind(rule, kind):
    perms = [np.random.default_rng(s).permutation(10).tolist() for s in range(5)]
    maps = pc.rule_maps(perms, rule)
    w, o = pc.follow_scores(maps[0], maps[1:], perms)
    assert pc.classify_heads(np.zeros((1, 1)), w, o)[0, 0] == kind


def test_the_word_reading_of_a_fixed_word_head_is_exactly_one():
    perms = [[2, 0, 1, 3], [3, 1, 0, 2]]
    maps = pc.rule_maps(perms, "first word")
    w, _ = pc.follow_scores(maps[0], maps[1:], perms)
    assert w[0, 0] == pytest.approx(1.0, abs=1e-12)  # the same one-hot row, relabelled: correlation 1


def test_best_offset_share_matches_a_loop():
    rng = np.random.default_rng(1)
    maps = [rng.dirichlet(np.ones(5), size=(1, 2, 5)) for _ in range(3)]
    share, offset = pc.best_offset_share(maps)
    for h in range(2):
        table = {d: np.mean([np.mean([M[0, h, i, i + d] for i in range(5) if 0 <= i + d < 5]) for M in maps])
                 for d in range(-4, 5)}
        best = max(table, key=table.get)
        assert (int(offset[0, h]), share[0, h]) == (best, pytest.approx(table[best], rel=1e-12))


def test_word_maps():
    rng = np.random.default_rng(2)
    A = rng.dirichlet(np.ones(6), size=(1, 1, 6))
    W = pc.word_maps(A)[0, 0]
    np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(W * A[0, 0, 1:5, 1:5].sum(axis=1, keepdims=True), A[0, 0, 1:5, 1:5], rtol=1e-12)


def test_classify_heads_counts_and_thresholds():
    sink, w, o = np.array([0.6, 0.4, 0.0, 0.0]), np.array([0.0, 0.9, 0.5, 0.3]), np.array([0.0, 0.1, 0.4, 0.6])
    labels = pc.classify_heads(sink, w, o)
    assert labels.tolist() == ["sink", "content", "mixed", "position"]
    assert pc.classify_heads(sink, w, o, sink_tol=0.7, margin_tol=0.05).tolist() == [
        "mixed", "content", "content", "position"]
    assert pc.count_categories(labels) == {"content": 1, "position": 1, "sink": 1, "mixed": 1}


# ------------------------------------------------------------------ the rule
def _model(n_content, n_position, n_sink, n_mixed):
    """Scores of a model with that many heads of each kind: (sink, by_word, by_offset), each (heads,)."""
    kinds = [(0.0, 0.9, 0.1)] * n_content + [(0.0, 0.1, 0.9)] * n_position + [(0.8, 0.9, 0.1)] * n_sink \
        + [(0.0, 0.5, 0.45)] * n_mixed
    return tuple(np.array(v) for v in zip(*kinds))


@pytest.mark.parametrize("heads, verdict", [
    ((40, 2, 30, 0), "holds"),             # content heads at least half of all heads
    ((36, 0, 36, 0), "holds"),             # exactly half
    ((25, 9, 36, 2), "holds when"),        # more content than position heads, under half: the sinks
    ((10, 10, 50, 2), "wrong as stated"),  # as many position heads as content heads
    ((0, 72, 0, 0), "wrong as stated"),    # a model whose heads all follow offsets
])
def test_every_outcome_of_the_rule_is_reachable_from_head_scores(heads, verdict):
    shares = pc.kind_shares(pc.classify_heads(*_model(*heads)))
    assert shares == {k: n / sum(heads) for k, n in zip(pc.CATEGORIES, heads)}
    assert pc.content_verdict(shares) == verdict


def test_a_planted_inversion_of_the_scores_turns_the_verdict():
    """Swap the word and offset correlations of a content-heavy model: the same heads now follow offsets."""
    sink, w, o = _model(40, 2, 30, 0)
    assert pc.content_verdict(pc.kind_shares(pc.classify_heads(sink, w, o))) == "holds"
    assert pc.content_verdict(pc.kind_shares(pc.classify_heads(sink, o, w))) == "wrong as stated"


def test_kind_shares_rejects_unknown_labels():
    with pytest.raises(ValueError, match=r"labels \['property'\]; expected a non-empty list of"):
        pc.kind_shares(np.array(["content", "property"]))


def _fake_model(kind):
    """maps_of for a model whose every head reads the previous token, or the token 'anchor' wherever it is."""
    def maps_of(texts):
        tokens, maps = [], []
        for t in texts:
            toks = ["[CLS]", *t[:-1].split(), ".", "[SEP]"]
            n = len(toks)
            A = np.eye(n, k=-1)
            A[:2] = np.eye(n)[:2]
            if kind == "content":
                A = np.zeros((n, n))
                A[:, toks.index("anchor")] = 1.0
            tokens.append(toks)
            maps.append(np.broadcast_to(A, (2, 3, n, n)))
        return tokens, maps
    return maps_of


@pytest.mark.parametrize("kind", ["position", "content"])
def test_content_position_scores_sorts_a_known_model(kind):
    sentences = ["anchor one two three four five six seven.", "alpha beta anchor gamma delta epsilon zeta."]
    scores = pc.content_position_scores(_fake_model(kind), sentences, n_shuffles=4, seed=3)
    assert scores.by_word.shape == (2, 2, 3)
    counts = scores.counts()
    assert counts[kind].tolist() == [6, 6] and sum(v.sum() for v in counts.values()) == 12
    if kind == "position":
        assert (scores.best_offset == -1).all() and (scores.offset_share == 1.0).all()


def test_content_position_scores_sink_is_learned_topologys_mean_weight_on_cls_and_sep():
    """Chapter 5's sink share: the mean over ALL rows (the sinks' own included) and over every version."""
    rng = np.random.default_rng(2)
    n = 4 + 3  # four words, the full stop, [CLS] and [SEP]
    maps = [rng.dirichlet(np.ones(n), size=(2, 3, n)) for _ in range(3)]  # the sentence and 2 shuffles
    scores = pc.content_position_scores(lambda texts: (None, maps), ["one two three four."], n_shuffles=2)
    ref = np.mean([[M[:, :, i, 0] + M[:, :, i, -1] for i in range(n)] for M in maps], axis=(0, 1))
    np.testing.assert_allclose(scores.sink[0], ref, rtol=1e-14)
    causal = [_causal_rows(rng, (2, 3, n - 1, n - 1)) for _ in range(3)]  # start token, words, full stop
    scores = pc.content_position_scores(lambda texts: (None, causal), ["one two three four."], n_shuffles=2,
                                        causal=True)
    np.testing.assert_allclose(scores.sink[0], np.mean([M[..., 0].mean(-1) for M in causal], axis=0), rtol=1e-14)


def test_a_sink_share_of_exactly_the_line_is_a_sink_head():
    """The course's one line: a share of at least 0.5 is a sink head (chapter 3's classify_heads)."""
    assert pc.classify_heads(np.array([0.5, 0.4999]), np.array([0.9, 0.9]), np.zeros(2)).tolist() == ["sink", "content"]


def test_content_position_scores_refuses_words_split_into_several_tokens():
    def split(texts):
        tokens, maps = _fake_model("position")(texts)
        return [t + ["##x"] for t in tokens], maps
    with pytest.raises(ValueError, match="some word is split into several tokens"):
        pc.content_position_scores(split, ["one two three."], n_shuffles=1)


def test_shuffled_sentences_keep_the_full_stop_last_and_match_their_perms():
    texts, perms = shuffled_sentences("a b c d e.", 3, seed=4)
    words = "a b c d e".split() + ["."]
    for text, perm in zip(texts[1:], perms):
        assert text.endswith(".") and perm[-1] == 5
        assert text[:-1].split() == [words[i] for i in perm[:-1]]
    with pytest.raises(ValueError, match="must end with a full stop"):
        shuffled_sentences("no stop", 1)


@pytest.mark.parametrize("call, match", [
    (lambda: pc.word_maps(np.ones((2, 2, 2))), r"maps have shape \(2, 2, 2\); expected \(L, H, n, n\)"),
    (lambda: pc.follow_scores(np.ones((1, 1, 3, 3)), [np.ones((1, 1, 3, 3))], [[0, 1, 1]]),
     r"perm \[0, 1, 1\]; expected \(1, 1, 3, 3\) and a permutation of range\(3\)"),
    (lambda: pc.best_offset_share([np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 4))]), r"different lengths \[3, 4\]"),
])
def test_bad_input_names_the_shapes(call, match):
    with pytest.raises(ShapeError, match=match):
        call()


def test_rule_maps_rejects_an_unknown_rule():
    with pytest.raises(ValueError, match="rule 'next' is not one of"):
        pc.rule_maps([[0, 1]], "next")


def _planted_words(perms, rule):
    """(1, 1, m, m) maps over the words and the full stop of each version, for heads the reading cannot place.

    ``"place"`` always reads the third place, ``"last"`` the final full stop (which never moves), ``"window"``
    puts most of its weight (0.7) on the query itself and the rest on its two neighbours
    (with half the weight on itself it comes out position: the blind spot needs a strong self weight).
    """
    m = len(perms[0])
    out = []
    for _ in perms:
        A = np.zeros((m, m))
        if rule == "place":
            A[:, 2] = 1.0
        elif rule == "last":
            A[:, -1] = 1.0
        else:
            A = 0.7 * np.eye(m) + 0.15 * (np.eye(m, k=1) + np.eye(m, k=-1))
            A /= A.sum(-1, keepdims=True)
        out.append(A[None, None])
    return out


@pytest.mark.parametrize("rule, kind", [("place", "mixed"), ("last", "content"), ("window", "mixed")])
def test_the_readings_blind_spots_land_where_the_page_says(rule, kind):
    """Heads neither reading was built for: a fixed absolute place is not a fixed offset (mixed); the full stop
    never moves, so reading it looks like reading a word (content); a window weighted mostly on the query
    matches both readings, since the query's own key is the same word and the same offset (mixed). The
    evidence page names these three; this keeps them true."""
    perms = [np.random.default_rng(s).permutation(10).tolist() + [10] for s in range(5)]
    maps = _planted_words(perms, rule)
    w, o = pc.follow_scores(maps[0], maps[1:], perms)
    assert pc.classify_heads(np.zeros((1, 1)), w, o)[0, 0] == kind
