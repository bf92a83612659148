"""Reference solutions to the course's exercises, one function per exercise id.

The book shows each of these in a collapsed dropdown under its exercise, and a
test pastes them into solved copies of the notebooks to prove every check passes.
They are written to be read: plain numpy, one step per line.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SOLUTIONS"]


# ------------------------------------------------------------------ chapter 1
def stable_softmax(x):
    """Softmax over the last axis, stable for large logits."""
    z = x - x.max(axis=-1, keepdims=True)  # shift so the largest logit is 0
    e = np.exp(z)  # every entry in (0, 1]: no overflow
    return e / e.sum(axis=-1, keepdims=True)  # each row sums to 1


def attention(q, k, v):
    """Scaled dot-product attention: returns (output, weights)."""
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(d_k)  # (..., T, S)
    weights = stable_softmax(scores)  # (..., T, S), rows sum to 1
    output = weights @ v  # (..., T, d_v)
    return output, weights


def causal_mask(T, S):
    """Boolean (T, S) mask: True where key j <= query i (may attend)."""
    i = np.arange(T)[:, None]  # (T, 1) query positions
    j = np.arange(S)[None, :]  # (1, S) key positions
    return j <= i  # (T, S)


def one_query_output(q_i, k, v):
    """Attention output for one query q_i (d_k,), written as an explicit sum."""
    d_k = q_i.shape[0]
    scores = np.array([q_i @ k_j / np.sqrt(d_k) for k_j in k])  # (S,)
    alphas = np.exp(scores - scores.max())
    alphas = alphas / alphas.sum()  # (S,), sums to 1
    return sum(alpha_j * v_j for alpha_j, v_j in zip(alphas, v))  # (d_v,)


# ------------------------------------------------------------------ chapter 2
def nadaraya_watson_estimate(x_query, x_train, y_train, bandwidth):
    """Gaussian Nadaraya-Watson predictions for 1-D inputs: x_query (T,), x_train and y_train (S,)."""
    diff = x_query[:, None] - x_train[None, :]  # (T, S) every query minus every training point
    log_k = -(diff**2) / (2 * bandwidth**2)  # (T, S) log of the Gaussian kernel
    log_k = log_k - log_k.max(axis=-1, keepdims=True)  # largest entry per row is 0: no 0/0
    k = np.exp(log_k)  # (T, S) kernel values, up to a factor per row
    weights = k / k.sum(axis=-1, keepdims=True)  # (T, S) each row sums to 1
    return weights @ y_train  # (T,) weighted average of the targets


def gaussian_nw_attention(q, k, v, sigma):
    """Gaussian Nadaraya-Watson as softmax attention: scores q.k / sigma^2 plus a key bias."""
    scores = q @ k.T / sigma**2  # (T, S) dot products, scaled by 1/sigma^2
    bias = -(k**2).sum(axis=-1) / (2 * sigma**2)  # (S,) -|k_j|^2 / (2 sigma^2)
    scores = scores + bias[None, :]  # (T, S) = -|q - k|^2 / (2 sigma^2) + a constant per row
    scores = scores - scores.max(axis=-1, keepdims=True)  # stable softmax over the keys
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)  # (T, S)
    return weights @ v  # (T, d_v)


def leave_one_out_predictions(x, y, bandwidth):
    """Predict each y_i from the other points only (Gaussian kernel, 1-D x of shape (n,))."""
    diff = x[:, None] - x[None, :]  # (n, n)
    log_k = -(diff**2) / (2 * bandwidth**2)  # (n, n) log-kernel
    np.fill_diagonal(log_k, -np.inf)  # point i may not use its own target: weight exp(-inf) = 0
    log_k = log_k - log_k.max(axis=-1, keepdims=True)  # stable: row max becomes 0
    k = np.exp(log_k)  # (n, n), zero diagonal
    weights = k / k.sum(axis=-1, keepdims=True)  # (n, n) rows sum to 1 over j != i
    return weights @ y  # (n,)


def metric_kernel(q, k, W):
    """Kernel matrix exp(-|W (q_i - k_j)|^2 / 2) for q (T, d), k (S, d) and W (d, d)."""
    diff = q[:, None, :] - k[None, :, :]  # (T, S, d) every query minus every key
    projected = diff @ W.T  # (T, S, d) rows are W (q_i - k_j)
    sq_dist = (projected**2).sum(axis=-1)  # (T, S) |W (q_i - k_j)|^2
    return np.exp(-sq_dist / 2)  # (T, S) values in (0, 1]


# ------------------------------------------------------------------ chapter 3
def effective_rank(A):
    """Entropy effective rank exp(H(p)) with p_i = sigma_i / sum_j sigma_j (Roy & Vetterli 2007)."""
    s = np.linalg.svd(A, compute_uv=False)  # singular values, largest first
    p = s / s.sum()  # a probability distribution over the modes
    p = p[p > 0]  # 0 log 0 counts as 0
    entropy = -(p * np.log(p)).sum()
    return np.exp(entropy)


def best_rank_k(A, k):
    """The best rank-k approximation U_k diag(s_k) V_k^T (Eckart-Young)."""
    U, s, Vh = np.linalg.svd(A, full_matrices=False)  # (R, r), (r,), (r, C)
    U_k = U[:, :k]  # (R, k) the k leading left singular vectors
    s_k = s[:k]  # (k,) the k largest singular values
    Vh_k = Vh[:k, :]  # (k, C) the k leading right singular vectors
    return (U_k * s_k) @ Vh_k  # (R, C), rank k


def rank_vs_topk(A, k):
    """Rank-k vs top-k at equal budget, both errors relative to the centred matrix A - mean row."""
    A_bar = A - A.mean(axis=0, keepdims=True)  # (T, S): the mean row is the uniform, uninformative part
    s = np.linalg.svd(A_bar, compute_uv=False)  # (r,) decreasing
    rank_err = np.sqrt((s[k:] ** 2).sum()) / np.linalg.norm(A_bar)  # Eckart-Young tail, Frobenius
    keep = np.argsort(-A, axis=1, kind="stable")[:, :k]  # (T, k) exactly k per row (none for k = 0), ties by index
    sparse = np.zeros_like(A)
    np.put_along_axis(sparse, keep, np.take_along_axis(A, keep, axis=1), axis=1)  # (T, S)
    topk_err = np.linalg.norm(A - sparse) / np.linalg.norm(A_bar)
    return float(rank_err), float(topk_err), bool(rank_err < topk_err)  # strict: equal errors do not win


def linear_attention_associative(phi_q, phi_k, v):
    """Linear attention phi(Q) (phi(K)^T V) / (phi(Q) sum_s phi(K_s)), never forming T x S."""
    kv = phi_k.T @ v  # (r, d_v): sum_s phi(k_s) v_s^T, computed once
    z = phi_k.sum(axis=0)  # (r,): sum_s phi(k_s)
    numerator = phi_q @ kv  # (T, d_v)
    denominator = phi_q @ z  # (T,): phi(q_t) . sum_s phi(k_s)
    return numerator / denominator[:, None]  # (T, d_v), each query's weights sum to 1


def online_softmax_step(m, l, acc, scores, v_blk):
    """Fold one block of scores (T, B) and values (B, d_v) into the running max, sum and output."""
    m_new = np.maximum(m, scores.max(axis=1))  # (T,) running max
    shift = np.where(np.isneginf(m_new), 0.0, m_new)  # (T,) a row with only masked keys so far: 0, not -inf
    alpha = np.exp(m - shift)  # (T,) rescales what was computed against the old max
    p = np.exp(scores - shift[:, None])  # (T, B) this block's unnormalised weights
    l_new = alpha * l + p.sum(axis=1)  # (T,) running sum
    acc_new = alpha[:, None] * acc + p @ v_blk  # (T, d_v) running numerator
    return m_new, l_new, acc_new


# ------------------------------------------------------------------ chapter 4
def split_into_heads(x, h):
    """Split (B, T, h*d_k) into h heads of d_k contiguous features: (B, h, T, d_k)."""
    B, T, D = x.shape
    d_k = D // h
    x = x.reshape(B, T, h, d_k)  # the last axis cut into h blocks of d_k features
    return x.transpose(0, 2, 1, 3)  # (B, h, T, d_k): the head axis moves before the positions


def multi_head_forward(x, W_q, W_k, W_v, W_o, h):
    """Multi-head self-attention (no masks, no biases): returns (output (B, T, d), weights (B, h, T, T))."""
    B, T, D = x.shape
    d_k = D // h
    q = split_into_heads(x @ W_q, h)  # (B, h, T, d_k)
    k = split_into_heads(x @ W_k, h)  # (B, h, T, d_k)
    v = split_into_heads(x @ W_v, h)  # (B, h, T, d_k)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)  # (B, h, T, T): each head's own scale
    scores = scores - scores.max(axis=-1, keepdims=True)  # stable softmax over the keys
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)  # (B, h, T, T)
    heads = weights @ v  # (B, h, T, d_k)
    concat = heads.transpose(0, 2, 1, 3).reshape(B, T, D)  # (B, T, h*d_k): heads side by side
    return concat @ W_o, weights  # (B, T, d), (B, h, T, T)


def count_mha_parameters(d_model, num_heads, bias):
    """Parameters of multi-head attention with d_k = d_v = d_model / num_heads."""
    d_k = d_model // num_heads
    per_head = 3 * d_model * d_k  # W_Q^(i), W_K^(i), W_V^(i), each d_model x d_k
    per_head += d_k * d_model  # the head's d_k rows of W_O
    weights = num_heads * per_head  # = 4 d_model^2, whatever num_heads is
    biases = 4 * d_model if bias else 0  # b_q, b_k, b_v (h * d_k each) and b_o (d_model)
    return weights + biases


def ablate_head(heads, W_o, head):
    """Multi-head output (without b_o) with head `head` switched off.

    heads: (B, h, T, d_v), the heads' outputs; W_o: (h*d_v, d_out).
    """
    B, h, T, d_v = heads.shape
    kept = heads.copy()  # never modify the input
    kept[:, head] = 0.0  # the ablated head contributes nothing
    concat = kept.transpose(0, 2, 1, 3).reshape(B, T, h * d_v)  # (B, T, h*d_v)
    return concat @ W_o  # (B, T, d_out) = sum over the other heads of head_i W_o^(i)


def subspace_overlap(A, B):
    """Mean cos^2 of the principal angles between span(A) and span(B), its random baseline, and which is larger.

    A: (n, p), B: (n, q), both of full column rank.
    """
    n, p = A.shape
    q = B.shape[1]
    Q_A = np.linalg.qr(A)[0]  # (n, p): an orthonormal basis of span(A)
    Q_B = np.linalg.qr(B)[0]  # (n, q)
    cosines = np.linalg.svd(Q_A.T @ Q_B, compute_uv=False)  # (min(p, q),): cos of the principal angles
    overlap = float(np.mean(cosines**2))  # 1 = one inside the other, 0 = orthogonal
    chance = max(p, q) / n  # the mean overlap of random subspaces: E sum cos^2 = p q / n, over min(p, q) angles
    return overlap, chance, overlap > chance  # strict: an overlap equal to chance is not closer


# ------------------------------------------------------------------ chapter 5
def message_passing_step(q, k, v, mask):
    """One round of message passing: node i sums alpha_ij * v_j over its in-neighbours j."""
    T, d_k = q.shape
    out = np.zeros((T, v.shape[1]))  # (T, d_v); a node without messages keeps 0
    for i in range(T):
        nbrs = np.flatnonzero(mask[i])  # in-neighbours of node i: row i of the mask
        if nbrs.size == 0:
            continue  # no messages arrive
        e = k[nbrs] @ q[i] / np.sqrt(d_k)  # scores e_ij, (n_i,)
        alpha = np.exp(e - e.max())  # stable softmax over the neighbourhood
        alpha = alpha / alpha.sum()  # (n_i,), sums to 1
        out[i] = alpha @ v[nbrs]  # sum of messages alpha_ij v_j, (d_v,)
    return out


def banded_receptive_field(T, window, n_layers):
    """Boolean (T, T): output i depends on input j after n_layers banded layers."""
    i = np.arange(T)[:, None]  # (T, 1) receivers
    j = np.arange(T)[None, :]  # (1, T) senders
    one_layer = (np.abs(i - j) <= window).astype(int)  # A + I (the band includes i itself)
    reach = np.eye(T, dtype=int)  # after 0 layers each node knows only itself
    for _ in range(n_layers):
        reach = (one_layer @ reach > 0).astype(int)  # one more hop
    return reach > 0  # (T, T): the band |i - j| <= n_layers * window


def attention_rollout(weights):
    """Abnar & Zuidema's rollout of (L, T, T) attention maps, layer 1 first: (T, T)."""
    T = weights.shape[-1]
    rollout = np.eye(T)  # before any layer, each token is itself
    for A in weights:  # layer 1 first
        A_hat = 0.5 * A + 0.5 * np.eye(T)  # half of each token skips the layer
        A_hat = A_hat / A_hat.sum(axis=-1, keepdims=True)  # rows sum to 1
        rollout = A_hat @ rollout  # later layers multiply on the left
    return rollout


