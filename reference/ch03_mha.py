"""Chapter 03 reference: multi-head attention, forward and backward, exactly
as torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True,
dropout=0) computes it.

Case tensors (see chapters/03_mha/README.md and mha_case.h):
    mha            query (N, L, E), key (N, S, kdim), value (N, S, vdim)
                   (unbatched: without N; self_attention: query alone),
                   the parameters under the module's state_dict names
                   (in_proj_weight, or q/k/v_proj_weight when kdim or vdim
                   differ from E; in_proj_bias; out_proj.weight; out_proj.bias),
                   key_padding_mask (N, S) and attn_mask (L, S) or (N*H, L, S),
                   each optional, bool (True = masked) or float (added)
                   -> output (N, L, E), attn_weights ((N, L, S) averaged or
                   (N, H, L, S) per head; only with need_weights)
    mha_backward   the same plus grad_output (N, L, E)
                   -> also grad_query, grad_key, grad_value (self_attention:
                   grad_query alone) and grad_<name> for every parameter
Options (metadata): nhead (nn.MultiheadAttention's num_heads), embed_dim, kdim,
vdim, bias, batch_first, need_weights, average_attn_weights, is_causal,
self_attention, dropout.

Everything expected comes from the module and autograd in float64, with one
exception, the fully-masked rows of need_weights=True (see expected() below).
The module stays in training mode (dropout is 0 anyway), so PyTorch never
takes its inference fast path (torch._native_multi_head_attention), which
needs float32, no autograd and self-attention, and which returns NaN for
fully-masked rows even with need_weights=False.
"""

import math
import random
import warnings

import torch
import torch.nn as nn

from reference.common import Case, case_meta, generator, randn

CHAPTER = "03_mha"
PROGRAM = "build/03_mha"

# Tolerances. Compared with chapter 02, the attention inputs are no longer
# given: q, k and v are float32 products of length E (or kdim, vdim), and
# the output passes through one more product of length E; the gradients of
# the weights are sums over the N * L (or N * S) rows. Each of these rounds at
# about 6e-8 relative, and the softmax still turns an error in a score into a
# relative error of the same size in a weight, so the score size still drives
# the error. Each case states atol = rtol = BASE * growth with
#
#     growth = max(1, max|score| / 4),   score = q_h . k_h / sqrt(Dh),
#
# the largest scaled dot product of any head (the rule of chapter 02).
#
# Measured with the C program (measure() below; after make, run
#     .venv/bin/python -c 'from reference.ch03_mha import measure; measure(4000, seed=1)')
# on 4000 random cases per op (random_case: N <= 4 or unbatched, L, S <= 20,
# E <= 64, kdim, vdim <= 40, every mask kind, per-head and averaged weights),
# as the smallest atol = rtol that passes each output, divided by growth.
# Worst seen: 8.3e-7 for the forward outputs (output; attn_weights 2.6e-7),
# 6.4e-6 for the gradients (the parameter gradients, sums over up to 80 rows;
# grad_query, grad_key, grad_value 2.0e-6 or less, over both seeds). The parameter gradients'
# error grows only slowly with the number of rows (worst 3.7e-6 per growth
# below 20 rows, 5.3e-6 at 60 to 80), too little to make the rule depend on
# it. BASE leaves a margin of about 2.4x over the worst; a further 3000 fresh
# cases per op (seed 2) used at most 0.40 of their tolerance.
MHA_TOL = 2e-6
MHA_BACKWARD_TOL = 1.5e-5


def f32(t):
    """The float32 values C will see, held in float64."""
    return t.float().double()


# --------------------------------------------------------------------------
# The module and its expected values
# --------------------------------------------------------------------------

def make_module(g, E, H, kdim, vdim, bias):
    """nn.MultiheadAttention in float64 with random parameters (float32
    values): weights N(0, 1/fan_in), so projected features are about N(0, 1),
    and biases 0.5 * N(0, 1), nonzero so that a mix-up of the packed thirds
    shows."""
    m = nn.MultiheadAttention(E, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True,
                              dtype=torch.float64)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 2:
                p.copy_(f32(randn(g, *p.shape) / math.sqrt(p.shape[1])))
            else:
                p.copy_(f32(0.5 * randn(g, *p.shape)))
    return m


