"""Blind battery for exercise `bert-attention` (my_self_attention(x, layer, num_heads, mask))."""
import math

import torch


# --------------------------------------------------------------------------- correct answers
def correct_1(x, layer, num_heads, mask):
    """Style: view/transpose into heads, batched matmul, masked_fill with -inf, torch.softmax."""
    B, T, d = x.shape
    d_k = d // num_heads

    def heads(t):
        return t.view(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)

    q = heads(x @ layer.W_q + layer.b_q)
    k = heads(x @ layer.W_k + layer.b_k)
    v = heads(x @ layer.W_v + layer.b_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(B, T, d)
    return out @ layer.W_o + layer.b_o, weights


def correct_2(x, layer, num_heads, mask):
    """Style: einsum throughout, scale folded into q, additive mask built with torch.where."""
    B, T, d = x.shape
    h = num_heads
    d_k = d // h
    q = torch.einsum("btd,de->bte", x, layer.W_q) + layer.b_q
    k = torch.einsum("btd,de->bte", x, layer.W_k) + layer.b_k
    v = torch.einsum("btd,de->bte", x, layer.W_v) + layer.b_v
    q = q.reshape(B, T, h, d_k) / math.sqrt(d_k)
    k = k.reshape(B, T, h, d_k)
    v = v.reshape(B, T, h, d_k)
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k)
    zero = torch.zeros((), dtype=scores.dtype)
    neg = torch.tensor(float("-inf"), dtype=scores.dtype)
    scores = scores + torch.where(mask, zero, neg)
    weights = scores.softmax(dim=-1)
    ctx = torch.einsum("bhqk,bkhe->bqhe", weights, v).reshape(B, T, d)
    out = torch.einsum("btd,de->bte", ctx, layer.W_o) + layer.b_o
    return out, weights


def correct_3(x, layer, num_heads, mask):
    """Style: explicit Python loop over heads, slicing features i*d_k:(i+1)*d_k, then torch.cat."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = x @ layer.W_q + layer.b_q
    k = x @ layer.W_k + layer.b_k
    v = x @ layer.W_v + layer.b_v
    full_mask = torch.broadcast_to(mask, (B, num_heads, T, T))
    outs, maps = [], []
    for i in range(num_heads):
        sl = slice(i * d_k, (i + 1) * d_k)
        s = q[..., sl] @ k[..., sl].transpose(-1, -2) / math.sqrt(d_k)  # (B, T, T)
        s = s.masked_fill(~full_mask[:, i], float("-inf"))
        w = torch.softmax(s, dim=-1)
        maps.append(w)
        outs.append(w @ v[..., sl])
    concat = torch.cat(outs, dim=-1)
    return concat @ layer.W_o + layer.b_o, torch.stack(maps, dim=1)


def correct_4(x, layer, num_heads, mask):
    """Style: hand-written numerically stable softmax (subtract the row max, exp, zero masked, normalise)."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).reshape(B, T, num_heads, d_k).permute(0, 2, 1, 3)
    k = (x @ layer.W_k + layer.b_k).reshape(B, T, num_heads, d_k).permute(0, 2, 3, 1)  # (B, h, d_k, T)
    v = (x @ layer.W_v + layer.b_v).reshape(B, T, num_heads, d_k).permute(0, 2, 1, 3)
    scores = torch.matmul(q, k) * (1.0 / math.sqrt(d_k))
    m = torch.broadcast_to(mask, scores.shape)
    masked = torch.where(m, scores, torch.full_like(scores, float("-inf")))
    row_max = masked.amax(dim=-1, keepdim=True)
    e = torch.exp(masked - row_max) * m
    weights = e / e.sum(dim=-1, keepdim=True)
    out = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(B, T, d)
    return torch.addmm(layer.b_o, out.reshape(B * T, d), layer.W_o).reshape(B, T, d), weights