def effective_graph_overlap(A, B, perm, mass):
    """Mean Jaccard overlap of each word's effective key set in A and in its shuffle B (keys as words)."""
    where = np.argsort(perm)  # where[i]: the position of original word i in the shuffle

    def key_set(row):
        order = np.argsort(-row, kind="stable")  # heaviest key first; equal weights, lower index first
        share = np.cumsum(row[order]) / row.sum()  # weight held by the first 1, 2, ... keys
        k = np.searchsorted(share, mass - 1e-9) + 1  # the fewest keys that reach the mass (>=), at least one
        return set(order[:k].tolist())

    overlaps = []
    for i in range(len(A)):  # each query word, by its original index
        K_a = key_set(A[i])  # its keys in the original sentence
        K_b = {int(perm[p]) for p in key_set(B[where[i]])}  # its keys in the shuffle, as words
        overlaps.append(len(K_a & K_b) / len(K_a | K_b))  # Jaccard
    return float(np.mean(overlaps))


# ------------------------------------------------------------------ chapter 6
def dot_variance(q, k):
    """Empirical variance (ddof=0) of the paired dot products q_n . k_n; q and k are (N, d_k)."""
    s = (q * k).sum(axis=-1)  # (N,) sample n of q with sample n of k
    centred = s - s.mean()  # (N,) subtract the sample mean
    return (centred**2).mean()  # average squared deviation, like np.var(s)