def in_projections(m, query, key, value):
    """q, k, v = the three input projections, as nn.MultiheadAttention makes them."""
    E = m.embed_dim
    if m.in_proj_weight is not None:
        wq, wk, wv = m.in_proj_weight.split(E)
    else:
        wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
    bq = bk = bv = None
    if m.in_proj_bias is not None:
        bq, bk, bv = m.in_proj_bias.split(E)
    lin = torch.nn.functional.linear
    return lin(query, wq, bq), lin(key, wk, bk), lin(value, wv, bv)


def additive_bias(key_padding_mask, attn_mask, N, H, L, S):
    """The (N, H, L, S) float bias nn.MultiheadAttention's two masks stand
    for (bool True = masked -> -inf; float added), or None."""
    bias = torch.zeros(N, H, L, S, dtype=torch.float64)
    used = False
    if attn_mask is not None:
        a = attn_mask
        if a.dtype == torch.bool:
            a = torch.zeros(a.shape, dtype=torch.float64).masked_fill(a, -math.inf)
        bias = bias + (a.view(N, H, L, S) if a.dim() == 3 else a)
        used = True
    if key_padding_mask is not None:
        k = key_padding_mask
        if k.dtype == torch.bool:
            k = torch.zeros(k.shape, dtype=torch.float64).masked_fill(k, -math.inf)
        bias = bias + k.view(N, 1, 1, S)
        used = True
    return bias if used else None


def head_scores(m, query, key, value, batched):
    """(N, H, L, S) scaled scores q_h . k_h / sqrt(Dh), no mask, in float64."""
    q, k, _ = in_projections(m, query, key, value)
    if not batched:
        q, k = q.unsqueeze(0), k.unsqueeze(0)
    N, L, E = q.shape
    S, H = k.shape[1], m.num_heads
    Dh = E // H
    qh = q.view(N, L, H, Dh).transpose(1, 2)
    kh = k.view(N, S, H, Dh).transpose(1, 2)
    return qh @ kh.transpose(-2, -1) / math.sqrt(Dh)


def head_weights(scores, bias, causal):
    """softmax(scores + bias) per head, with the top-left causal pattern if
    asked, and the project's rule for fully-masked rows: weights 0, not NaN."""
    if bias is not None:
        scores = scores + bias
    if causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf)
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)