def correct_5(x, layer, num_heads, mask):
    """Style: one fused QKV projection (concatenated weights), torch.chunk, unflatten/flatten, baddbmm-free bmm per (batch*head)."""
    B, T, d = x.shape
    h = num_heads
    d_k = d // h
    W = torch.cat([layer.W_q, layer.W_k, layer.W_v], dim=1)
    b = torch.cat([layer.b_q, layer.b_k, layer.b_v])
    q, k, v = torch.chunk(x @ W + b, 3, dim=-1)
    q, k, v = (t.unflatten(-1, (h, d_k)).transpose(1, 2).reshape(B * h, T, d_k) for t in (q, k, v))
    scores = torch.bmm(q, k.transpose(1, 2)).div(d_k ** 0.5).view(B, h, T, T)
    scores = scores.masked_fill(torch.logical_not(mask), -math.inf)
    weights = torch.nn.functional.softmax(scores, dim=-1)
    ctx = torch.bmm(weights.reshape(B * h, T, T), v).view(B, h, T, d_k).transpose(1, 2).flatten(2)
    return ctx @ layer.W_o + layer.b_o, weights


# --------------------------------------------------------------------------- wrong answers
def _mha(x, layer, num_heads, mask, *, scale=None, biases=True, out_bias=True, fill=float("-inf"),
         invert=False, softmax_dim=-1, transpose_w=False, scores_kq=False, use_mask=True):
    """Parametrised variant of correct_1 used to plant single mistakes."""
    B, T, d = x.shape
    d_k = d // num_heads
    Wt = (lambda W: W.T) if transpose_w else (lambda W: W)
    bq, bk, bv = (layer.b_q, layer.b_k, layer.b_v) if biases else (0, 0, 0)

    def heads(t):
        return t.view(B, T, num_heads, d_k).transpose(1, 2)

    q = heads(x @ Wt(layer.W_q) + bq)
    k = heads(x @ Wt(layer.W_k) + bk)
    v = heads(x @ Wt(layer.W_v) + bv)
    s = (k @ q.transpose(-2, -1)) if scores_kq else (q @ k.transpose(-2, -1))
    s = s / (math.sqrt(d_k) if scale is None else scale)
    if use_mask:
        s = s.masked_fill(mask if invert else ~mask, fill)
    w = torch.softmax(s, dim=softmax_dim)
    out = (w @ v).transpose(1, 2).reshape(B, T, d) @ Wt(layer.W_o)
    if out_bias:
        out = out + layer.b_o
    return out, w


def wrong_1(x, layer, num_heads, mask):
    """Scales the scores by sqrt(d) (the model width) instead of sqrt(d_k) (the head width)."""
    return _mha(x, layer, num_heads, mask, scale=math.sqrt(x.shape[-1]))


def wrong_2(x, layer, num_heads, mask):
    """Leaves out the 1/sqrt(d_k) scaling of the scores."""
    return _mha(x, layer, num_heads, mask, scale=1.0)


def wrong_3(x, layer, num_heads, mask):
    """Drops the query/key/value biases b_q, b_k, b_v (uses x @ W only)."""
    return _mha(x, layer, num_heads, mask, biases=False)


def wrong_4(x, layer, num_heads, mask):
    """Forgets the output bias b_o after the output projection W_o."""
    return _mha(x, layer, num_heads, mask, out_bias=False)


def wrong_5(x, layer, num_heads, mask):
    """Reads the mask backwards: blanks the positions where mask is True (True taken as 'masked out')."""
    return _mha(x, layer, num_heads, mask, invert=True)