def softmax_entropy(x, temperature):
    """Entropy in nats of softmax(x / temperature) over the last axis."""
    z = x / temperature  # a higher temperature flattens the logits
    z = z - z.max(axis=-1, keepdims=True)  # stable: the largest logit is 0
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))  # log-softmax, finite everywhere
    p = np.exp(log_p)  # the softmax weights
    return -(p * log_p).sum(axis=-1)  # H = -sum_j p_j log p_j; 0 * log p_j = 0 when p_j = 0


def softmax_jacobian(p):
    """Jacobian d p_i / d s_j = p_i (delta_ij - p_j) of the softmax, for p of shape (S,)."""
    diag = np.diag(p)  # (S, S) p_i on the diagonal
    outer = np.outer(p, p)  # (S, S) p_i p_j
    return diag - outer  # J = diag(p) - p p^T


def softmax_gradient(s, g, d_k):
    """Norms of the gradient at the softmax's input without and with 1/sqrt(d_k), and whether it vanishes.

    s: (N, S) raw dot products q . k; g: (N, S) the loss gradient with respect to the weights.
    """

    def input_gradient(x):
        z = x - x.max(axis=-1, keepdims=True)  # stable softmax over the keys
        p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)  # (N, S), rows sum to 1
        return p * (g - (p * g).sum(axis=-1, keepdims=True))  # dL/dx = p (g - <p, g>), (N, S)

    unscaled = float(np.linalg.norm(input_gradient(s)))  # the softmax sees x = s
    scaled = float(np.linalg.norm(input_gradient(s / np.sqrt(d_k))))  # it sees x = s / sqrt(d_k)
    return unscaled, scaled, unscaled < 0.1 * scaled  # "vanishes": below a tenth; False when both are 0