def expected(name, m, query, key, value, kpm, attn_mask, is_causal, need_weights, average,
             batched, self_attention, grad_output):
    """The expected tensors of one case, and the growth of its tolerance.

    Output and gradients come from the module and autograd. Where a query may
    attend to no key, PyTorch's need_weights=True path computes softmax of a
    row of -inf and returns NaN (in that row of the output, its weights, and
    through the backward in every gradient); its need_weights=False path goes
    through F.scaled_dot_product_attention and returns weights 0 and output
    out_proj.bias, with no gradient. The project follows the second rule
    everywhere (chapter 02), so for such a case the output and gradients are
    taken from the need_weights=False call (which gives the same result in
    every other row; checked), after checking that NaN appears exactly in the
    fully-masked rows.

    The weights are computed here from the module's projections (PyTorch does
    not return per-head weights with need_weights=False) and checked against
    what the module returned wherever that is a number.
    """
    backward = grad_output is not None
    query = query.detach().clone().requires_grad_(backward)
    if self_attention:
        key = value = query
    else:
        key = key.detach().clone().requires_grad_(backward)
        value = value.detach().clone().requires_grad_(backward)

    def call(nw, causal_hint):
        with warnings.catch_warnings():
            # bool and float masks together are "deprecated" but work; some
            # cases mix them on purpose.
            warnings.filterwarnings("ignore", message="Support for mismatched")
            return m(query, key, value, key_padding_mask=kpm, need_weights=nw,
                     attn_mask=attn_mask, average_attn_weights=average, is_causal=causal_hint)

    out, torch_weights = call(need_weights, is_causal)

    # What the module did with the is_causal hint (mha_case.h): SDPA's own
    # causal pattern when there is no key_padding_mask and no weights are
    # needed, attn_mask otherwise.
    causal = is_causal and kpm is None and not need_weights
    N = query.shape[0] if batched else 1
    L, S = query.shape[-2], key.shape[-2]
    H = m.num_heads
    bias = additive_bias(None if kpm is None else (kpm if batched else kpm.unsqueeze(0)),
                         None if causal else attn_mask, N, H, L, S)
    scores = head_scores(m, query.detach(), key.detach(), value.detach(), batched)
    weights = head_weights(scores, bias, causal)                       # (N, H, L, S)
    dead = (weights.sum(-1) == 0).any(dim=1)                           # (N, L) fully masked

    if torch.isnan(out).any():
        nan_rows = torch.isnan(out).any(-1).view(N, L)
        assert torch.equal(nan_rows, dead), f"{name}: NaN rows are not the fully-masked rows"
        assert need_weights, f"{name}: NaN from the need_weights=False path"
        good, _ = call(False, False)     # need_weights=True ignored the hint: same masks
        rows = ~dead if batched else ~dead[0]
        gap = (good[rows] - out[rows]).abs().max().item() if rows.any() else 0.0
        assert gap < 1e-12, f"{name}: need_weights paths differ by {gap}"
        out = good
    shown = weights.mean(dim=1) if average else weights
    if not batched:
        shown = shown[0]
    if torch_weights is not None:
        finite = ~torch.isnan(torch_weights)
        gap = (torch_weights[finite] - shown[finite]).abs().max().item() if finite.any() else 0
        assert gap < 1e-12, f"{name}: weights differ from the module's by {gap}"
    assert not torch.isnan(out).any(), f"{name}: NaN in the expected output"

    tensors = {"query": query.detach()}
    if not self_attention:
        tensors.update(key=key.detach(), value=value.detach())
    params = dict(m.named_parameters())
    tensors.update({n: p.detach() for n, p in params.items()})
    if kpm is not None:
        tensors["key_padding_mask"] = kpm
    if attn_mask is not None:
        tensors["attn_mask"] = attn_mask
    tensors["output"] = out.detach()
    outputs = ["output"]
    if need_weights:
        tensors["attn_weights"] = shown
        outputs.append("attn_weights")
    if backward:
        inputs = {"query": query} if self_attention else {"query": query, "key": key,
                                                          "value": value}
        grads = torch.autograd.grad(out, list(inputs.values()) + list(params.values()),
                                    grad_output)
        tensors["grad_output"] = grad_output
        for n, gr in zip(list(inputs) + list(params), grads):
            tensors["grad_" + n] = gr
            outputs.append("grad_" + n)
        assert not any(torch.isnan(gr).any() for gr in grads), f"{name}: NaN gradient"
    growth = max(1.0, scores.abs().max().item() / 4)
    return tensors, outputs, growth


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def bool_mask(g, shape, p_masked=0.3):
    """nn.MultiheadAttention's convention: True = masked, with probability p_masked."""
    return torch.rand(*shape, generator=g, dtype=torch.float64) < p_masked


def float_mask(g, shape, p_inf=0.15):
    """Additive float mask: normal values, and -inf with probability p_inf."""
    m = randn(g, *shape) * 2.0
    if p_inf > 0:
        m = m.masked_fill(torch.rand(*shape, generator=g, dtype=torch.float64) < p_inf,
                          -math.inf)
    return f32(m)


def causal_mask(L, S, kind):
    """The top-left causal pattern as nn.MultiheadAttention's attn_mask:
    True (bool) or -inf (float) above the diagonal."""
    above = ~torch.ones(L, S, dtype=torch.bool).tril()
    if kind == "bool":
        return above
    return torch.zeros(L, S, dtype=torch.float64).masked_fill(above, -math.inf)