def wrong_6(x, layer, num_heads, mask):
    """Applies the mask after the softmax by zeroing weights, so rows with masked keys no longer sum to 1."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ layer.W_k + layer.b_k).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ layer.W_v + layer.b_v).view(B, T, num_heads, d_k).transpose(1, 2)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1) * mask
    out = (w @ v).transpose(1, 2).reshape(B, T, d)
    return out @ layer.W_o + layer.b_o, w


def wrong_7(x, layer, num_heads, mask):
    """Takes the softmax over the query axis (dim=-2) instead of over the keys (dim=-1)."""
    return _mha(x, layer, num_heads, mask, softmax_dim=-2)


def wrong_8(x, layer, num_heads, mask):
    """Gives head i the strided features i, i+h, i+2h, ... instead of the block i*d_k:(i+1)*d_k."""
    B, T, d = x.shape
    h = num_heads
    d_k = d // h

    def heads(t):  # (B, T, d) -> (B, h, T, d_k), feature j goes to head j % h
        return t.view(B, T, d_k, h).permute(0, 3, 1, 2)

    q = heads(x @ layer.W_q + layer.b_q)
    k = heads(x @ layer.W_k + layer.b_k)
    v = heads(x @ layer.W_v + layer.b_v)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v).permute(0, 2, 3, 1).reshape(B, T, d)
    return ctx @ layer.W_o + layer.b_o, w


def wrong_9(x, layer, num_heads, mask):
    """Splits heads with view(B, h, T, d_k) straight from (B, T, d), without the transpose, mixing tokens across heads."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).reshape(B, num_heads, T, d_k)
    k = (x @ layer.W_k + layer.b_k).reshape(B, num_heads, T, d_k)
    v = (x @ layer.W_v + layer.b_v).reshape(B, num_heads, T, d_k)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    out = (w @ v).reshape(B, T, d)
    return out @ layer.W_o + layer.b_o, w


def wrong_10(x, layer, num_heads, mask):
    """Merges heads with reshape(B, T, d) straight from (B, h, T, d_k), forgetting to transpose heads and tokens back."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ layer.W_k + layer.b_k).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ layer.W_v + layer.b_v).view(B, T, num_heads, d_k).transpose(1, 2)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    out = (w @ v).reshape(B, T, d)
    return out @ layer.W_o + layer.b_o, w


def wrong_11(x, layer, num_heads, mask):
    """Returns the weights averaged over heads, shape (B, T, T) instead of (B, h, T, T)."""
    out, w = correct_1(x, layer, num_heads, mask)
    return out, w.mean(dim=1)


def wrong_12(x, layer, num_heads, mask):
    """Returns the pair in the wrong order: (weights, output)."""
    out, w = correct_1(x, layer, num_heads, mask)
    return w, out


def wrong_13(x, layer, num_heads, mask):
    """Uses the nn.Linear convention x @ W.T + b instead of the stated x @ W + b."""
    return _mha(x, layer, num_heads, mask, transpose_w=True)


def wrong_14(x, layer, num_heads, mask):
    """Fills masked scores with 0 instead of -inf, so masked keys still get weight."""
    return _mha(x, layer, num_heads, mask, fill=0.0)


def wrong_15(x, layer, num_heads, mask):
    """Calls the package's attention (ch.self_attention), which the statement forbids."""
    from attention_course.chapters import encoder as ch  # the forbidden call
    return ch.self_attention(x, layer, num_heads, mask)


def wrong_16(x, layer, num_heads, mask):
    """Folds 1/sqrt(d_k) into layer.W_q and layer.b_q in place, mutating the caller's weights (a second call is scaled twice)."""
    d_k = x.shape[-1] // num_heads
    layer.W_q /= math.sqrt(d_k)
    layer.b_q /= math.sqrt(d_k)
    return _mha(x, layer, num_heads, mask, scale=1.0)


def wrong_17(x, layer, num_heads, mask):
    """Assumes a (B, 1, 1, T) padding mask: squeezes it and rebuilds [:, None, None, :], which breaks the causal mask and T = 1."""
    key = mask.squeeze()
    if key.dim() == 1:
        key = key.unsqueeze(0)
    return _mha(x, layer, num_heads, key[:, None, None, :])


