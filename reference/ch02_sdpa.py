"""Chapter 02 reference: scaled dot-product attention, forward and backward,
exactly as torch.nn.functional.scaled_dot_product_attention computes it.

Case tensors (see chapters/02_sdpa/README.md):
    sdpa            query (..., L, E), key (..., S, E), value (..., S, Ev),
                    attn_mask (optional: bool, True = may attend, or float, added;
                    broadcastable to (..., L, S)),
                    dropout_mask (bool (..., L, S), True = kept; with dropout > 0)
                    -> output (..., L, Ev), attn_weights (..., L, S) (before dropout)
    sdpa_backward   the same plus grad_output (..., L, Ev)
                    -> output, attn_weights, grad_query, grad_key, grad_value
Options (metadata): is_causal "true"/"false"; scale (absent: 1/sqrt(E));
dropout (F.scaled_dot_product_attention's dropout_p; absent: 0).

With dropout the output comes from torch's own math kernel of
F.scaled_dot_product_attention, aten._scaled_dot_product_attention_math,
which takes the dropout mask as an argument (PyTorch's tests use it the same
way): out = (softmax(scores) * mask / (1 - p)) @ value.

The expected output and gradients come from F.scaled_dot_product_attention and
autograd in float64. F.scaled_dot_product_attention does not return its
weights, so attn_weights is computed here by the textbook formula and checked
against the output torch gave.
"""

import math
import random
import warnings

import torch
import torch.nn.functional as F

from reference.common import Case, case_meta, generator, randn

CHAPTER = "02_sdpa"
PROGRAM = "build/02_sdpa"

# Tolerances. A float32 score q.k * scale carries a rounding error of about
# eps * |score| (eps = 6e-8), and the softmax turns an absolute error in a
# score into a relative error of the same size in its weight; so the error of
# every output grows with the largest |score| of the case. Each case therefore
# states atol = rtol = BASE * growth, growth = max(1, max|q.k * scale| / 4).
#
# Measured with the C program on 5 000 random cases per op (random_case below:
# ranks 2-5, L, S <= 40, E, Ev <= 64, every mask kind, scales up to 1.5), as
# the smallest atol = rtol that passes, divided by growth: worst 1.04e-6 for
# the forward outputs (output; attn_weights 2.7e-7), 4.33e-6 for the gradients
# (grad_query; grad_key 2.78e-6, grad_value 1.64e-6). BASE leaves a margin of
# about 2.4x over that; a further 3 000 fresh cases per op (make verify
# CASES=3000) all passed. The goldens, being smaller (E <= 32), sit 5x or
# more inside it.
SDPA_TOL = 2.5e-6
SDPA_BACKWARD_TOL = 1e-5


def tolerance(q, k, scale, backward, dropout_p=0.0):
    """Dropout scales the kept weights, and so their errors, by 1 / (1 - p)."""
    growth = max(1.0, (q @ k.transpose(-2, -1) * scale).abs().max().item() / 4) / (1 - dropout_p)
    tol = float(f"{(SDPA_BACKWARD_TOL if backward else SDPA_TOL) * growth:.2g}")
    return dict(atol=tol, rtol=tol)


def f32(t):
    """The float32 values C will see, held in float64."""
    return t.float().double()


def attention_weights(q, k, attn_mask, is_causal, scale):
    """softmax(q k^T * scale + mask) in float64, zeros for fully-masked rows."""
    scores = (q @ k.transpose(-2, -1)) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, -math.inf)
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(weights, nan=0.0)   # a row of all -inf: 0/0 -> 0


def sdpa_with_dropout_mask(q, k, v, attn_mask, is_causal, scale, dropout_p, dropout_mask):
    """F.scaled_dot_product_attention's math kernel with a given dropout mask.
    The kernel adds attn_mask as it is, so a boolean mask becomes the additive
    one first (F.scaled_dot_product_attention does that before calling it)."""
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype).masked_fill(~attn_mask,
                                                                             -math.inf)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Dropout mask should only be used for testing")
        out, _ = torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, attn_mask, dropout_p, is_causal, dropout_mask=dropout_mask, scale=scale)
    return out


