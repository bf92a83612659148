"""Battery for ex-next-token-loss: my_next_token_loss(logits (B, T, V), ids (B, T)) -> 0-d tensor (nats)."""
import math

import numpy as np
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- correct answers
def loss_cross_entropy_flat(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))


def loss_log_softmax_gather(logits, ids):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    picked = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return -picked.mean()


def loss_logsumexp(logits, ids):
    z = logits[:, :-1]
    target = torch.take_along_dim(z, ids[:, 1:, None], dim=-1)[..., 0]
    return (torch.logsumexp(z, dim=-1) - target).mean()


def loss_loops(logits, ids):
    B, T, V = logits.shape
    total = torch.zeros((), dtype=logits.dtype)
    for b in range(B):
        for t in range(T - 1):
            total = total - torch.log_softmax(logits[b, t], dim=0)[ids[b, t + 1]]
    return total / (B * (T - 1))


def loss_class_axis_second(logits, ids):
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:])  # (B, V, T-1) against (B, T-1)


def loss_nll_sum_then_divide(logits, ids):
    B, T, V = logits.shape
    s = F.nll_loss(F.log_softmax(logits[:, :-1].reshape(-1, V), -1), ids[:, 1:].reshape(-1), reduction="sum")
    return s / (B * (T - 1))


# ---------------------------------------------------------------- wrong answers
def loss_no_shift(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))


def loss_shift_wrong_way(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, 1:].reshape(-1, V), ids[:, :-1].reshape(-1))


def loss_sum_not_mean(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")


def loss_divides_by_bt(logits, ids):
    B, T, V = logits.shape
    s = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")
    return s / (B * T)


def loss_divides_by_t_minus_1_only(logits, ids):
    B, T, V = logits.shape
    s = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")
    return s / (T - 1)  # the batch summed, not averaged


def loss_bits(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)) / math.log(2)


def loss_double_softmax(logits, ids):
    V = logits.shape[-1]
    p = torch.softmax(logits[:, :-1], -1)
    return F.cross_entropy(p.reshape(-1, V), ids[:, 1:].reshape(-1))  # probabilities fed as logits


def loss_returns_float(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)).item()


def loss_per_sequence(logits, ids):
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    return -logp.mean(dim=1)  # (B,), not a 0-d tensor


def loss_returns_numpy(logits, ids):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1)).detach().numpy()


def loss_shift_after_flatten(logits, ids):
    V = logits.shape[-1]
    flat_z, flat_ids = logits.reshape(-1, V), ids.reshape(-1)
    return F.cross_entropy(flat_z[:-1], flat_ids[1:])  # crosses sequence boundaries for B > 1


def loss_sign_flipped(logits, ids):
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])
    return logp.mean()  # mean log-probability, not its negative


def loss_log_of_softmax_unstable_float32(logits, ids):
    z = logits[:, :-1].float()
    p = torch.softmax(z, -1).gather(-1, ids[:, 1:, None].long())
    return -torch.log(p).mean()  # float32 for float64 logits


def loss_keeps_last_position(logits, ids):
    # rolls the targets instead of slicing: the last position is scored on the first token
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), torch.roll(ids, -1, dims=1).reshape(-1))


ANSWERS = [
    ("loss_cross_entropy_flat", loss_cross_entropy_flat, "correct", "F.cross_entropy on flattened shifted pairs"),
    ("loss_log_softmax_gather", loss_log_softmax_gather, "correct", "log_softmax and gather"),
    ("loss_logsumexp", loss_logsumexp, "correct", "logsumexp minus the target logit"),
    ("loss_loops", loss_loops, "correct", "loops over batch and positions, divides by B(T-1)"),
    ("loss_class_axis_second", loss_class_axis_second, "correct", "cross_entropy with the class axis moved to dim 1"),
    ("loss_nll_sum_then_divide", loss_nll_sum_then_divide, "correct", "nll_loss sum then / B(T-1)"),
    ("loss_no_shift", loss_no_shift, "wrong", "no shift: logits at t scored on token t"),
    ("loss_shift_wrong_way", loss_shift_wrong_way, "wrong", "shift the wrong way: logits at t+1 scored on token t"),
    ("loss_sum_not_mean", loss_sum_not_mean, "wrong", "sum instead of mean"),
    ("loss_divides_by_bt", loss_divides_by_bt, "wrong", "sum divided by B*T instead of B(T-1)"),
    ("loss_divides_by_t_minus_1_only", loss_divides_by_t_minus_1_only, "wrong", "summed over the batch, averaged over positions only"),
    ("loss_bits", loss_bits, "wrong", "bits (log2) instead of nats"),
    ("loss_double_softmax", loss_double_softmax, "wrong", "softmax probabilities fed to cross_entropy (softmax twice)"),
    ("loss_returns_float", loss_returns_float, "wrong", "returns a python float (.item()), not a 0-d tensor"),
    ("loss_per_sequence", loss_per_sequence, "wrong", "returns one loss per sequence (B,), not the overall mean"),
    ("loss_returns_numpy", loss_returns_numpy, "wrong", "returns a numpy value"),
    ("loss_shift_after_flatten", loss_shift_after_flatten, "wrong", "shifts after flattening: pairs cross sequence boundaries"),
    ("loss_sign_flipped", loss_sign_flipped, "wrong", "mean log-probability (sign flipped)"),
    ("loss_log_of_softmax_unstable_float32", loss_log_of_softmax_unstable_float32, "wrong",
     "computed and returned in float32 for float64 logits"),
    ("loss_keeps_last_position", loss_keeps_last_position, "wrong", "torch.roll: the last position is scored on the first token"),
]
