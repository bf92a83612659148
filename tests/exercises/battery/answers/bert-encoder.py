"""Blind battery for exercise `bert-encoder` (my_encoder(weights, input_ids, attention_mask)).

As the statement asks, these functions use the names `embeddings` and `post_ln_block` picked by the
exercise cell (ch.yours_or_ours). They are NOT defined here: the harness must inject them into this
module's globals before calling (e.g. `mod.embeddings = ch.embeddings; mod.post_ln_block = ch.block`).
The head count and the LayerNorm eps are read from `weights.num_heads` and `weights.layer_norm_eps`
(attributes seen with dir(weights) in the notebook).
"""
import torch


def _key_mask(attention_mask):
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T), True = a real key


# --------------------------------------------------------------------------- correct answers
def correct_1(weights, input_ids, attention_mask):
    """Style: plain loop collecting states in a list, then torch.stack on a new leading axis."""
    mask = _key_mask(attention_mask)
    h = embeddings(weights, input_ids, torch.zeros_like(input_ids))
    states = [h]
    for layer in weights.layers:
        h = post_ln_block(h, layer, weights.num_heads, mask, weights.layer_norm_eps)
        states.append(h)
    return torch.stack(states)


def correct_2(weights, input_ids, attention_mask):
    """Style: preallocated (L+1, B, T, d) output filled layer by layer; mask from != 0 and view."""
    B, T = input_ids.shape
    mask = (attention_mask != 0).view(B, 1, 1, T)
    h0 = embeddings(weights, input_ids, input_ids.new_zeros(B, T))
    out = h0.new_empty((len(weights.layers) + 1,) + tuple(h0.shape))
    out[0] = h0
    for i, layer in enumerate(weights.layers, start=1):
        out[i] = post_ln_block(out[i - 1], layer, weights.num_heads, mask, weights.layer_norm_eps)
    return out


def correct_3(weights, input_ids, attention_mask):
    """Style: a list comprehension threading the state with the walrus operator; mask via unsqueeze twice."""
    mask = attention_mask.to(torch.bool).unsqueeze(1).unsqueeze(2)
    h = embeddings(weights, input_ids, torch.zeros_like(input_ids))
    states = [h] + [h := post_ln_block(h, layer, weights.num_heads, mask, weights.layer_norm_eps)
                    for layer in weights.layers]
    return torch.stack(states, dim=0)


def correct_4(weights, input_ids, attention_mask):
    """Style: while loop over layer indices growing a tuple, then torch.cat of unsqueezed states; mask from > 0."""
    mask = (attention_mask > 0)[:, None, None, :]
    states = (embeddings(weights, input_ids, torch.zeros(input_ids.shape, dtype=torch.long)),)
    i = 0
    while i < len(weights.layers):
        states += (post_ln_block(states[-1], weights.layers[i], weights.num_heads, mask, weights.layer_norm_eps),)
        i += 1
    return torch.cat([s.unsqueeze(0) for s in states], dim=0)


def correct_5(weights, input_ids, attention_mask):
    """Style: recursion over the layer list."""
    mask = _key_mask(attention_mask)

    def run(h, layers):
        if not layers:
            return [h]
        return [h] + run(post_ln_block(h, layers[0], weights.num_heads, mask, weights.layer_norm_eps), layers[1:])

    return torch.stack(run(embeddings(weights, input_ids, torch.zeros_like(input_ids)), list(weights.layers)))


# --------------------------------------------------------------------------- wrong answers
def _encode(weights, input_ids, mask, *, types=None, heads=None, eps=None, same_layer=False, chain=True):
    h0 = embeddings(weights, input_ids, torch.zeros_like(input_ids) if types is None else types)
    h, states = h0, [h0]
    for layer in weights.layers:
        layer = weights.layers[0] if same_layer else layer
        h = post_ln_block(h if chain else h0, layer, weights.num_heads if heads is None else heads, mask,
                          weights.layer_norm_eps if eps is None else eps)
        states.append(h)
    return states


def wrong_1(weights, input_ids, attention_mask):
    """Leaves out the embeddings: returns only the L layer outputs, shape (L, B, T, d)."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask))[1:])


def wrong_2(weights, input_ids, attention_mask):
    """Returns only the last layer's hidden states (B, T, d), not every layer's."""
    return _encode(weights, input_ids, _key_mask(attention_mask))[-1]


def wrong_3(weights, input_ids, attention_mask):
    """Stacks on dim=1, giving (B, L+1, T, d) instead of (L+1, B, T, d)."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask)), dim=1)


def wrong_4(weights, input_ids, attention_mask):
    """Returns a Python list of L+1 tensors instead of one stacked tensor."""
    return _encode(weights, input_ids, _key_mask(attention_mask))


def wrong_5(weights, input_ids, attention_mask):
    """Ignores attention_mask (all-True mask), so real tokens attend to padding."""
    B, T = input_ids.shape
    return torch.stack(_encode(weights, input_ids, torch.ones(B, 1, 1, T, dtype=torch.bool)))