def sdpa_case(name, seed, q, k, v, attn_mask=None, is_causal=False, scale=None,
              grad_output=None, dropout_p=0.0, dropout_mask=None):
    """One case from float64 inputs already rounded to float32 values. With
    grad_output it is an sdpa_backward case; with dropout_p > 0 dropout_mask
    (True = kept) drops attention weights."""
    backward = grad_output is not None
    q, k, v = (t.detach().clone().requires_grad_(backward) for t in (q, k, v))
    if dropout_p > 0:
        out = sdpa_with_dropout_mask(q, k, v, attn_mask, is_causal, scale, dropout_p,
                                     dropout_mask)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                             scale=scale)
    used_scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    weights = attention_weights(q.detach(), k.detach(), attn_mask, is_causal, used_scale)
    kept = weights * dropout_mask / (1 - dropout_p) if dropout_p > 0 else weights
    gap = (kept @ v.detach() - out.detach()).abs().max().item()
    assert gap < 1e-10, f"{name}: weights @ value differs from torch's output by {gap}"

    tensors = {"query": q, "key": k, "value": v}
    if attn_mask is not None:
        tensors["attn_mask"] = attn_mask
    if dropout_p > 0:
        tensors["dropout_mask"] = dropout_mask
    outputs = ["output", "attn_weights"]
    if backward:
        grads = torch.autograd.grad(out, (q, k, v), grad_output)
        tensors["grad_output"] = grad_output
        tensors.update(grad_query=grads[0], grad_key=grads[1], grad_value=grads[2])
        outputs += ["grad_query", "grad_key", "grad_value"]
    tensors.update(output=out, attn_weights=weights)
    options = {"is_causal": is_causal}
    if scale is not None:
        options["scale"] = float(scale)
    if dropout_p > 0:
        options["dropout"] = float(dropout_p)
    op = "sdpa_backward" if backward else "sdpa"
    tol = tolerance(q.detach(), k.detach(), used_scale, backward, dropout_p)
    return Case(name, tensors, case_meta(op, seed, outputs=outputs, **options, **tol))


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def qkv(g, batch, L, S, E, Ev, spread=1.0):
    """Random query, key, value of the given batch shape, float32 values."""
    q = f32(randn(g, *batch, L, E) * spread)
    k = f32(randn(g, *batch, S, E) * spread)
    v = f32(randn(g, *batch, S, Ev))
    return q, k, v


def bool_mask(g, shape, keep=0.7):
    """True (may attend) with probability `keep`."""
    return torch.rand(*shape, generator=g, dtype=torch.float64) < keep


def float_mask(g, shape, p_inf=0.0):
    """Additive float mask: normal values, and -inf with probability p_inf."""
    m = randn(g, *shape) * 2.0
    if p_inf > 0:
        m = m.masked_fill(torch.rand(*shape, generator=g, dtype=torch.float64) < p_inf,
                          -math.inf)
    return f32(m)


def make(name, seed, batch, L, S, E, Ev, mask=None, mask_shape=None, is_causal=False,
         scale=None, backward=False, spread=1.0, edit_mask=None, dropout=0.0):
    """Draws one case. mask: None, "bool" or "float"; mask_shape defaults to the
    full attention shape; edit_mask(mask) may change the drawn mask; dropout:
    p of a dropout mask on the attention weights, drawn last."""
    g = generator(seed)
    q, k, v = qkv(g, batch, L, S, E, Ev, spread)
    attn_mask = None
    if mask is not None:
        shape = mask_shape if mask_shape is not None else (*batch, L, S)
        attn_mask = bool_mask(g, shape) if mask == "bool" else float_mask(g, shape, p_inf=0.2)
        if edit_mask is not None:
            attn_mask = edit_mask(attn_mask)
    grad_output = f32(randn(g, *batch, L, Ev)) if backward else None
    keep = bool_mask(g, (*batch, L, S), keep=1 - dropout) if dropout > 0 else None
    return sdpa_case(name, seed, q, k, v, attn_mask, is_causal, scale, grad_output, dropout, keep)


