"""Blind battery for exercise `post-ln-block` (my_block(x, layer, num_heads, mask, eps)).

Like the notebook cell, these functions use the names `self_attention`, `layer_norm` and
`feed_forward`, which the exercise cell picks (ch.yours_or_ours). They are NOT defined here: the
harness must inject them into this module's globals before calling (e.g. `mod.layer_norm = ...`).
"""
import torch


# --------------------------------------------------------------------------- correct answers
def correct_1(x, layer, num_heads, mask, eps):
    """Style: straight-line, tuple-unpacking the attention output."""
    attn, _ = self_attention(x, layer, num_heads, mask)
    a = layer_norm(x + attn, layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def correct_2(x, layer, num_heads, mask, eps):
    """Style: a generic 'residual then normalise' helper applied to two sub-layer lambdas."""
    def sublayer(h, f, gamma, beta):
        return layer_norm(h + f(h), gamma, beta, eps)

    a = sublayer(x, lambda h: self_attention(h, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias)
    return sublayer(a, lambda h: feed_forward(h, layer), layer.ln2_weight, layer.ln2_bias)


def correct_3(x, layer, num_heads, mask, eps):
    """Style: loop over the two stages, looking the LayerNorm parameters up by name with getattr."""
    stages = [lambda h: self_attention(h, layer, num_heads, mask)[0], lambda h: feed_forward(h, layer)]
    h = x
    for i, f in enumerate(stages, start=1):
        h = layer_norm(h + f(h), getattr(layer, f"ln{i}_weight"), getattr(layer, f"ln{i}_bias"), eps)
    return h


def correct_4(x, layer, num_heads, mask, eps):
    """Style: keyword arguments and torch.add for the residuals, indexing [0] of the attention pair."""
    out = self_attention(x=x, layer=layer, num_heads=num_heads, mask=mask)[0]
    a = layer_norm(torch.add(x, out), layer.ln1_weight, layer.ln1_bias, eps)
    r = torch.add(a, feed_forward(a, layer))
    return layer_norm(r, layer.ln2_weight, layer.ln2_bias, eps)


# --------------------------------------------------------------------------- wrong answers
def wrong_1(x, layer, num_heads, mask, eps):
    """Builds a pre-LN block (x + MHA(LN1(x)), then a + FFN(LN2(a))) instead of post-LN."""
    h = layer_norm(x, layer.ln1_weight, layer.ln1_bias, eps)
    a = x + self_attention(h, layer, num_heads, mask)[0]
    return a + feed_forward(layer_norm(a, layer.ln2_weight, layer.ln2_bias, eps), layer)


def wrong_2(x, layer, num_heads, mask, eps):
    """Swaps the two LayerNorms' parameters (ln2 after attention, ln1 after the feed-forward block)."""
    a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln2_weight, layer.ln2_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln1_weight, layer.ln1_bias, eps)


def wrong_3(x, layer, num_heads, mask, eps):
    """Forgets the residual around attention: a = LN1(MHA(x))."""
    a = layer_norm(self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_4(x, layer, num_heads, mask, eps):
    """Forgets the residual around the feed-forward block: y = LN2(FFN(a))."""
    a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_5(x, layer, num_heads, mask, eps):
    """Adds the block input x, not a, in the second residual: y = LN2(x + FFN(a))."""
    a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(x + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_6(x, layer, num_heads, mask, eps):
    """Feeds x instead of a to the feed-forward block: y = LN2(a + FFN(x))."""
    a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(x, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_7(x, layer, num_heads, mask, eps):
    """Returns the pair (y, attention weights), copying self_attention's return convention, instead of y alone."""
    attn, w = self_attention(x, layer, num_heads, mask)
    a = layer_norm(x + attn, layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps), w


def wrong_8(x, layer, num_heads, mask, eps):
    """Ignores the eps argument and uses 1e-5 in both LayerNorms."""
    a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, 1e-5)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, 1e-5)


def wrong_9(x, layer, num_heads, mask, eps):
    """Leaves out the final LayerNorm: returns a + FFN(a)."""
    a = layer_norm(x + self_attention(x, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return a + feed_forward(a, layer)


def wrong_10(x, layer, num_heads, mask, eps):
    """Drops the mask (passes an all-True mask), so padding and future positions are attended."""
    B, T, _ = x.shape
    full = torch.ones(B, 1, 1, T, dtype=torch.bool)
    a = layer_norm(x + self_attention(x, layer, num_heads, full)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_11(x, layer, num_heads, mask, eps):
    """Bypasses the picked `layer_norm` with torch.nn.functional.layer_norm, against 'build your block from those three names'."""
    F = torch.nn.functional
    d = x.shape[-1]
    a = F.layer_norm(x + self_attention(x, layer, num_heads, mask)[0], (d,), layer.ln1_weight, layer.ln1_bias, eps)
    return F.layer_norm(a + feed_forward(a, layer), (d,), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_12(x, layer, num_heads, mask, eps):
    """Adds the attention output into x in place (x += MHA(x)), modifying the caller's tensor."""
    x += self_attention(x, layer, num_heads, mask)[0]
    a = layer_norm(x, layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_13(x, layer, num_heads, mask, eps):
    """Normalises both before and after each sub-block (a 'sandwich' of pre- and post-LN)."""
    h = layer_norm(x, layer.ln1_weight, layer.ln1_bias, eps)
    a = layer_norm(h + self_attention(h, layer, num_heads, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    h2 = layer_norm(a, layer.ln2_weight, layer.ln2_bias, eps)
    return layer_norm(h2 + feed_forward(h2, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_14(x, layer, num_heads, mask, eps):
    """Hard-codes MiniLM's 12 heads instead of using the num_heads argument."""
    a = layer_norm(x + self_attention(x, layer, 12, mask)[0], layer.ln1_weight, layer.ln1_bias, eps)
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)


def wrong_15(x, layer, num_heads, mask, eps):
    """Runs attention and the feed-forward block in parallel on x (GPT-J style): LN2(x + MHA(x) + FFN(x))."""
    parallel = x + self_attention(x, layer, num_heads, mask)[0] + feed_forward(x, layer)
    return layer_norm(parallel, layer.ln2_weight, layer.ln2_bias, eps)


ANSWERS = [
    ("correct_1", correct_1, "correct", "straight-line, tuple unpacking"),
    ("correct_2", correct_2, "correct", "residual-then-normalise helper with lambdas"),
    ("correct_3", correct_3, "correct", "loop over two stages with getattr for ln{i}_*"),
    ("correct_4", correct_4, "correct", "keyword args, torch.add, [0] indexing"),
    ("wrong_1", wrong_1, "wrong", "pre-LN block"),
    ("wrong_2", wrong_2, "wrong", "ln1 and ln2 parameters swapped"),
    ("wrong_3", wrong_3, "wrong", "no residual around attention"),
    ("wrong_4", wrong_4, "wrong", "no residual around the feed-forward block"),
    ("wrong_5", wrong_5, "wrong", "second residual adds x instead of a"),
    ("wrong_6", wrong_6, "wrong", "feed-forward applied to x instead of a"),
    ("wrong_7", wrong_7, "wrong", "returns (y, weights) instead of y"),
    ("wrong_8", wrong_8, "wrong", "eps argument ignored (1e-5)"),
    ("wrong_9", wrong_9, "wrong", "final LayerNorm missing"),
    ("wrong_10", wrong_10, "wrong", "mask dropped (all-True mask)"),
    ("wrong_11", wrong_11, "wrong", "F.layer_norm instead of the picked layer_norm (rule of the statement)"),
    ("wrong_12", wrong_12, "wrong", "x += MHA(x) in place (mutates input)"),
    ("wrong_13", wrong_13, "wrong", "sandwich LN: normalised before and after each sub-block"),
    ("wrong_14", wrong_14, "wrong", "num_heads hard-coded to 12"),
    ("wrong_15", wrong_15, "wrong", "parallel attention and FFN on x, one LayerNorm (LN2)"),
]
