"""Battery for ex-next-token-probs: my_next_token_probs(logits (B, V), temperature, top_k, top_p) -> (B, V)."""
import numpy as np
import torch
import torch.nn.functional as F


def _greedy(logits):
    out = torch.zeros_like(logits)
    out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)  # argmax returns the first maximum
    return out


def _top_k_mask(z, k):
    if not k or k >= z.shape[-1]:
        return z
    kth = z.topk(k, dim=-1).values[..., -1:]
    return z.masked_fill(z < kth, float("-inf"))


# ---------------------------------------------------------------- correct answers
def probs_threshold(logits, temperature, top_k, top_p):
    """Top-p as a probability threshold: the crossing token's probability; keep every p >= it."""
    if temperature == 0:
        return _greedy(logits)
    z = _top_k_mask(logits / temperature, top_k)
    p = torch.softmax(z, dim=-1)
    if top_p < 1:
        srt = p.sort(dim=-1, descending=True).values
        cross = (srt.cumsum(-1) < top_p).sum(-1, keepdim=True).clamp(max=p.shape[-1] - 1)  # first index reaching p
        thr = srt.gather(-1, cross)
        p = torch.where(p >= thr, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    return p


def probs_exclusive_cumsum(logits, temperature, top_k, top_p):
    """Sorted, keep while the mass *before* the token is < p, then add ties of the last kept token."""
    if temperature == 0:
        return _greedy(logits)
    z = logits / temperature
    if top_k > 0:
        k = min(top_k, z.shape[-1])
        kth = torch.sort(z, dim=-1, descending=True).values[:, k - 1:k]
        z = torch.where(z >= kth, z, torch.full_like(z, float("-inf")))
    p = F.softmax(z, dim=-1)
    if top_p >= 1:
        return p
    sp, idx = torch.sort(p, dim=-1, descending=True)
    before = torch.cat([torch.zeros_like(sp[:, :1]), sp.cumsum(-1)[:, :-1]], dim=-1)
    keep_sorted = before < top_p
    keep_sorted[:, 0] = True  # at least the most likely token (matters only for top_p = 0)
    last_kept = torch.where(keep_sorted, sp, torch.full_like(sp, float("inf"))).amin(-1, keepdim=True)
    keep = p >= last_kept
    p = p * keep
    return p / p.sum(dim=-1, keepdim=True)


def probs_row_loop(logits, temperature, top_k, top_p):
    """One row at a time, in plain python lists for the top-p walk."""
    B, V = logits.shape
    out = torch.zeros_like(logits)
    for b in range(B):
        row = logits[b]
        if temperature == 0:
            out[b, int(torch.argmax(row))] = 1
            continue
        z = row / temperature
        if top_k:
            kth = torch.sort(z, descending=True).values[min(top_k, V) - 1]
            z = z.masked_fill(z < kth, float("-inf"))
        p = torch.softmax(z, 0)
        if top_p < 1:
            order = torch.argsort(p, descending=True).tolist()
            total, thr = 0.0, None
            for j in order:
                total += float(p[j])
                if total >= top_p:
                    thr = p[j]
                    break
            if thr is not None:
                p = torch.where(p >= thr, p, torch.zeros_like(p))
            p = p / p.sum()
        out[b] = p
    return out


def probs_numpy_inside_torch_out(logits, temperature, top_k, top_p):
    """Works in numpy, converts back to a torch tensor of the logits' dtype."""
    z = logits.detach().cpu().numpy().astype(np.float64)
    B, V = z.shape
    if temperature == 0:
        out = np.zeros_like(z)
        out[np.arange(B), z.argmax(-1)] = 1.0
        return torch.from_numpy(out).to(logits.dtype)
    z = z / temperature
    if top_k:
        k = min(top_k, V)
        kth = -np.sort(-z, axis=-1)[:, k - 1:k]
        z = np.where(z >= kth, z, -np.inf)
    e = np.exp(z - z.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    if top_p < 1:
        srt = -np.sort(-p, axis=-1)
        csum = np.cumsum(srt, axis=-1)
        idx = np.minimum((csum < top_p).sum(-1), V - 1)
        thr = srt[np.arange(B), idx][:, None]
        p = np.where(p >= thr, p, 0.0)
        p = p / p.sum(-1, keepdims=True)
    return torch.from_numpy(p).to(logits.dtype)


def probs_scatter_back(logits, temperature, top_k, top_p):
    """Masks in sorted order (with the crossing token's ties) and scatters the mask back."""
    if temperature == 0:
        idx = logits.max(dim=-1, keepdim=True).indices
        first = torch.argmax((logits == logits.gather(-1, idx)).to(torch.int8), dim=-1, keepdim=True)
        return torch.zeros_like(logits).scatter(-1, first, 1.0)
    z = logits.clone() / temperature
    if top_k != 0:
        vals = torch.topk(z, min(top_k, z.size(-1)), dim=-1).values
        z[z < vals[:, [-1]]] = float("-inf")
    p = z.softmax(-1)
    if top_p != 1:
        sp, order = p.sort(-1, descending=True)
        cs = sp.cumsum(-1)
        reached = cs >= top_p
        n_first = reached.float().argmax(-1, keepdim=True)  # first index that reaches p
        n_first = torch.where(reached.any(-1, keepdim=True), n_first, torch.full_like(n_first, p.size(-1) - 1))
        keep_sorted = (torch.arange(p.size(-1)) <= n_first) | (sp == sp.gather(-1, n_first))
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        p = torch.where(keep, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    return p


# ---------------------------------------------------------------- wrong answers
def _correct_after(z, top_k, top_p):
    return probs_threshold(z, 1.0, top_k, top_p)


def probs_temperature_after_softmax(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    p = torch.softmax(_top_k_mask(logits, top_k), -1) / temperature  # temperature on the probabilities
    p = p / p.sum(-1, keepdim=True)
    return _correct_after(torch.log(p), 0, top_p)


def probs_multiplies_temperature(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    return _correct_after(logits * temperature, top_k, top_p)


def probs_top_p_one_too_few(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    p = torch.softmax(_top_k_mask(logits / temperature, top_k), -1)
    if top_p < 1:
        sp, order = p.sort(-1, descending=True)
        keep_sorted = sp.cumsum(-1) < top_p  # the crossing token dropped
        keep_sorted[:, 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        p = p * keep
        p = p / p.sum(-1, keepdim=True)
    return p


def probs_top_p_strictly_exceeds(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    p = torch.softmax(_top_k_mask(logits / temperature, top_k), -1)
    if top_p < 1:
        srt = p.sort(-1, descending=True).values
        cross = (srt.cumsum(-1) <= top_p).sum(-1, keepdim=True).clamp(max=p.shape[-1] - 1)  # must exceed p
        thr = srt.gather(-1, cross)
        p = torch.where(p >= thr, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    return p


def probs_top_k_drops_ties(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    z = logits / temperature
    if top_k:
        idx = z.topk(min(top_k, z.shape[-1]), -1).indices  # exactly k, ties with the k-th dropped
        keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
        z = z.masked_fill(~keep, float("-inf"))
    return _correct_after(z, 0, top_p)


def probs_top_k_keeps_k_plus_1(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    z = logits / temperature
    if top_k and top_k < z.shape[-1]:
        kth = z.sort(-1, descending=True).values[:, top_k:top_k + 1]  # 0-based index k: the (k+1)-th
        z = z.masked_fill(z < kth, float("-inf"))
    return _correct_after(z, 0, top_p)


def probs_top_p_ties_dropped(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    p = torch.softmax(_top_k_mask(logits / temperature, top_k), -1)
    if top_p < 1:
        sp, order = p.sort(dim=-1, descending=True, stable=True)
        before = torch.cat([torch.zeros_like(sp[:, :1]), sp.cumsum(-1)[:, :-1]], -1)
        keep = torch.zeros_like(sp, dtype=torch.bool).scatter(-1, order, before < top_p)  # no tie handling
        p = p * keep
        p = p / p.sum(-1, keepdim=True)
    return p


def probs_top_p_before_top_k(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    z = logits / temperature
    p = torch.softmax(z, -1)  # top-p measured on the full softmax, top-k applied afterwards
    if top_p < 1:
        srt = p.sort(-1, descending=True).values
        cross = (srt.cumsum(-1) < top_p).sum(-1, keepdim=True).clamp(max=p.shape[-1] - 1)
        p = torch.where(p >= srt.gather(-1, cross), p, torch.zeros_like(p))
    if top_k and top_k < z.shape[-1]:
        kth = z.topk(top_k, -1).values[:, -1:]
        p = torch.where(z >= kth, p, torch.zeros_like(p))
    return p / p.sum(-1, keepdim=True)


def probs_top_p_before_temperature(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    z = _top_k_mask(logits, top_k)
    p0 = torch.softmax(z, -1)  # nucleus chosen on the untempered distribution
    keep = probs_threshold(z, 1.0, 0, top_p) > 0
    p = torch.softmax(z / temperature, -1) * keep
    del p0
    return p / p.sum(-1, keepdim=True)


def probs_not_renormalised(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    p = torch.softmax(_top_k_mask(logits / temperature, top_k), -1)
    if top_p < 1:
        srt = p.sort(-1, descending=True).values
        cross = (srt.cumsum(-1) < top_p).sum(-1, keepdim=True).clamp(max=p.shape[-1] - 1)
        p = torch.where(p >= srt.gather(-1, cross), p, torch.zeros_like(p))  # not renormalised
    return p


def probs_greedy_splits_ties(logits, temperature, top_k, top_p):
    if temperature == 0:
        top = (logits == logits.max(-1, keepdim=True).values).to(logits.dtype)
        return top / top.sum(-1, keepdim=True)  # ties share the probability
    return probs_threshold(logits, temperature, top_k, top_p)


def probs_temperature_zero_divides(logits, temperature, top_k, top_p):
    z = logits / temperature if temperature else logits / 1e-10  # no exact greedy branch
    return _correct_after(z, top_k, top_p)


def probs_top_k_zero_keeps_nothing(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    z = logits / temperature
    vals = z.topk(top_k, -1).values if top_k > 0 else z[:, :0]
    kth = vals[:, -1:] if top_k > 0 else torch.full_like(z[:, :1], float("inf"))  # k = 0 treated literally
    z = z.masked_fill(z < kth, float("-inf"))
    return _correct_after(z, 0, top_p)


def probs_masked_with_zero(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    z = logits / temperature
    if top_k and top_k < z.shape[-1]:
        z = z.masked_fill(z < z.topk(top_k, -1).values[:, -1:], 0.0)  # 0 instead of -inf
    return _correct_after(z, 0, top_p)


def probs_float32(logits, temperature, top_k, top_p):
    return probs_threshold(logits.float(), temperature, top_k, top_p)


def probs_in_place(logits, temperature, top_k, top_p):
    if temperature == 0:
        return _greedy(logits)
    logits /= temperature  # changes the caller's logits
    return probs_threshold(logits, 1.0, top_k, top_p)


ANSWERS = [
    ("probs_threshold", probs_threshold, "correct", "top-p via the crossing token's probability as threshold"),
    ("probs_exclusive_cumsum", probs_exclusive_cumsum, "correct", "exclusive cumsum < p, plus ties of the last kept"),
    ("probs_row_loop", probs_row_loop, "correct", "row-by-row python walk over the sorted probabilities"),
    ("probs_numpy_inside_torch_out", probs_numpy_inside_torch_out, "correct", "numpy inside, torch tensor of logits' dtype out"),
    ("probs_scatter_back", probs_scatter_back, "correct", "sorted mask with crossing ties, scattered back"),
    ("probs_temperature_after_softmax", probs_temperature_after_softmax, "wrong",
     "temperature divides the probabilities after softmax (no effect once renormalised)"),
    ("probs_multiplies_temperature", probs_multiplies_temperature, "wrong", "multiplies the logits by the temperature"),
    ("probs_top_p_one_too_few", probs_top_p_one_too_few, "wrong", "top-p drops the token that crosses p"),
    ("probs_top_p_strictly_exceeds", probs_top_p_strictly_exceeds, "wrong",
     "top-p needs the total to exceed p (cumsum <= p): one token too many when a prefix sums exactly to p"),
    ("probs_top_k_drops_ties", probs_top_k_drops_ties, "wrong", "top-k keeps exactly k, dropping ties with the k-th"),
    ("probs_top_k_keeps_k_plus_1", probs_top_k_keeps_k_plus_1, "wrong", "top-k threshold at the (k+1)-th logit (off by one)"),
    ("probs_top_p_ties_dropped", probs_top_p_ties_dropped, "wrong", "top-p prefix by index: ties with the crossing token dropped"),
    ("probs_top_p_before_top_k", probs_top_p_before_top_k, "wrong", "top-p measured on the full softmax before top-k"),
    ("probs_top_p_before_temperature", probs_top_p_before_temperature, "wrong", "nucleus chosen on the untempered distribution"),
    ("probs_not_renormalised", probs_not_renormalised, "wrong", "no renormalisation after top-p (rows do not sum to 1)"),
    ("probs_greedy_splits_ties", probs_greedy_splits_ties, "wrong", "temperature 0 splits probability among tied maxima"),
    ("probs_temperature_zero_divides", probs_temperature_zero_divides, "wrong",
     "temperature 0 approximated by dividing by 1e-10 (ties shared, not exactly one-hot)"),
    ("probs_top_k_zero_keeps_nothing", probs_top_k_zero_keeps_nothing, "wrong", "top_k = 0 not treated as 'keep all'"),
    ("probs_masked_with_zero", probs_masked_with_zero, "wrong", "top-k masks logits with 0 instead of -inf"),
    ("probs_float32", probs_float32, "wrong", "returns float32 for float64 logits"),
    ("probs_in_place", probs_in_place, "wrong", "divides the caller's logits by the temperature in place"),
]