def seed_example(name, backward=False):
    """The seed notebook's worked example, inputs as it printed them."""
    q = torch.tensor([[0.3367, 0.1288], [0.2345, 0.2303], [-1.1229, -0.1863]])
    k = torch.tensor([[2.2082, -0.6380], [0.4617, 0.2674], [0.5349, 0.8094]])
    v = torch.tensor([[1.1103, -1.6898], [-0.9890, 0.9580], [1.3221, 0.8172]])
    grad_output = f32(torch.ones(3, 2, dtype=torch.float64)) if backward else None
    return sdpa_case(name, 0, q.double(), k.double(), v.double(), grad_output=grad_output)


def mask_rows(rows, value):
    """An edit_mask that sets the given query rows of the mask to `value`."""
    def edit(m):
        m = m.clone()
        m[..., rows, :] = value
        return m
    return edit


# --------------------------------------------------------------------------
# Golden cases
# --------------------------------------------------------------------------

# name: keyword arguments of make(); every one is written forward and, when in
# BACKWARD, as name_backward too.
GOLDEN = {
    "square_unmasked": dict(batch=(2, 3), L=6, S=6, E=8, Ev=8),
    "keys_outnumber_queries": dict(batch=(2, 2), L=5, S=9, E=8, Ev=8),
    "value_width_differs": dict(batch=(2, 2), L=6, S=7, E=6, Ev=11),
    "bool_mask": dict(batch=(2, 2), L=6, S=8, E=8, Ev=5, mask="bool"),
    "additive_mask": dict(batch=(2, 2), L=6, S=8, E=8, Ev=5, mask="float"),
    "causal_square": dict(batch=(2, 2), L=7, S=7, E=8, Ev=6, is_causal=True),
    "causal_keys_outnumber_queries": dict(batch=(2, 2), L=4, S=9, E=8, Ev=6, is_causal=True),
    "causal_queries_outnumber_keys": dict(batch=(2, 2), L=9, S=4, E=8, Ev=6, is_causal=True),
    "custom_scale": dict(batch=(2, 2), L=5, S=6, E=8, Ev=8, scale=0.37),
    "batch_heads": dict(batch=(3, 4), L=10, S=12, E=16, Ev=16),
    "rank2": dict(batch=(), L=5, S=7, E=4, Ev=3),
    "rank3": dict(batch=(3,), L=5, S=7, E=4, Ev=3),
    "rank5": dict(batch=(2, 2, 3), L=4, S=5, E=4, Ev=3, mask="bool",
                  mask_shape=(2, 1, 1, 4, 5)),
    "single_query": dict(batch=(2, 2), L=1, S=9, E=8, Ev=8),
    "single_key": dict(batch=(2, 2), L=5, S=1, E=8, Ev=8),
    "fully_masked_bool": dict(batch=(2, 2), L=6, S=5, E=8, Ev=4, mask="bool",
                              edit_mask=mask_rows([1, 4], False)),
    "fully_masked_additive": dict(batch=(2, 2), L=6, S=5, E=8, Ev=4, mask="float",
                                  edit_mask=mask_rows([0, 3], -math.inf)),
    "mask_ls": dict(batch=(2, 3), L=5, S=7, E=8, Ev=8, mask="bool", mask_shape=(5, 7)),
    "mask_n1ls": dict(batch=(2, 3), L=5, S=7, E=8, Ev=8, mask="bool", mask_shape=(2, 1, 5, 7)),
    "mask_n11s": dict(batch=(2, 3), L=5, S=7, E=8, Ev=8, mask="bool", mask_shape=(2, 1, 1, 7)),
    "mask_11ls": dict(batch=(2, 3), L=5, S=7, E=8, Ev=8, mask="float", mask_shape=(1, 1, 5, 7)),
    "mask_1hl1": dict(batch=(2, 3), L=5, S=7, E=8, Ev=8, mask="float", mask_shape=(1, 3, 5, 1)),
    # torch 2.15 refuses a 1-D mask with 4-D inputs (an internal "Dimension out
    # of range" from its fused CPU kernel), though broadcasting gives it a
    # meaning; C accepts it at any rank, the golden uses 3-D inputs.
    "mask_s": dict(batch=(3,), L=5, S=7, E=8, Ev=8, mask="bool", mask_shape=(7,)),
    # scores of a few hundred: exp() overflows float32 unless the row maximum is
    # subtracted first. Its tolerance (about 1e-4) follows the rule above; what
    # this case guards against, inf or NaN, fails at any tolerance.
    "large_logits": dict(batch=(2, 2), L=6, S=8, E=8, Ev=8, spread=8.0),
    "longer": dict(batch=(2, 4), L=40, S=40, E=32, Ev=32, is_causal=True),
    # dropout on the attention weights, with the mask in the case
    "dropout_p10": dict(batch=(2, 3), L=6, S=7, E=8, Ev=5, dropout=0.1),
    "dropout_p50_causal": dict(batch=(2, 2), L=7, S=7, E=8, Ev=6, is_causal=True, dropout=0.5),
    "dropout_p30_bool_mask": dict(batch=(2, 2), L=6, S=5, E=8, Ev=4, mask="bool", dropout=0.3),
}
BACKWARD = ["square_unmasked", "keys_outnumber_queries", "value_width_differs", "bool_mask",
            "additive_mask", "causal_square", "causal_keys_outnumber_queries",
            "causal_queries_outnumber_keys", "custom_scale", "batch_heads", "rank2", "rank3",
            "single_query", "fully_masked_bool", "fully_masked_additive", "mask_n11s",
            "mask_1hl1", "large_logits", "longer", "dropout_p10", "dropout_p50_causal",
            "dropout_p30_bool_mask"]