def wrong_18(x, layer, num_heads, mask):
    """Hand-written softmax without subtracting the row maximum: exp overflows to inf/NaN for large scores."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ layer.W_k + layer.b_k).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ layer.W_v + layer.b_v).view(B, T, num_heads, d_k).transpose(1, 2)
    e = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(d_k)) * mask
    w = e / e.sum(dim=-1, keepdim=True)
    out = (w @ v).transpose(1, 2).reshape(B, T, d)
    return out @ layer.W_o + layer.b_o, w


def wrong_19(x, layer, num_heads, mask):
    """Ignores the mask entirely (every query attends to every key, padding and future included)."""
    return _mha(x, layer, num_heads, mask, use_mask=False)


def wrong_20(x, layer, num_heads, mask):
    """Computes the scores as k q^T instead of q k^T (transposed score matrix, keys attending to queries)."""
    return _mha(x, layer, num_heads, mask, scores_kq=True)


def wrong_21(x, layer, num_heads, mask):
    """Fills masked scores with the float32 constant -1e9 by adding (1 - mask) * -1e9 in float32, casting the float64 scores down."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).view(B, T, num_heads, d_k).transpose(1, 2)
    k = (x @ layer.W_k + layer.b_k).view(B, T, num_heads, d_k).transpose(1, 2)
    v = (x @ layer.W_v + layer.b_v).view(B, T, num_heads, d_k).transpose(1, 2)
    s = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).float() + (1.0 - mask.float()) * -1e9
    w = torch.softmax(s, dim=-1)
    out = (w.to(x.dtype) @ v).transpose(1, 2).reshape(B, T, d)
    return out @ layer.W_o + layer.b_o, w


ANSWERS = [
    ("correct_1", correct_1, "correct", "view/transpose heads, batched matmul, masked_fill(-inf), torch.softmax"),
    ("correct_2", correct_2, "correct", "einsum everywhere, scale folded into q, additive mask via torch.where"),
    ("correct_3", correct_3, "correct", "Python loop over heads slicing i*d_k:(i+1)*d_k, torch.cat"),
    ("correct_4", correct_4, "correct", "hand-written stable softmax (max-subtracted exp), permute, addmm"),
    ("correct_5", correct_5, "correct", "fused QKV projection, chunk/unflatten, bmm over B*h"),
    ("wrong_1", wrong_1, "wrong", "scale sqrt(d) instead of sqrt(d_k)"),
    ("wrong_2", wrong_2, "wrong", "no 1/sqrt(d_k) scaling"),
    ("wrong_3", wrong_3, "wrong", "q/k/v biases dropped"),
    ("wrong_4", wrong_4, "wrong", "output bias b_o forgotten"),
    ("wrong_5", wrong_5, "wrong", "mask inverted (True treated as blocked)"),
    ("wrong_6", wrong_6, "wrong", "mask applied after softmax without renormalising"),
    ("wrong_7", wrong_7, "wrong", "softmax over queries (dim=-2)"),
    ("wrong_8", wrong_8, "wrong", "strided head features i::h instead of contiguous blocks"),
    ("wrong_9", wrong_9, "wrong", "head split by view(B, h, T, d_k) without transpose"),
    ("wrong_10", wrong_10, "wrong", "head merge by reshape(B, T, d) without transpose back"),
    ("wrong_11", wrong_11, "wrong", "weights averaged over heads (B, T, T)"),
    ("wrong_12", wrong_12, "wrong", "returns (weights, output) in swapped order"),
    ("wrong_13", wrong_13, "wrong", "x @ W.T + b (nn.Linear convention)"),
    ("wrong_14", wrong_14, "wrong", "masked scores filled with 0 instead of -inf"),
    ("wrong_15", wrong_15, "wrong", "calls the package's attention (forbidden)"),
    ("wrong_16", wrong_16, "wrong", "in-place folding of the scale into layer.W_q / layer.b_q"),
    ("wrong_17", wrong_17, "wrong", "assumes a (B,1,1,T) key mask (squeeze), breaks causal mask and T=1"),
    ("wrong_18", wrong_18, "wrong", "softmax without max subtraction (overflow for large scores)"),
    ("wrong_19", wrong_19, "wrong", "mask ignored"),
    ("wrong_20", wrong_20, "wrong", "scores k q^T (transposed)"),
    ("wrong_21", wrong_21, "wrong", "scores cast to float32 for a -1e9 additive mask (float64 precision lost, weights float32)"),
]