def make(name, seed, N, L, S, E, H, kdim=None, vdim=None, bias=True, self_attention=False,
         kpm=None, attn=None, attn_3d=False, is_causal=False, need_weights=True, average=True,
         backward=False, spread=1.0, edit_kpm=None, edit_attn=None):
    """Draws one case. N None: unbatched inputs. kpm: None, "bool" or
    "float". attn: None, "bool", "float", "causal_bool" or "causal_float";
    attn_3d: an (N*H, L, S) mask instead of (L, S). edit_kpm / edit_attn may
    change the drawn masks."""
    g = generator(seed)
    if self_attention:
        S, kdim, vdim = L, None, None
    m = make_module(g, E, H, kdim, vdim, bias)
    batch = () if N is None else (N,)
    query = f32(randn(g, *batch, L, E) * spread)
    key = value = None
    if not self_attention:
        key = f32(randn(g, *batch, S, m.kdim) * spread)
        value = f32(randn(g, *batch, S, m.vdim))
    key_padding_mask = None
    if kpm is not None:
        shape = (*batch, S)
        key_padding_mask = bool_mask(g, shape) if kpm == "bool" else float_mask(g, shape)
        if edit_kpm is not None:
            key_padding_mask = edit_kpm(key_padding_mask)
    attn_mask = None
    if attn is not None:
        n3 = (1 if N is None else N) * H
        if attn.startswith("causal"):
            attn_mask = causal_mask(L, S, attn.split("_")[1])
            if attn_3d:
                attn_mask = attn_mask.expand(n3, L, S).clone()
        else:
            shape = (n3, L, S) if attn_3d else (L, S)
            attn_mask = bool_mask(g, shape) if attn == "bool" else float_mask(g, shape)
        if edit_attn is not None:
            attn_mask = edit_attn(attn_mask)
    grad_output = f32(randn(g, *batch, L, E)) if backward else None

    tensors, outputs, growth = expected(name, m, query, key, value, key_padding_mask, attn_mask,
                                        is_causal, need_weights, average, N is not None,
                                        self_attention, grad_output)
    tol = float(f"{(MHA_BACKWARD_TOL if backward else MHA_TOL) * growth:.2g}")
    options = dict(embed_dim=E, nhead=H, kdim=m.kdim, vdim=m.vdim, bias=bias,
                   batch_first=True, need_weights=need_weights, average_attn_weights=average,
                   is_causal=is_causal, self_attention=self_attention, dropout=0.0)
    op = "mha_backward" if backward else "mha"
    return Case(name, tensors, case_meta(op, seed, outputs=outputs, atol=tol, rtol=tol,
                                         **options))


