"""Blind battery for exercise `sentence-embedding` (my_sentence_embedding(hidden, attention_mask))."""
import torch


# --------------------------------------------------------------------------- correct answers
def correct_1(hidden, attention_mask):
    """Style: masked sum over T divided by the real-token count, then divided by the L2 norm."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    mean = (hidden * m).sum(dim=1) / m.sum(dim=1)
    return mean / mean.norm(dim=-1, keepdim=True)


def correct_2(hidden, attention_mask):
    """Style: einsum for the masked sum, F.normalize for the unit length."""
    m = attention_mask.to(hidden.dtype)
    mean = torch.einsum("btd,bt->bd", hidden, m) / m.sum(dim=1, keepdim=True)
    return torch.nn.functional.normalize(mean, p=2, dim=-1)


def correct_3(hidden, attention_mask):
    """Style: Python loop over sequences with boolean indexing of the real tokens, .mean(0)."""
    rows = []
    for h, m in zip(hidden, attention_mask):
        v = h[m.bool()].mean(dim=0)
        rows.append(v / torch.linalg.vector_norm(v))
    return torch.stack(rows)


def correct_4(hidden, attention_mask):
    """Style: batched matmul of the (B, 1, T) mask with hidden, count clamped (sentence-transformers recipe), rsqrt of the squared norm."""
    m = attention_mask.to(hidden.dtype).unsqueeze(1)  # (B, 1, T)
    mean = (m @ hidden).squeeze(1) / m.sum(dim=-1).clamp(min=1e-9)
    return mean * torch.rsqrt((mean * mean).sum(dim=-1, keepdim=True))


def correct_5(hidden, attention_mask):
    """Style: torch.where to zero the padding, sum only (the 1/count scale cancels in the normalisation)."""
    keep = attention_mask.bool().unsqueeze(-1)
    total = torch.where(keep, hidden, torch.zeros_like(hidden)).sum(dim=1)
    return total / torch.sqrt((total ** 2).sum(-1, keepdim=True))


# --------------------------------------------------------------------------- wrong answers
def wrong_1(hidden, attention_mask):
    """Averages over all T positions, padding included."""
    mean = hidden.mean(dim=1)
    return mean / mean.norm(dim=-1, keepdim=True)


def wrong_2(hidden, attention_mask):
    """Normalises each token to unit length before averaging, instead of normalising the mean."""
    unit = hidden / hidden.norm(dim=-1, keepdim=True)
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (unit * m).sum(1) / m.sum(1)


def wrong_3(hidden, attention_mask):
    """Forgets to scale the mean to unit length."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1)


def wrong_4(hidden, attention_mask):
    """Normalises over the batch axis (dim=0) instead of each vector's features."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / m.sum(1)
    return mean / mean.norm(dim=0, keepdim=True)


def wrong_5(hidden, attention_mask):
    """Scales to unit L1 norm (sum of absolute values) instead of unit L2 length."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / m.sum(1)
    return mean / mean.abs().sum(dim=-1, keepdim=True)


def wrong_6(hidden, attention_mask):
    """Uses the first ([CLS]) token's state instead of the mean over the real tokens."""
    cls = hidden[:, 0]
    return cls / cls.norm(dim=-1, keepdim=True)


def wrong_7(hidden, attention_mask):
    """Max-pools over the real tokens instead of averaging."""
    masked = hidden.masked_fill(~attention_mask.bool().unsqueeze(-1), float("-inf"))
    v = masked.max(dim=1).values
    return v / v.norm(dim=-1, keepdim=True)


def wrong_8(hidden, attention_mask):
    """Averages the padding positions instead of the real ones (mask read backwards)."""
    m = (1 - attention_mask).unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / m.sum(1)
    return mean / mean.norm(dim=-1, keepdim=True)


def wrong_9(hidden, attention_mask):
    """Zeroes the padding in place (hidden *= mask), modifying the caller's hidden states."""
    hidden *= attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = hidden.sum(1) / attention_mask.sum(1, keepdim=True)
    return mean / mean.norm(dim=-1, keepdim=True)


def wrong_10(hidden, attention_mask):
    """Keeps the pooled axis (keepdim=True), returning (B, 1, d) instead of (B, d)."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
    return mean / mean.norm(dim=-1, keepdim=True)


def wrong_11(hidden, attention_mask):
    """Squeezes the result, so a batch of one sentence comes back as (d,) instead of (1, d)."""
    return correct_1(hidden, attention_mask).squeeze()


def wrong_12(hidden, attention_mask):
    """Divides by one global norm over the whole batch (hidden.norm()) instead of each vector's own norm."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / m.sum(1)
    return mean / mean.norm()


def wrong_13(hidden, attention_mask):
    """Divides by the squared norm instead of the norm."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / m.sum(1)
    return mean / (mean * mean).sum(-1, keepdim=True)


def wrong_14(hidden, attention_mask):
    """Takes the state of the last real token (position count - 1) instead of the mean."""
    last = attention_mask.sum(1).long() - 1
    v = hidden[torch.arange(hidden.shape[0]), last]
    return v / v.norm(dim=-1, keepdim=True)


def wrong_15(hidden, attention_mask):
    """Averages over the feature axis instead of the token axis, returning (B, T)."""
    m = attention_mask.to(hidden.dtype)
    v = hidden.mean(dim=-1) * m
    return v / v.norm(dim=-1, keepdim=True)


def wrong_16(hidden, attention_mask):
    """Casts to float32, so float64 inputs come back as float32."""
    return correct_1(hidden.float(), attention_mask)


ANSWERS = [
    ("correct_1", correct_1, "correct", "masked sum / count, divide by norm"),
    ("correct_2", correct_2, "correct", "einsum + F.normalize"),
    ("correct_3", correct_3, "correct", "loop with boolean indexing, .mean(0)"),
    ("correct_4", correct_4, "correct", "bmm of mask with hidden, clamped count, rsqrt"),
    ("correct_5", correct_5, "correct", "torch.where + sum only (scale cancels)"),
    ("wrong_1", wrong_1, "wrong", "padding included in the mean"),
    ("wrong_2", wrong_2, "wrong", "tokens normalised before averaging"),
    ("wrong_3", wrong_3, "wrong", "no unit-length normalisation"),
    ("wrong_4", wrong_4, "wrong", "normalised over the batch axis"),
    ("wrong_5", wrong_5, "wrong", "L1 instead of L2 normalisation"),
    ("wrong_6", wrong_6, "wrong", "[CLS] token instead of the mean"),
    ("wrong_7", wrong_7, "wrong", "max pooling"),
    ("wrong_8", wrong_8, "wrong", "mask read backwards (mean of padding)"),
    ("wrong_9", wrong_9, "wrong", "padding zeroed in place on the input"),
    ("wrong_10", wrong_10, "wrong", "keepdim: (B, 1, d)"),
    ("wrong_11", wrong_11, "wrong", "squeezed: (d,) for B = 1"),
    ("wrong_12", wrong_12, "wrong", "one global norm over the batch"),
    ("wrong_13", wrong_13, "wrong", "divided by the squared norm"),
    ("wrong_14", wrong_14, "wrong", "last real token instead of the mean"),
    ("wrong_15", wrong_15, "wrong", "mean over features, shape (B, T)"),
    ("wrong_16", wrong_16, "wrong", "cast to float32"),
]
