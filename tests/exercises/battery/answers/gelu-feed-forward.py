"""Blind battery for exercise `gelu-feed-forward` (my_feed_forward(x, layer))."""
import math

import torch


def _exact_gelu(z):
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


# --------------------------------------------------------------------------- correct answers
def correct_1(x, layer):
    """Style: the textbook formula z/2 (1 + erf(z / sqrt 2)) with @ and broadcast biases."""
    z = x @ layer.W_1 + layer.b_1
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0))) @ layer.W_2 + layer.b_2


def correct_2(x, layer):
    """Style: GELU as z * Phi(z), Phi written with erf(z * sqrt(1/2)); torch.matmul/torch.add calls."""
    z = torch.add(torch.matmul(x, layer.W_1), layer.b_1)
    phi = 0.5 * (1.0 + torch.erf(z * math.sqrt(0.5)))
    return torch.add(torch.matmul(z * phi, layer.W_2), layer.b_2)


def correct_3(x, layer):
    """Style: flatten leading axes to (N, d), torch.addmm for both affine maps, reshape back."""
    lead = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1])
    z = torch.addmm(layer.b_1, flat, layer.W_1)
    a = z * (torch.erf(z / 2 ** 0.5) + 1) / 2
    y = torch.addmm(layer.b_2, a, layer.W_2)
    return y.reshape(*lead, y.shape[-1])


def correct_4(x, layer):
    """Style: einsum with an ellipsis for the (..., d) input, helper GELU function."""
    z = torch.einsum("...i,ij->...j", x, layer.W_1) + layer.b_1
    return torch.einsum("...j,jk->...k", _exact_gelu(z), layer.W_2) + layer.b_2


def correct_5(x, layer):
    """Style: torch.nn.functional.linear with the transposed (d, d_ff) weights, erf GELU in between."""
    F = torch.nn.functional
    z = F.linear(x, layer.W_1.T, layer.b_1)
    return F.linear(z * 0.5 * (1 + torch.erf(z * (1 / math.sqrt(2)))), layer.W_2.T, layer.b_2)


# --------------------------------------------------------------------------- wrong answers
def wrong_1(x, layer):
    """Uses the tanh approximation of the GELU instead of the exact erf GELU."""
    z = x @ layer.W_1 + layer.b_1
    g = 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    return g @ layer.W_2 + layer.b_2


def wrong_2(x, layer):
    """Calls F.gelu, which the statement forbids (it asks for the GELU written with torch.erf)."""
    z = x @ layer.W_1 + layer.b_1
    return torch.nn.functional.gelu(z) @ layer.W_2 + layer.b_2


def wrong_3(x, layer):
    """Calls F.gelu(approximate='tanh'): forbidden and the approximate GELU."""
    z = x @ layer.W_1 + layer.b_1
    return torch.nn.functional.gelu(z, approximate="tanh") @ layer.W_2 + layer.b_2


def wrong_4(x, layer):
    """Forgets to divide by sqrt(2) inside the erf: z/2 (1 + erf(z))."""
    z = x @ layer.W_1 + layer.b_1
    return 0.5 * z * (1 + torch.erf(z)) @ layer.W_2 + layer.b_2


def wrong_5(x, layer):
    """Divides by 2 instead of sqrt(2) inside the erf."""
    z = x @ layer.W_1 + layer.b_1
    return 0.5 * z * (1 + torch.erf(z / 2)) @ layer.W_2 + layer.b_2


def wrong_6(x, layer):
    """Drops the factor 1/2: z (1 + erf(z / sqrt 2))."""
    z = x @ layer.W_1 + layer.b_1
    return z * (1 + torch.erf(z / math.sqrt(2))) @ layer.W_2 + layer.b_2


def wrong_7(x, layer):
    """Forgets the '1 +': z/2 * erf(z / sqrt 2)."""
    z = x @ layer.W_1 + layer.b_1
    return 0.5 * z * torch.erf(z / math.sqrt(2)) @ layer.W_2 + layer.b_2


def wrong_8(x, layer):
    """Applies the GELU a second time, to the output of the second linear map."""
    z = x @ layer.W_1 + layer.b_1
    return _exact_gelu(_exact_gelu(z) @ layer.W_2 + layer.b_2)


def wrong_9(x, layer):
    """Forgets the first bias b_1."""
    return _exact_gelu(x @ layer.W_1) @ layer.W_2 + layer.b_2


def wrong_10(x, layer):
    """Forgets the second bias b_2."""
    return _exact_gelu(x @ layer.W_1 + layer.b_1) @ layer.W_2