def worked_example(name, key_padding_mask=None, backward=False):
    """The README's and the demo's example: self-attention over 3 tokens of
    E = 4 features, 2 heads, every projection the identity, bias=False."""
    E, H = 4, 2
    m = nn.MultiheadAttention(E, H, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.eye(E, dtype=torch.float64).repeat(3, 1))
        m.out_proj.weight.copy_(torch.eye(E, dtype=torch.float64))
    x = torch.tensor([[[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]], dtype=torch.float64)
    grad_output = torch.ones(1, 3, E, dtype=torch.float64) if backward else None
    tensors, outputs, growth = expected(name, m, x, None, None, key_padding_mask, None, False,
                                        True, False, True, True, grad_output)
    tol = float(f"{(MHA_BACKWARD_TOL if backward else MHA_TOL) * growth:.2g}")
    options = dict(embed_dim=E, nhead=H, kdim=E, vdim=E, bias=False, batch_first=True,
                   need_weights=True, average_attn_weights=False, is_causal=False,
                   self_attention=True, dropout=0.0)
    return Case(name, tensors, case_meta("mha_backward" if backward else "mha", 0,
                                         outputs=outputs, atol=tol, rtol=tol, **options))


def mask_rows(rows, value):
    """An edit that sets the given query rows (second to last dim) of a mask."""
    def edit(mask):
        mask = mask.clone()
        mask[..., rows, :] = value
        return mask
    return edit


def mask_batch(n, value):
    """An edit that sets every key of batch entry n of a key_padding_mask."""
    def edit(mask):
        mask = mask.clone()
        mask[n] = value
        return mask
    return edit


# --------------------------------------------------------------------------
# Golden cases
# --------------------------------------------------------------------------

# name: keyword arguments of make(); every one is written forward and, when in
# BACKWARD, as name_backward too.
GOLDEN = {
    # projections: packed (kdim == vdim == E) and separate, with and without bias
    "packed_self": dict(N=2, L=5, S=5, E=8, H=2, self_attention=True),
    "packed_cross": dict(N=2, L=4, S=7, E=8, H=2),
    "separate_kdim_vdim": dict(N=2, L=4, S=6, E=8, H=2, kdim=5, vdim=3),
    "separate_kdim": dict(N=2, L=5, S=3, E=6, H=3, kdim=10),
    "separate_vdim": dict(N=3, L=3, S=4, E=8, H=4, vdim=12),
    "no_bias_packed": dict(N=2, L=5, S=6, E=8, H=2, bias=False),
    "no_bias_separate": dict(N=2, L=5, S=6, E=8, H=2, kdim=7, vdim=9, bias=False),
    # heads
    "one_head": dict(N=2, L=5, S=6, E=8, H=1),
    "eight_heads": dict(N=2, L=5, S=6, E=16, H=8),
    "head_dim_1": dict(N=2, L=4, S=5, E=4, H=4),
    "one_query": dict(N=3, L=1, S=6, E=8, H=2),
    "one_key": dict(N=2, L=5, S=1, E=8, H=2),
    # weights
    "weights_per_head": dict(N=2, L=4, S=6, E=12, H=3, average=False),
    "no_weights": dict(N=2, L=4, S=6, E=12, H=3, need_weights=False),
    # masks (bool: True = masked)
    "kpm_bool": dict(N=3, L=5, S=6, E=8, H=2, kpm="bool"),
    "kpm_float": dict(N=3, L=5, S=6, E=8, H=2, kpm="float"),
    "attn_bool_2d": dict(N=2, L=5, S=6, E=8, H=2, attn="bool"),
    "attn_float_2d": dict(N=2, L=5, S=6, E=8, H=2, attn="float"),
    "attn_bool_3d": dict(N=2, L=5, S=6, E=8, H=2, attn="bool", attn_3d=True, average=False),
    "attn_float_3d": dict(N=2, L=5, S=6, E=8, H=2, attn="float", attn_3d=True),
    "both_masks_bool": dict(N=2, L=5, S=7, E=8, H=2, kpm="bool", attn="bool"),
    "both_masks_float": dict(N=2, L=5, S=7, E=8, H=2, kpm="float", attn="float", attn_3d=True),
    "both_masks_mixed": dict(N=2, L=5, S=7, E=8, H=2, kpm="bool", attn="float"),
    "self_kpm": dict(N=3, L=6, S=6, E=8, H=2, self_attention=True, kpm="bool"),
    # is_causal: a hint that attn_mask is causal (see mha_case.h)
    "causal_sdpa": dict(N=2, L=6, S=6, E=8, H=2, self_attention=True, attn="causal_bool",
                        is_causal=True, need_weights=False),
    "causal_weights": dict(N=2, L=6, S=6, E=8, H=2, self_attention=True, attn="causal_float",
                           is_causal=True, average=False),
    "causal_kpm": dict(N=2, L=6, S=6, E=8, H=2, self_attention=True, attn="causal_bool",
                       kpm="bool", is_causal=True, need_weights=False),
    "causal_cross": dict(N=2, L=7, S=4, E=8, H=2, attn="causal_bool", is_causal=True,
                         need_weights=False),
    "causal_mask_only": dict(N=2, L=4, S=6, E=8, H=2, attn="causal_bool"),
    # the hint wins over a non-causal attn_mask on the SDPA path
    "causal_hint_wins": dict(N=2, L=5, S=5, E=8, H=2, attn="bool", is_causal=True,
                             need_weights=False),
    # unbatched (L, E) inputs
    "unbatched": dict(N=None, L=5, S=6, E=8, H=2, kdim=5),
    "unbatched_masks": dict(N=None, L=5, S=6, E=8, H=2, kpm="bool", attn="float",
                            attn_3d=True, average=False),
    # fully-masked rows: weights 0, output out_proj.bias, no gradient
    "fully_masked_kpm": dict(N=3, L=4, S=5, E=8, H=2, kpm="bool", need_weights=False,
                             edit_kpm=mask_batch(1, True)),
    "fully_masked_rows": dict(N=2, L=6, S=5, E=8, H=2, attn="bool",
                              edit_attn=mask_rows([1, 4], True)),
    "fully_masked_float": dict(N=2, L=6, S=5, E=8, H=2, attn="float", attn_3d=True,
                               average=False, edit_attn=mask_rows([0, 3], -math.inf)),
    # bigger, and large scores (the softmax must subtract the row maximum)
    "larger": dict(N=3, L=16, S=16, E=32, H=4, self_attention=True, attn="causal_bool",
                   kpm="bool", is_causal=True),
    "large_logits": dict(N=2, L=5, S=6, E=8, H=2, spread=6.0),
}
BACKWARD = ["packed_self", "packed_cross", "separate_kdim_vdim", "separate_kdim",
            "separate_vdim", "no_bias_packed", "no_bias_separate", "one_head", "eight_heads",
            "one_query", "weights_per_head", "no_weights", "kpm_bool", "kpm_float",
            "attn_bool_2d", "attn_float_2d", "attn_bool_3d", "attn_float_3d", "both_masks_bool",
            "both_masks_mixed", "self_kpm", "causal_sdpa", "causal_weights", "causal_cross",
            "causal_hint_wins", "unbatched", "unbatched_masks", "fully_masked_kpm",
            "fully_masked_rows", "fully_masked_float", "larger", "large_logits"]


def golden_cases():
    pad = torch.tensor([[False, False, True]])
    cases = [worked_example("worked_example"),
             worked_example("worked_example_padding", key_padding_mask=pad),
             worked_example("worked_example_backward", backward=True)]
    for i, (name, kwargs) in enumerate(GOLDEN.items()):
        cases.append(make(name, 3000 + i, **kwargs))
        if name in BACKWARD:
            cases.append(make(name + "_backward", 3100 + i, backward=True, **kwargs))
    return cases


# --------------------------------------------------------------------------
# make verify
# --------------------------------------------------------------------------

VERIFY_OPS = ["mha", "mha_backward"]


def random_options(draw):
    """Random sizes and options for make()."""
    H = draw.choice([1, 1, 2, 3, 4, 8])
    E = H * draw.randint(1, min(16, 64 // H))      # head_dim 1..16, E <= 64
    kw = dict(N=None if draw.random() < 0.15 else draw.randint(1, 4), E=E, H=H,
              L=draw.randint(1, 20), S=draw.randint(1, 20), bias=draw.random() < 0.8)
    kw["self_attention"] = draw.random() < 0.25
    if not kw["self_attention"] and draw.random() < 0.4:
        kw["kdim"] = draw.choice([E, draw.randint(1, 40)])
        kw["vdim"] = draw.choice([E, draw.randint(1, 40)])
    if kw["self_attention"]:
        kw["S"] = kw["L"]
    kw["kpm"] = draw.choice([None, None, "bool", "float"])
    kw["attn"] = draw.choice([None, None, "bool", "float"])
    kw["attn_3d"] = draw.random() < 0.3
    kw["need_weights"] = draw.random() < 0.6
    kw["average"] = draw.random() < 0.5
    if draw.random() < 0.2:
        kw["is_causal"] = True
        # Mostly an honest hint; now and then a non-causal mask, where the
        # SDPA path still applies the causal pattern.
        if kw["attn"] is None or draw.random() < 0.7:
            kw["attn"] = draw.choice(["causal_bool", "causal_float"])
    return kw


def random_case(op, seed):
    draw = random.Random(seed)
    return make(op, seed, backward=op == "mha_backward", **random_options(draw))


def measure(n_cases, seed=0):
    """How the tolerance constants were chosen: runs n_cases random cases of
    each op through the C program and prints, per output name, the largest
    smallest-passing tolerance (max |C - torch| / (1 + |torch|) over the
    elements) divided by the case's growth, and the largest share of the
    case's own tolerance used (must stay below 1)."""
    import subprocess
    import tempfile
    from pathlib import Path

    from safetensors.torch import load_file

    from reference.common import write_case

    root = Path(__file__).resolve().parent.parent
    worst = {}
    draw = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        case_in, case_out = Path(tmp) / "in.safetensors", Path(tmp) / "out.safetensors"
        for op in VERIFY_OPS:
            for _ in range(n_cases):
                case_seed = draw.randrange(2**31)
                case = random_case(op, case_seed)
                write_case(case_in, case)
                subprocess.run([str(root / PROGRAM), "--case", str(case_in), "--out",
                                str(case_out)], check=True)
                got, want = load_file(str(case_out)), load_file(str(case_in))
                tol = float(case.meta["atol"])
                base = MHA_BACKWARD_TOL if op == "mha_backward" else MHA_TOL
                growth = tol / base
                for name in case.meta["outputs"].split(","):
                    e, a = want[name].double(), got[name].double()
                    need = ((a - e).abs() / (1 + e.abs())).max().item()
                    key = name if not name.startswith("grad_") or name in (
                        "grad_query", "grad_key", "grad_value") else "grad_<parameter>"
                    key = (op, key)
                    old = worst.get(key, (0.0, 0.0, None))
                    worst[key] = (max(old[0], need / growth), max(old[1], need / tol),
                                  case_seed if need / growth > old[0] else old[2])
    print(f"{'op':<14} {'output':<18} {'worst / growth':>15} {'share of tol':>13}  seed")
    for (op, name), (per_growth, used, s) in sorted(worst.items()):
        print(f"{op:<14} {name:<18} {per_growth:15.3g} {used:13.3g}  {s}")