def saturated_gradient(p, g):
    """Share of saturated rows, the mean gradient at the softmax's input on them and on the others, and whether it vanishes.

    p: (N, S) attention rows (each sums to 1); g: (N, S) the loss gradient with respect to p.
    """
    dx = p * (g - (p * g).sum(axis=-1, keepdims=True))  # dL/dx = p (g - <p, g>), row by row   (N, S)
    norms = np.linalg.norm(dx, axis=-1)  # (N,): one gradient size per row
    saturated = p.max(axis=-1) > 0.99  # (N,): the largest weight above 0.99 (exactly 0.99 is not)
    on_saturated = float(norms[saturated].mean()) if saturated.any() else float("nan")
    on_others = float(norms[~saturated].mean()) if (~saturated).any() else float("nan")
    vanishes = on_saturated < 0.1 * on_others  # False when a group is empty (nan < x is False) or both are 0
    return float(saturated.mean()), on_saturated, on_others, bool(vanishes)


SOLUTIONS = {
    "stable-softmax": stable_softmax,
    "attention": attention,
    "causal-mask": causal_mask,
    "one-query": one_query_output,
    "message-passing-step": message_passing_step,
    "banded-receptive-field": banded_receptive_field,
    "attention-rollout": attention_rollout,
    "effective-graph-overlap": effective_graph_overlap,
    "nadaraya-watson": nadaraya_watson_estimate,
    "gaussian-as-softmax": gaussian_nw_attention,
    "leave-one-out": leave_one_out_predictions,
    "metric-kernel": metric_kernel,
    "dot-variance": dot_variance,
    "softmax-entropy": softmax_entropy,
    "softmax-jacobian": softmax_jacobian,
    "softmax-gradient": softmax_gradient,
    "saturated-gradient": saturated_gradient,
    "effective-rank": effective_rank,
    "best-rank-k": best_rank_k,
    "rank-vs-topk": rank_vs_topk,
    "linear-attention": linear_attention_associative,
    "online-softmax-step": online_softmax_step,
    "split-heads": split_into_heads,
    "multi-head-forward": multi_head_forward,
    "mha-param-count": count_mha_parameters,
    "head-ablation": ablate_head,
    "subspace-overlap": subspace_overlap,
}