def golden_cases():
    cases = [seed_example("seed_example"), seed_example("seed_example_backward", backward=True)]
    for i, (name, kwargs) in enumerate(GOLDEN.items()):
        cases.append(make(name, 200 + i, **kwargs))
        if name in BACKWARD:
            cases.append(make(name + "_backward", 300 + i, backward=True, **kwargs))
    return cases


# --------------------------------------------------------------------------
# make verify
# --------------------------------------------------------------------------

VERIFY_OPS = ["sdpa", "sdpa_backward"]


def random_case(op, seed):
    """Random rank, sizes, mask kind and broadcast shape, and sometimes a scale."""
    draw = random.Random(seed)
    rank = draw.choice([2, 3, 4, 4, 4, 5])
    batch = {2: (), 3: (draw.randint(1, 3),), 4: (draw.randint(1, 3), draw.randint(1, 4)),
             5: (draw.randint(1, 2), draw.randint(1, 2), draw.randint(1, 3))}[rank]
    L, S = draw.randint(1, 40), draw.randint(1, 40)
    E, Ev = draw.randint(1, 64), draw.randint(1, 64)
    kind = draw.choice(["none", "bool", "float", "causal"])
    att_shape = (*batch, L, S)
    mask_rank = draw.randint(2 if rank == 4 else 1, rank)    # see "mask_s" above
    mask_shape = tuple(n if draw.random() < 0.6 else 1 for n in att_shape[-mask_rank:])
    scale = draw.choice([None, None, round(draw.uniform(0.05, 1.5), 4)])
    dropout = draw.choice([0.0, 0.0, 0.0, round(draw.uniform(0.05, 0.5), 2)])
    return make(op, seed, batch, L, S, E, Ev,
                mask=kind if kind in ("bool", "float") else None, mask_shape=mask_shape,
                is_causal=kind == "causal", scale=scale, backward=op == "sdpa_backward",
                dropout=dropout)