def wrong_11(x, layer):
    """Uses ReLU instead of the GELU."""
    return torch.relu(x @ layer.W_1 + layer.b_1) @ layer.W_2 + layer.b_2


def wrong_12(x, layer):
    """Uses the sigmoid approximation z * sigmoid(1.702 z) instead of the exact GELU."""
    z = x @ layer.W_1 + layer.b_1
    return z * torch.sigmoid(1.702 * z) @ layer.W_2 + layer.b_2


def wrong_13(x, layer):
    """Applies the GELU before adding b_1: GELU(x W_1) + b_1."""
    return (_exact_gelu(x @ layer.W_1) + layer.b_1) @ layer.W_2 + layer.b_2


def wrong_14(x, layer):
    """Flattens the input to (N, d) and returns (N, d) instead of restoring the leading (...) axes."""
    flat = x.reshape(-1, x.shape[-1])
    return _exact_gelu(flat @ layer.W_1 + layer.b_1) @ layer.W_2 + layer.b_2


def wrong_15(x, layer):
    """Builds sqrt(2) as a float32 tensor, so float64 inputs get a float32-rounded constant."""
    z = x @ layer.W_1 + layer.b_1
    root2 = torch.sqrt(torch.tensor(2.0))
    return 0.5 * z * (1 + torch.erf(z / root2)) @ layer.W_2 + layer.b_2


def wrong_16(x, layer):
    """Uses the nn.Linear convention x @ W.T, which fails (shape mismatch) for the stated (d, d_ff) weights."""
    z = x @ layer.W_1.T + layer.b_1
    return _exact_gelu(z) @ layer.W_2.T + layer.b_2


def wrong_17(x, layer):
    """Adds the residual x to the output (the block's residual belongs to the layer, not to the feed-forward block)."""
    return x + _exact_gelu(x @ layer.W_1 + layer.b_1) @ layer.W_2 + layer.b_2


def wrong_18(x, layer):
    """Uses the complementary error function erfc (Phi = erfc(z/sqrt 2)/2, sign mixed up), giving z (1 - Phi)."""
    z = x @ layer.W_1 + layer.b_1
    return 0.5 * z * torch.erfc(z / math.sqrt(2)) @ layer.W_2 + layer.b_2


ANSWERS = [
    ("correct_1", correct_1, "correct", "textbook formula with @"),
    ("correct_2", correct_2, "correct", "z * Phi(z) with torch.matmul/torch.add"),
    ("correct_3", correct_3, "correct", "flatten to (N, d), addmm, reshape back"),
    ("correct_4", correct_4, "correct", "einsum with ellipsis and a GELU helper"),
    ("correct_5", correct_5, "correct", "F.linear with transposed weights"),
    ("wrong_1", wrong_1, "wrong", "tanh-approximate GELU"),
    ("wrong_2", wrong_2, "wrong", "F.gelu used (forbidden by the statement)"),
    ("wrong_3", wrong_3, "wrong", "F.gelu(approximate='tanh') (forbidden and approximate)"),
    ("wrong_4", wrong_4, "wrong", "erf(z) without the 1/sqrt(2)"),
    ("wrong_5", wrong_5, "wrong", "erf(z/2) instead of erf(z/sqrt 2)"),
    ("wrong_6", wrong_6, "wrong", "factor 1/2 dropped"),
    ("wrong_7", wrong_7, "wrong", "'1 +' dropped"),
    ("wrong_8", wrong_8, "wrong", "GELU also applied after the second linear map"),
    ("wrong_9", wrong_9, "wrong", "b_1 forgotten"),
    ("wrong_10", wrong_10, "wrong", "b_2 forgotten"),
    ("wrong_11", wrong_11, "wrong", "ReLU instead of GELU"),
    ("wrong_12", wrong_12, "wrong", "sigmoid approximation z*sigmoid(1.702 z)"),
    ("wrong_13", wrong_13, "wrong", "GELU applied before adding b_1"),
    ("wrong_14", wrong_14, "wrong", "leading axes flattened and not restored"),
    ("wrong_15", wrong_15, "wrong", "sqrt(2) as a float32 tensor (precision loss in float64)"),
    ("wrong_16", wrong_16, "wrong", "x @ W.T (nn.Linear convention), shape error"),
    ("wrong_17", wrong_17, "wrong", "residual x added inside the feed-forward block"),
    ("wrong_18", wrong_18, "wrong", "erfc with the sign mixed up: z(1 - Phi(z))"),
]