# ------------------------------------------------------------------ chapter 8
# Chapter 8 works on torch tensors (MiniLM's weights); the steps build on each other, so a
# later solution calls the earlier ones by the names the notebook gives them.
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def self_attention(x, layer, num_heads, mask):
    """Multi-head self-attention with biases: (output (B, T, d), weights (B, h, T, T)); mask True = may attend."""
    B, T, d = x.shape
    d_k = d // num_heads
    q = (x @ layer.W_q + layer.b_q).reshape(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
    k = (x @ layer.W_k + layer.b_k).reshape(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
    v = (x @ layer.W_v + layer.b_v).reshape(B, T, num_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
    scores = q @ k.transpose(-2, -1) / d_k**0.5  # (B, h, T, T): each head's own scale
    scores = scores.masked_fill(~mask, float("-inf"))  # a masked key gets weight exactly 0
    weights = torch.softmax(scores, dim=-1)  # (B, h, T, T), each row sums to 1 over the keys
    heads = weights @ v  # (B, h, T, d_k)
    concat = heads.transpose(1, 2).reshape(B, T, d)  # (B, T, h*d_k): the heads side by side
    return concat @ layer.W_o + layer.b_o, weights  # (B, T, d), (B, h, T, T)


def layer_norm(x, gamma, beta, eps):
    """LayerNorm over the last axis, gamma (x - mean) / sqrt(var + eps) + beta, with the biased variance."""
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1): each token's mean over its d features
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (..., 1): divide by d, not d - 1
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta  # eps inside the square root


def feed_forward(x, layer):
    """BERT's feed-forward block, GELU(x W_1 + b_1) W_2 + b_2, with the exact (erf) GELU."""
    z = x @ layer.W_1 + layer.b_1  # (..., d_ff)
    hidden = 0.5 * z * (1 + torch.erf(z / 2**0.5))  # GELU(z) = z * Phi(z), Phi the normal CDF
    return hidden @ layer.W_2 + layer.b_2  # (..., d)


def post_ln_block(x, layer, num_heads, mask, eps):
    """One post-LN encoder layer: a = LN1(x + MHA(x)), then y = LN2(a + FFN(a))."""
    attended, _ = self_attention(x, layer, num_heads, mask)  # (B, T, d)
    a = layer_norm(x + attended, layer.ln1_weight, layer.ln1_bias, eps)  # add the residual, then normalise
    return layer_norm(a + feed_forward(a, layer), layer.ln2_weight, layer.ln2_bias, eps)  # (B, T, d)


def embeddings(weights, input_ids, token_type_ids):
    """LN(word + position + token type): (B, T) ids -> (B, T, d)."""
    T = input_ids.shape[1]
    x = (weights.word_embeddings[input_ids]  # (B, T, d): one row of the table per token
         + weights.position_embeddings[torch.arange(T)]  # (T, d): positions 0, ..., T-1, broadcast over the batch
         + weights.token_type_embeddings[token_type_ids])  # (B, T, d): the segment vector, row 0 for every token here
    return layer_norm(x, weights.ln_weight, weights.ln_bias, weights.layer_norm_eps)  # (B, T, d)



def encoder(weights, input_ids, attention_mask):
    """Every layer's hidden states, the embeddings first: (L+1, B, T, d)."""
    mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): the real keys, for every head and query
    x = embeddings(weights, input_ids, torch.zeros_like(input_ids))  # (B, T, d), one segment
    hidden = [x]
    for layer in weights.layers:
        x = post_ln_block(x, layer, weights.num_heads, mask, weights.layer_norm_eps)  # (B, T, d)
        hidden.append(x)
    return torch.stack(hidden)  # (L+1, B, T, d)


def sentence_embedding(hidden, attention_mask):
    """Mean of the real tokens' states, scaled to length 1: (B, T, d) -> (B, d)."""
    m = attention_mask[..., None].to(hidden.dtype)  # (B, T, 1): 1 for a real token, 0 for padding
    mean = (hidden * m).sum(dim=1) / m.sum(dim=1)  # (B, d): the average over the real tokens
    return mean / mean.norm(dim=-1, keepdim=True)  # (B, d), unit length


# layer_norm, feed_forward, embeddings and sentence_embedding are worked code in the lesson, not exercises;
# the solutions above call them by the names the lesson gives them.
SOLUTIONS.update({
    "bert-attention": self_attention,
    "post-ln-block": post_ln_block,
    "bert-encoder": encoder,
})


# ------------------------------------------------------------------ chapter 7
def hopfield_retrieval(X, queries, clean, beta):
    """Share of queries one memory step retrieves exactly: X (d, M), queries and clean (d, n)."""
    scores = X.T @ queries  # (M, n): each stored pattern's overlap with each query
    if beta is None:
        out = X @ scores  # (d, n): the outer-product memory X X^T queries
    else:
        z = beta * scores
        w = np.exp(z - z.max(axis=0, keepdims=True))
        w = w / w.sum(axis=0, keepdims=True)  # (M, n): softmax over the stored patterns
        out = X @ w  # (d, n): one step of softmax attention
    exact = (np.sign(out) == clean).all(axis=0)  # (n,): every sign right
    return float(exact.mean())


def window_mask(T, w):
    """(T, T) booleans, True where query t may read key s: 0 <= t - s < w (w=None: the causal mask)."""
    t = np.arange(T)
    behind = t[:, None] - t[None, :]  # (T, T): t - s, how far key s lies behind query t
    allowed = behind >= 0  # causal: s <= t
    if w is None:
        return allowed
    return allowed & (behind < w)  # the query itself and the w - 1 positions before it


SOLUTIONS.update({"hopfield-retrieval": hopfield_retrieval, "window-mask": window_mask})


# ------------------------------------------------------------------ chapter 9
def rms_norm(x, weight, eps):
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * weight, (..., d) -> (..., d)."""
    mean_square = (x * x).mean(dim=-1, keepdim=True)  # (..., 1): each token's own d features
    return x / torch.sqrt(mean_square + eps) * weight  # no mean subtracted, no shift


def rope(x, positions, base):
    """Rotate-half RoPE: feature i pairs with i + d/2 and turns by positions * base^(-2i/d)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (d/2,): one frequency per pair
    angles = positions.to(x.dtype)[:, None] * theta[None, :]  # (T, d/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, d): features i and i + d/2 share an angle
    x1, x2 = x[..., : d // 2], x[..., d // 2:]  # (..., T, d/2) each: the pairs' two coordinates
    rotated = torch.cat([-x2, x1], dim=-1)  # (..., T, d): each pair turned by 90 degrees
    return x * angles.cos() + rotated * angles.sin()  # (..., T, d)


def grouped_attention(q, k, v):
    """Causal attention, h query heads over h_kv key/value heads; queries are the last T of S positions."""
    B, h, T, d = q.shape
    h_kv, S = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // h_kv, dim=1)  # (B, h, S, d): head i reads key/value head i // (h / h_kv)
    v = v.repeat_interleave(h // h_kv, dim=1)  # (B, h, S, d)
    scores = q @ k.transpose(-2, -1) / d**0.5  # (B, h, T, S)
    allowed = torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)  # (T, S): query t sits at S - T + t
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (B, h, T, d), softmax over the keys


def attention_branch(xn, layer, config, positions):
    """The lesson's step 3 at any positions, as the page gives it: (B, T, d) -> (B, T, d)."""
    B, T, _ = xn.shape
    h, h_kv, d_head = config.n_heads, config.n_kv_heads, config.d_head
    q = (xn @ layer.W_q).view(B, T, h, d_head).transpose(1, 2)  # (B, h, T, d_head)
    k = (xn @ layer.W_k).view(B, T, h_kv, d_head).transpose(1, 2)  # (B, h_kv, T, d_head)
    v = (xn @ layer.W_v).view(B, T, h_kv, d_head).transpose(1, 2)  # (B, h_kv, T, d_head)
    q, k = rope(q, positions, config.rope_base), rope(k, positions, config.rope_base)  # v does not turn
    heads = grouped_attention(q, k, v)  # (B, h, T, d_head)
    return heads.transpose(1, 2).reshape(B, T, h * d_head) @ layer.W_o  # (B, T, d)


def decoder_block(x, layer, config, positions):
    """One pre-norm layer: a = x + Attn(RMSNorm1(x)), y = a + SwiGLU(RMSNorm2(a)); (B, T, d) -> (B, T, d)."""
    xn = rms_norm(x, layer.attn_norm, config.eps)  # (B, T, d): the norm feeds the branch only
    a = x + attention_branch(xn, layer, config, positions)  # (B, T, d): the residual carries x itself
    an = rms_norm(a, layer.mlp_norm, config.eps)  # (B, T, d)
    hidden = F.silu(an @ layer.W_gate) * (an @ layer.W_up)  # (B, T, d_ff): SiLU gates, up passes
    return a + hidden @ layer.W_down  # (B, T, d): no norm after the add


# ------------------------------------------------------------------ chapter 10 (chapter 9's parts, with a cache)
# The page's names for chapter 9's parts, and its two helpers: a layer before and after attention.
apply_rope, grouped_query_attention = rope, grouped_attention


def layer_qkv(x, layer, config):
    """One layer's queries, keys and values for the new tokens, before RoPE: x (B, T, d) -> q, k, v."""
    B, T, _ = x.shape
    xn = rms_norm(x, layer.attn_norm, config.eps)  # (B, T, d)
    q = (xn @ layer.W_q).view(B, T, config.n_heads, config.d_head).transpose(1, 2)  # (B, h, T, d_head)
    k = (xn @ layer.W_k).view(B, T, config.n_kv_heads, config.d_head).transpose(1, 2)  # (B, h_kv, T, d_head)
    v = (xn @ layer.W_v).view(B, T, config.n_kv_heads, config.d_head).transpose(1, 2)  # (B, h_kv, T, d_head)
    return q, k, v


def swiglu(x, layer):
    """SwiGLU, (silu(x W_gate) * (x W_up)) W_down: (..., d) -> (..., d)."""
    return (F.silu(x @ layer.W_gate) * (x @ layer.W_up)) @ layer.W_down  # (..., d)


def layer_rest(x, heads, layer, config):
    """The layer after attention: the heads' output (B, h, T, d_head) joins the stream x (B, T, d), then SwiGLU."""
    B, T, _ = x.shape
    a = x + heads.transpose(1, 2).reshape(B, T, -1) @ layer.W_o  # (B, T, d): heads side by side, W_o, residual
    return a + swiglu(rms_norm(a, layer.mlp_norm, config.eps), layer)  # (B, T, d)


def tempered_top_k_probs(logits, temperature, top_k):
    """Sampling's steps 1-3, as the page writes them: temperature, top-k, softmax; (B, V) -> (B, V)."""
    if temperature == 0:  # greedy: probability 1 on the largest logit (argmax picks the first of tied ones)
        return torch.zeros_like(logits).scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    z = logits / temperature  # (B, V)
    if 0 < top_k < z.shape[-1]:  # top_k = 0 or >= V keeps all
        kth = torch.topk(z, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        z = z.masked_fill(z < kth, float("-inf"))  # logits tied with the k-th stay
    return torch.softmax(z, dim=-1)  # (B, V), softmax over the vocabulary


def decoder_forward(weights, ids, cache):
    """Logits of the new tokens and the extended cache (L, 2, B, h_kv, S + T, d_head)."""
    cfg = weights.config
    B, T = ids.shape
    S = cache.shape[4]  # positions already in the cache
    x = weights.embed[ids]  # (B, T, d)
    new_cache = []
    for l, layer in enumerate(weights.layers):
        q, k, v = layer_qkv(x, layer, cfg)  # q (B, h, T, d_head); k, v (B, h_kv, T, d_head)
        positions = torch.arange(S, S + T)  # (T,): the new tokens come after the S cached ones
        q, k = apply_rope(q, positions, cfg.rope_base), apply_rope(k, positions, cfg.rope_base)
        k = torch.cat([cache[l, 0], k], dim=2)  # (B, h_kv, S + T, d_head): cached keys (rotated) first
        v = torch.cat([cache[l, 1], v], dim=2)  # (B, h_kv, S + T, d_head)
        heads = grouped_query_attention(q, k, v)  # (B, h, T, d_head): each new query reads the whole cache
        new_cache.append(torch.stack([k, v]))  # (2, B, h_kv, S + T, d_head)
        x = layer_rest(x, heads, layer, cfg)  # (B, T, d)
    logits = rms_norm(x, weights.final_norm, cfg.eps) @ weights.embed.T  # (B, T, V): the tied head
    return logits, torch.stack(new_cache)  # (L, 2, B, h_kv, S + T, d_head)


def next_token_probs(logits, temperature, top_k, top_p):
    """Steps 1-3 (the page's tempered_top_k_probs), then the top-p nucleus; (B, V) -> (B, V)."""
    p = tempered_top_k_probs(logits, temperature, top_k)  # (B, V): steps 1-3
    if top_p >= 1:
        return p  # top_p = 1 keeps all
    sorted_p = p.sort(dim=-1, descending=True).values  # (B, V), largest first
    mass_above = sorted_p.cumsum(dim=-1) - sorted_p  # (B, V): what the tokens ranked higher hold
    kept = mass_above < top_p  # the shortest prefix that reaches top_p, crossing token included
    kept[:, 0] = True  # top_p = 0: the most likely token
    crossing = sorted_p.masked_fill(~kept, float("inf")).amin(dim=-1, keepdim=True)  # (B, 1): smallest kept
    p = p.masked_fill(p < crossing, 0.0)  # tokens tied with the crossing one stay
    return p / p.sum(dim=-1, keepdim=True)  # step 5: renormalise


def next_token_loss(logits, ids):
    """Mean cross-entropy of predicting ids[:, t + 1] from logits[:, t]: a 0-d tensor, in nats."""
    V = logits.shape[-1]
    predictions = logits[:, :-1].reshape(-1, V)  # (B (T-1), V): every position but the last
    targets = ids[:, 1:].reshape(-1)  # (B (T-1),): the token that follows each one
    return torch.nn.functional.cross_entropy(predictions, targets)


SOLUTIONS.update({
    "rms-norm": rms_norm,
    "rope": rope,
    "grouped-attention": grouped_attention,
    "decoder-block": decoder_block,
    "decoder-forward": decoder_forward,
    "next-token-probs": next_token_probs,
    "next-token-loss": next_token_loss,
})