def wrong_6(weights, input_ids, attention_mask):
    """Passes the (B, T) mask without reshaping to (B, 1, 1, T), so it broadcasts over (queries, keys) instead of (batch, keys)."""
    return torch.stack(_encode(weights, input_ids, attention_mask.bool()))


def wrong_7(weights, input_ids, attention_mask):
    """Passes the 0/1 integer mask instead of a boolean one."""
    return torch.stack(_encode(weights, input_ids, attention_mask[:, None, None, :]))


def wrong_8(weights, input_ids, attention_mask):
    """Masks queries as well as keys ((B, 1, T, T) outer product), so padded rows are all -inf and give NaN."""
    m = attention_mask.bool()
    return torch.stack(_encode(weights, input_ids, (m[:, :, None] & m[:, None, :])[:, None]))


def wrong_9(weights, input_ids, attention_mask):
    """Reuses layers[0]'s weights for every layer."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask), same_layer=True))


def wrong_10(weights, input_ids, attention_mask):
    """Feeds the embeddings to every layer instead of chaining each layer's output into the next."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask), chain=False))


def wrong_11(weights, input_ids, attention_mask):
    """Hard-codes MiniLM's 12 heads instead of weights.num_heads."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask), heads=12))


def wrong_12(weights, input_ids, attention_mask):
    """Hard-codes eps = 1e-5 instead of weights.layer_norm_eps in the blocks."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask), eps=1e-5))


def wrong_13(weights, input_ids, attention_mask):
    """Gives every token type 1 (ones_like) instead of type 0."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask), types=torch.ones_like(input_ids)))


def wrong_14(weights, input_ids, attention_mask):
    """Inverts the mask (attention_mask == 0), so tokens attend to the padding only."""
    return torch.stack(_encode(weights, input_ids, (attention_mask == 0)[:, None, None, :]))


def wrong_15(weights, input_ids, attention_mask):
    """Casts the states to float32, so the float64 BERTs come back in float32."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask))).float()


def wrong_16(weights, input_ids, attention_mask):
    """Stacks the states in reverse order (last layer first)."""
    return torch.stack(_encode(weights, input_ids, _key_mask(attention_mask))[::-1])


def wrong_17(weights, input_ids, attention_mask):
    """Zeroes the padded positions' hidden states after every layer (padding rows must be left as computed)."""
    states = _encode(weights, input_ids, _key_mask(attention_mask))
    keep = attention_mask[..., None].to(states[0].dtype)
    return torch.stack([s * keep for s in states])


def wrong_18(weights, input_ids, attention_mask):
    """Bypasses the picked `embeddings` with an inline sum that forgets the token-type vector."""
    T = input_ids.shape[1]
    h = weights.word_embeddings[input_ids] + weights.position_embeddings[:T]
    d = h.shape[-1]
    h = torch.nn.functional.layer_norm(h, (d,), weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)
    mask, states = _key_mask(attention_mask), [h]
    for layer in weights.layers:
        h = post_ln_block(h, layer, weights.num_heads, mask, weights.layer_norm_eps)
        states.append(h)
    return torch.stack(states)


ANSWERS = [
    ("correct_1", correct_1, "correct", "loop + list + torch.stack"),
    ("correct_2", correct_2, "correct", "preallocated output filled in place, mask via != 0 and view"),
    ("correct_3", correct_3, "correct", "list comprehension with walrus-threaded state"),
    ("correct_4", correct_4, "correct", "while loop growing a tuple, torch.cat"),
    ("correct_5", correct_5, "correct", "recursion"),
    ("wrong_1", wrong_1, "wrong", "embeddings left out (L, B, T, d)"),
    ("wrong_2", wrong_2, "wrong", "only the last layer returned"),
    ("wrong_3", wrong_3, "wrong", "stacked on dim=1 (B, L+1, T, d)"),
    ("wrong_4", wrong_4, "wrong", "returns a list, not a tensor"),
    ("wrong_5", wrong_5, "wrong", "padding mask ignored"),
    ("wrong_6", wrong_6, "wrong", "(B, T) mask passed without reshaping to (B, 1, 1, T)"),
    ("wrong_7", wrong_7, "wrong", "integer 0/1 mask instead of boolean"),
    ("wrong_8", wrong_8, "wrong", "query-and-key mask: NaN on padded rows, spreading"),
    ("wrong_9", wrong_9, "wrong", "layers[0] reused for every layer"),
    ("wrong_10", wrong_10, "wrong", "every layer fed the embeddings (no chaining)"),
    ("wrong_11", wrong_11, "wrong", "num_heads hard-coded to 12"),
    ("wrong_12", wrong_12, "wrong", "eps hard-coded to 1e-5"),
    ("wrong_13", wrong_13, "wrong", "token types all 1"),
    ("wrong_14", wrong_14, "wrong", "mask inverted"),
    ("wrong_15", wrong_15, "wrong", "cast to float32"),
    ("wrong_16", wrong_16, "wrong", "states in reverse order"),
    ("wrong_17", wrong_17, "wrong", "padded positions zeroed in the output"),
    ("wrong_18", wrong_18, "wrong", "bypasses `embeddings` with an inline version missing the token-type vector"),
]
