"""Blind battery for exercise `bert-embeddings` (my_embeddings(weights, input_ids, token_type_ids)).

As the statement asks, these functions use the name `layer_norm` picked in exercise 4's cell
(ch.yours_or_ours("layer-norm", ...)). It is NOT defined here: the harness must inject it into this
module's globals before calling (e.g. `mod.layer_norm = ch.layer_norm`).
"""
import torch


def _ln(weights, h):
    return layer_norm(h, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)


# --------------------------------------------------------------------------- correct answers
def correct_1(weights, input_ids, token_type_ids):
    """Style: advanced indexing of the three tables, positions as a slice [:T] broadcast over the batch."""
    T = input_ids.shape[1]
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[:T]
         + weights.token_type_embeddings[token_type_ids])
    return layer_norm(h, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)


def correct_2(weights, input_ids, token_type_ids):
    """Style: torch.nn.functional.embedding for every table, explicit (B, T) position ids from torch.arange."""
    F = torch.nn.functional
    B, T = input_ids.shape
    positions = torch.arange(T, device=input_ids.device).unsqueeze(0).expand(B, T)
    h = (F.embedding(input_ids, weights.word_embeddings)
         + F.embedding(positions, weights.position_embeddings)
         + F.embedding(token_type_ids, weights.token_type_embeddings))
    return _ln(weights, h)


def correct_3(weights, input_ids, token_type_ids):
    """Style: one-hot matrices times the tables (a lookup written as a matmul)."""
    F = torch.nn.functional
    B, T = input_ids.shape
    dt = weights.word_embeddings.dtype
    word = F.one_hot(input_ids, weights.word_embeddings.shape[0]).to(dt) @ weights.word_embeddings
    pos = torch.eye(T, weights.position_embeddings.shape[0], dtype=dt) @ weights.position_embeddings
    typ = F.one_hot(token_type_ids, weights.token_type_embeddings.shape[0]).to(dt) @ weights.token_type_embeddings
    return _ln(weights, word + pos + typ)


def correct_4(weights, input_ids, token_type_ids):
    """Style: index_select on flattened ids, then reshape to (B, T, d)."""
    B, T = input_ids.shape
    d = weights.word_embeddings.shape[1]
    word = weights.word_embeddings.index_select(0, input_ids.reshape(-1)).view(B, T, d)
    typ = weights.token_type_embeddings.index_select(0, token_type_ids.reshape(-1)).view(B, T, d)
    pos = weights.position_embeddings.index_select(0, torch.arange(T)).view(1, T, d)
    return _ln(weights, word + typ + pos)


def correct_5(weights, input_ids, token_type_ids):
    """Style: explicit Python loops over sequences and positions, stacking token vectors."""
    rows = []
    for b in range(input_ids.shape[0]):
        toks = []
        for t in range(input_ids.shape[1]):
            toks.append(weights.word_embeddings[int(input_ids[b, t])] + weights.position_embeddings[t]
                        + weights.token_type_embeddings[int(token_type_ids[b, t])])
        rows.append(torch.stack(toks))
    return _ln(weights, torch.stack(rows))


# --------------------------------------------------------------------------- wrong answers
def wrong_1(weights, input_ids, token_type_ids):
    """Counts positions from 1 (position_embeddings[1:T+1]) instead of from 0."""
    T = input_ids.shape[1]
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[1:T + 1]
         + weights.token_type_embeddings[token_type_ids])
    return _ln(weights, h)


def wrong_2(weights, input_ids, token_type_ids):
    """Forgets the token-type (segment) embedding."""
    T = input_ids.shape[1]
    return _ln(weights, weights.word_embeddings[input_ids] + weights.position_embeddings[:T])


def wrong_3(weights, input_ids, token_type_ids):
    """Ignores token_type_ids and adds token_type_embeddings[0] to every token (wrong for a sentence pair)."""
    T = input_ids.shape[1]
    h = weights.word_embeddings[input_ids] + weights.position_embeddings[:T] + weights.token_type_embeddings[0]
    return _ln(weights, h)


def wrong_4(weights, input_ids, token_type_ids):
    """Leaves out the LayerNorm: returns the raw sum of the three embeddings."""
    T = input_ids.shape[1]
    return (weights.word_embeddings[input_ids] + weights.position_embeddings[:T]
            + weights.token_type_embeddings[token_type_ids])


def wrong_5(weights, input_ids, token_type_ids):
    """Ignores weights.layer_norm_eps and uses torch's default 1e-5."""
    T = input_ids.shape[1]
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[:T]
         + weights.token_type_embeddings[token_type_ids])
    return layer_norm(h, weights.ln_weight, weights.ln_bias, 1e-5)


def wrong_6(weights, input_ids, token_type_ids):
    """Numbers positions across the flattened batch (0 .. B*T-1) instead of restarting at 0 in every sequence."""
    B, T = input_ids.shape
    pos = weights.position_embeddings[torch.arange(B * T).view(B, T)]
    h = weights.word_embeddings[input_ids] + pos + weights.token_type_embeddings[token_type_ids]
    return _ln(weights, h)


def wrong_7(weights, input_ids, token_type_ids):
    """Takes the number of positions from input_ids.shape[0] (B) instead of shape[1] (T)."""
    n = input_ids.shape[0]
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[:n]
         + weights.token_type_embeddings[token_type_ids])
    return _ln(weights, h)


def wrong_8(weights, input_ids, token_type_ids):
    """Normalises each of the three embeddings separately and sums the normalised vectors."""
    T = input_ids.shape[1]
    return (_ln(weights, weights.word_embeddings[input_ids]) + _ln(weights, weights.position_embeddings[:T])
            + _ln(weights, weights.token_type_embeddings[token_type_ids]))


def wrong_9(weights, input_ids, token_type_ids):
    """Normalises the word embedding only, then adds positions and token types after the LayerNorm."""
    T = input_ids.shape[1]
    return (_ln(weights, weights.word_embeddings[input_ids]) + weights.position_embeddings[:T]
            + weights.token_type_embeddings[token_type_ids])


def wrong_10(weights, input_ids, token_type_ids):
    """Finds a token's position with list.index, so a repeated word gets the position of its first occurrence."""
    rows = []
    for b in range(input_ids.shape[0]):
        ids = input_ids[b].tolist()
        pos = torch.tensor([ids.index(i) for i in ids])
        rows.append(weights.word_embeddings[input_ids[b]] + weights.position_embeddings[pos]
                    + weights.token_type_embeddings[token_type_ids[b]])
    return _ln(weights, torch.stack(rows))


def wrong_11(weights, input_ids, token_type_ids):
    """Squeezes the result, dropping the T = 1 (or B = 1) axis."""
    return correct_1(weights, input_ids, token_type_ids).squeeze()


def wrong_12(weights, input_ids, token_type_ids):
    """Bypasses the picked `layer_norm` with F.layer_norm, against 'Use layer_norm' in the statement."""
    T = input_ids.shape[1]
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[:T]
         + weights.token_type_embeddings[token_type_ids])
    return torch.nn.functional.layer_norm(h, (h.shape[-1],), weights.ln_weight, weights.ln_bias,
                                          weights.layer_norm_eps)


def wrong_13(weights, input_ids, token_type_ids):
    """Uses the first encoder layer's LayerNorm (layers[0].ln1_*) instead of the embeddings' ln_weight/ln_bias."""
    T = input_ids.shape[1]
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[:T]
         + weights.token_type_embeddings[token_type_ids])
    L0 = weights.layers[0]
    return layer_norm(h, L0.ln1_weight, L0.ln1_bias, weights.layer_norm_eps)


def wrong_14(weights, input_ids, token_type_ids):
    """Looks the position vectors up with the token ids (position_embeddings[input_ids]) instead of 0..T-1."""
    h = (weights.word_embeddings[input_ids] + weights.position_embeddings[input_ids]
         + weights.token_type_embeddings[token_type_ids])
    return _ln(weights, h)


def wrong_15(weights, input_ids, token_type_ids):
    """Uses the token-type ids as a 0/1 multiplier of token_type_embeddings[1] (type 0 gets no vector)."""
    T = input_ids.shape[1]
    typ = token_type_ids.unsqueeze(-1).to(weights.word_embeddings.dtype) * weights.token_type_embeddings[1]
    return _ln(weights, weights.word_embeddings[input_ids] + weights.position_embeddings[:T] + typ)


def wrong_16(weights, input_ids, token_type_ids):
    """Casts the embeddings to float32, so float64 weights give a float32 result."""
    return correct_1(weights, input_ids, token_type_ids).float()


ANSWERS = [
    ("correct_1", correct_1, "correct", "advanced indexing, positions as slice [:T]"),
    ("correct_2", correct_2, "correct", "F.embedding with arange position ids"),
    ("correct_3", correct_3, "correct", "one-hot matmul lookups"),
    ("correct_4", correct_4, "correct", "index_select on flattened ids"),
    ("correct_5", correct_5, "correct", "Python loops over sequences and positions"),
    ("wrong_1", wrong_1, "wrong", "positions counted from 1"),
    ("wrong_2", wrong_2, "wrong", "token-type embedding forgotten"),
    ("wrong_3", wrong_3, "wrong", "token_type_ids ignored (always type 0)"),
    ("wrong_4", wrong_4, "wrong", "no LayerNorm"),
    ("wrong_5", wrong_5, "wrong", "layer_norm_eps ignored (1e-5)"),
    ("wrong_6", wrong_6, "wrong", "positions numbered across the flattened batch"),
    ("wrong_7", wrong_7, "wrong", "number of positions from shape[0] (B) instead of shape[1] (T)"),
    ("wrong_8", wrong_8, "wrong", "each embedding normalised separately"),
    ("wrong_9", wrong_9, "wrong", "only the word embedding normalised, rest added after LN"),
    ("wrong_10", wrong_10, "wrong", "position from list.index: repeated word gets first occurrence's position"),
    ("wrong_11", wrong_11, "wrong", "result squeezed (T = 1 axis dropped)"),
    ("wrong_12", wrong_12, "wrong", "F.layer_norm instead of the picked layer_norm (rule of the statement)"),
    ("wrong_13", wrong_13, "wrong", "layer 0's ln1 parameters instead of the embedding LayerNorm's"),
    ("wrong_14", wrong_14, "wrong", "position vectors looked up by token id"),
    ("wrong_15", wrong_15, "wrong", "token type as a 0/1 multiplier of type vector 1"),
    ("wrong_16", wrong_16, "wrong", "result cast to float32"),
]
