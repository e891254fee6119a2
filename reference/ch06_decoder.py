"""Chapter 06 reference: nn.TransformerDecoderLayer and nn.TransformerDecoder
(batch_first=True, activation="relu", dropout=0), forward and backward.

Case tensors (see chapters/06_decoder/README.md; N batch, T target length,
S memory length, D d_model, F dim_feedforward):
    decoder_layer            tgt (N, T, D), memory (N, S, D), the layer's
                             state_dict (self_attn.*, multihead_attn.*,
                             linear1.*, linear2.*, norm1/2/3.*), optional
                             tgt_mask (T, T) BOOL or F32,
                             tgt_key_padding_mask BOOL (N, T),
                             memory_key_padding_mask BOOL (N, S) -> output
    decoder_layer_backward   + grad_output -> output, grad_tgt, grad_memory,
                             grad_<name> for every parameter
    decoder, decoder_backward  the same for nn.TransformerDecoder: parameters
                             under layers.<l>.*, and norm.* with final_norm
Metadata: nhead, norm_first, eps, tgt_is_causal, num_layers,
final_norm, dropout (0).

`python -m reference.ch06_decoder --measure N` runs N fresh random cases of
every op through build/06_decoder and prints the largest errors and the
share of the tolerance they use; the tolerances below come from it.
"""

import math
import random
import sys
import warnings

import torch
import torch.nn as nn

from reference.common import Case, case_meta, generator, measure_main, randn

# A BOOL key padding mask beside a float tgt_mask is what the float-mask cases
# test on purpose (PyTorch turns both into float biases and adds them); its
# deprecation warning says nothing about the result.
warnings.filterwarnings("ignore", message="Support for mismatched key_padding_mask")

CHAPTER = "06_decoder"
PROGRAM = "build/06_decoder"

# ---------------------------------------------------------------------------
# Tolerances. A decoder layer chains chapter 03's attention (twice), chapter
# 05's feed-forward block and three LayerNorms. Every step is a float32 sum of
# at most a few dozen products here (D, F <= 48, T, S <= 10), with a relative
# error of a few 1e-7, and the LayerNorms bring the values back to order 1
# after each sub-layer, so errors do not pile up from step to step. What can
# magnify them is LayerNorm itself (chapter 04): its input carries an
# absolute error of about 1e-7 * max|x|, which rstd multiplies. So each case
# records, over every LayerNorm it runs (norm1..3 of every layer and the final
# norm), cond = the largest max|x| * rstd of an input row, and for a backward
# case cond * max(1, rstd) (LayerNorm's input gradient is rstd times its
# output gradient). The tolerance is
#
#     atol = layers * (base + slope * cond),   rtol = 2e-5
#
# A first measurement with a fixed atol of 5e-5 showed why: with D = 2 a
# LayerNorm row has only two values, rstd can be huge when they nearly agree,
# and one backward case used 0.93 of that tolerance (an error of 1.8e-4).
# Random cases now have D >= 4, and cond takes care of the rest.
#
# Measured with `--measure 150 --seed 2` (after make): the largest excess
# |C - torch| - rtol |torch| per unit of cond was 2.2e-7 (forward) and 1.5e-6
# (backward); the largest errors 1.9e-6 (decoder_layer), 1.9e-5
# (decoder_layer_backward, a weight gradient summed over N * T rows), 9.1e-6
# (decoder) and 2.5e-5 (decoder_backward); no case used more than 0.18 of its
# tolerance (0.10, 0.12, 0.18, 0.09 per op), a margin of 5 or more.
#
# ReLU's kink: a pre-activation of linear1 within float32's rounding error of
# 0 may fall on the other side of 0 in C, which switches a whole gradient
# term on or off (ch05_encoder.py explains it). The cases redraw tgt (and
# memory) until every pre-activation of every layer is at least KINK_MARGIN
# away from 0.
FWD_BASE, FWD_SLOPE = 1e-5, 1e-6
BWD_BASE, BWD_SLOPE = 5e-5, 1e-6
RTOL = 2e-5
KINK_MARGIN = 1e-4


def norm_condition(norm, x):
    """(cond, max rstd) of a LayerNorm's input rows: cond is the largest
    max|x| * rstd over the rows, chapter 04's measure of how much the norm
    magnifies the rounding error its input already carries."""
    x = x.detach()
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    rstd = 1.0 / torch.sqrt(var + norm.eps)
    cond = (x.abs().amax(dim=-1, keepdim=True) * rstd).max().item()
    return cond, rstd.max().item()


def tolerance(cond, rstd, backward, layers):
    """atol = base + slope * c, where c is cond (forward) or cond * max(1, rstd)
    (backward: LayerNorm's input gradient is rstd times its output gradient)
    and the slope grows with the number of layers the error passes through."""
    c = cond * max(1.0, rstd) if backward else cond
    base, slope = (BWD_BASE, BWD_SLOPE) if backward else (FWD_BASE, FWD_SLOPE)
    return dict(atol=float(f"{layers * (base + slope * c):.3g}"), rtol=RTOL, cond=float(f"{c:.4g}"))


def f32(t):
    """The float32 values C will see, held in float64."""
    return t.float().double()


def make_layer(g, D, H, F, norm_first, eps):
    """A float64 nn.TransformerDecoderLayer with random parameters that are
    not PyTorch's initialisation: weights N(0, 1/fan_in), biases N(0, 0.2^2),
    LayerNorm weights 1 + N(0, 0.2^2) and biases N(0, 0.2^2), so a missing
    weight or bias in C shows."""
    layer = nn.TransformerDecoderLayer(D, H, F, dropout=0.0, activation="relu",
                                       layer_norm_eps=eps, batch_first=True,
                                       norm_first=norm_first, dtype=torch.float64)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(f32(1 + 0.2 * randn(g, *p.shape)))
            elif name.endswith("bias"):
                p.copy_(f32(0.2 * randn(g, *p.shape)))
            else:
                p.copy_(f32(randn(g, *p.shape) / math.sqrt(p.shape[1])))
    return layer


def padding_mask(g, N, L, pad):
    """(N, L) bool, True = padding: each sequence's last positions, at most
    L - 1 of them (position 0 stays, so no query is left without a key)."""
    mask = torch.zeros(N, L, dtype=torch.bool)
    if pad and L > 1:
        counts = torch.randint(0, L, (N,), generator=g)
        counts[0] = max(counts[0].item(), 1)       # at least one padded position
        for n in range(N):
            if counts[n]:
                mask[n, L - counts[n]:] = True
    return mask


def decoder_case(name, N, T, S, D, H, F, seed, norm_first=False, num_layers=None,
                 final_norm=False, tgt_mask="bool", tgt_is_causal=False, pad_tgt=False,
                 pad_memory=False, eps=1e-5, backward=False):
    """One case. num_layers None: a single nn.TransformerDecoderLayer (ops
    decoder_layer*); otherwise nn.TransformerDecoder with that many layers
    (ops decoder*). tgt_mask: "bool" (the subsequent mask as booleans, True =
    masked), "float" (nn.Transformer.generate_square_subsequent_mask: 0 and
    -inf) or None."""
    g = generator(seed)
    stack = num_layers is not None
    if stack:
        layers = [make_layer(g, D, H, F, norm_first, eps) for _ in range(num_layers)]
        norm = None
        if final_norm:
            norm = nn.LayerNorm(D, eps=eps, dtype=torch.float64)
            with torch.no_grad():
                norm.weight.copy_(f32(1 + 0.2 * randn(g, D)))
                norm.bias.copy_(f32(0.2 * randn(g, D)))
        model = nn.TransformerDecoder(layers[0], num_layers, norm=norm)
        with torch.no_grad():   # the clones copy layer 0; give every layer its own values
            for l, layer in enumerate(layers):
                model.layers[l].load_state_dict(layer.state_dict())
        lin1 = [m.linear1 for m in model.layers]
    else:
        model = make_layer(g, D, H, F, norm_first, eps)
        lin1 = [model.linear1]
    model.eval()

    memory = f32(randn(g, N, S, D))
    masks = {}
    if tgt_mask == "bool":
        masks["tgt_mask"] = torch.ones(T, T, dtype=torch.bool).triu(1)
    elif tgt_mask == "float":
        masks["tgt_mask"] = nn.Transformer.generate_square_subsequent_mask(T,
                                                                           dtype=torch.float64)
    if pad_tgt:
        masks["tgt_key_padding_mask"] = padding_mask(g, N, T, True)
    if pad_memory:
        masks["memory_key_padding_mask"] = padding_mask(g, N, S, True)

    # Redraw tgt and memory until no pre-activation of linear1 is near ReLU's kink.
    seen = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in lin1]
    kwargs = dict(masks, tgt_is_causal=tgt_is_causal)
    for _ in range(100):
        tgt = f32(randn(g, N, T, D))
        seen.clear()
        with torch.no_grad():
            model(tgt, memory, **kwargs)
        if all((s.abs() >= KINK_MARGIN).all() for s in seen):
            break
        memory = f32(randn(g, N, S, D))
    else:
        raise RuntimeError(f"{name}: no input away from ReLU's kink in 100 draws")
    for h in hooks:
        h.remove()

    # The conditioning of every LayerNorm the case runs (see the tolerances).
    stats = []
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    hooks = [m.register_forward_hook(
        lambda mod, inp, out: stats.append(norm_condition(mod, inp[0]))) for m in norms]
    tgt.requires_grad_(True)
    memory.requires_grad_(True)
    y = model(tgt, memory, **kwargs)
    for h in hooks:
        h.remove()
    cond = max(c for c, _ in stats)
    rstd = max(r for _, r in stats)
    params = {k: v for k, v in model.state_dict().items()}
    tensors = {"tgt": tgt, "memory": memory, **masks, **params, "output": y}
    outputs = ["output"]
    if backward:
        dy = f32(randn(g, N, T, D))
        y.backward(dy)
        tensors.update(grad_output=dy, grad_tgt=tgt.grad, grad_memory=memory.grad)
        outputs += ["grad_tgt", "grad_memory"]
        named = dict(model.named_parameters())
        for k in params:
            tensors[f"grad_{k}"] = named[k].grad
            outputs.append(f"grad_{k}")
    op = ("decoder" if stack else "decoder_layer") + ("_backward" if backward else "")
    options = dict(nhead=H, norm_first=norm_first, eps=eps, tgt_is_causal=tgt_is_causal,
                   dropout=0.0)
    if stack:
        options.update(num_layers=num_layers, final_norm=final_norm)
    tol = tolerance(cond, rstd, backward, num_layers or 1)
    info = dict(N=N, T=T, S=S, d_model=D, dim_feedforward=F, cond=tol.pop("cond"))
    return Case(name, tensors, case_meta(op, seed, outputs=outputs, info=info, **options, **tol))


# ---------------------------------------------------------------------------

# (name tag, N, T, S, D, H, F, options)
LAYER_SHAPES = [
    ("post_N2_T5_S7_D8_H2", 2, 5, 7, 8, 2, 16, dict()),
    ("pre_N2_T5_S7_D8_H2", 2, 5, 7, 8, 2, 16, dict(norm_first=True)),
    ("post_pad_N3_T6_S4_D12_H3", 3, 6, 4, 12, 3, 24,
     dict(pad_tgt=True, pad_memory=True)),
    ("pre_pad_N3_T6_S4_D12_H3", 3, 6, 4, 12, 3, 24,
     dict(norm_first=True, pad_tgt=True, pad_memory=True)),
    ("post_H1_nomask_N1_T4_S4_D6", 1, 4, 4, 6, 1, 10, dict(tgt_mask=None)),
    ("post_float_mask_causal_N2_T7_S3_D8_H4", 2, 7, 3, 8, 4, 12,
     dict(tgt_mask="float", tgt_is_causal=True)),
    ("pre_causal_pad_eps1e-6_N2_T4_S9_D16_H2", 2, 4, 9, 16, 2, 32,
     dict(norm_first=True, tgt_is_causal=True, pad_tgt=True, eps=1e-6)),
    ("post_T1_S1_N2_D4_H2", 2, 1, 1, 4, 2, 8, dict()),
]

STACK_SHAPES = [
    ("post_2layers_N2_T5_S6_D8_H2", 2, 5, 6, 8, 2, 16, dict(num_layers=2)),
    ("pre_2layers_norm_N2_T5_S6_D8_H2", 2, 5, 6, 8, 2, 16,
     dict(num_layers=2, norm_first=True, final_norm=True)),
    ("post_2layers_norm_pad_N3_T4_S5_D12_H3", 3, 4, 5, 12, 3, 20,
     dict(num_layers=2, final_norm=True, pad_tgt=True, pad_memory=True)),
]


def golden_cases():
    cases = []
    for i, (tag, N, T, S, D, H, F, opt) in enumerate(LAYER_SHAPES):
        cases.append(decoder_case(f"decoder_layer_{tag}", N, T, S, D, H, F, 700 + i, **opt))
        cases.append(decoder_case(f"decoder_layer_backward_{tag}", N, T, S, D, H, F, 720 + i,
                                  backward=True, **opt))
    for i, (tag, N, T, S, D, H, F, opt) in enumerate(STACK_SHAPES):
        cases.append(decoder_case(f"decoder_{tag}", N, T, S, D, H, F, 740 + i, **opt))
        cases.append(decoder_case(f"decoder_backward_{tag}", N, T, S, D, H, F, 760 + i,
                                  backward=True, **opt))
    return cases


VERIFY_OPS = ["decoder_layer", "decoder_layer_backward", "decoder", "decoder_backward"]


def random_case(op, seed):
    draw = random.Random(seed)
    N, T, S = draw.randint(1, 3), draw.randint(1, 10), draw.randint(1, 10)
    H = draw.choice([1, 2, 3, 4])
    D = H * draw.randint(-(-4 // H), 48 // H)     # 4 <= D <= 48, a multiple of H
    F = draw.randint(1, 48)
    opt = dict(norm_first=draw.random() < 0.5,
               tgt_mask=draw.choice(["bool", "bool", "float", None]),
               pad_tgt=draw.random() < 0.4, pad_memory=draw.random() < 0.4,
               eps=draw.choice([1e-5, 1e-5, 1e-6]))
    opt["tgt_is_causal"] = opt["tgt_mask"] is not None and draw.random() < 0.3
    if op.startswith("decoder_layer"):
        return decoder_case(op, N, T, S, D, H, F, seed, backward=op.endswith("_backward"),
                            **opt)
    return decoder_case(op, N, T, S, D, H, F, seed, num_layers=draw.randint(1, 3),
                        final_norm=draw.random() < 0.5, backward=op.endswith("_backward"),
                        **opt)


# ---------------------------------------------------------------------------
# --measure: where the tolerances come from
# ---------------------------------------------------------------------------

def excess_per_cond(case, name, expected, diff):
    """The tolerance's atol grows with the case's LayerNorm condition (see
    the top of this file): the largest |C - torch| - rtol |torch| over cond."""
    return ((diff - float(case.meta["rtol"]) * expected.abs()).max().item()
            / float(case.meta["info.cond"]))


if __name__ == "__main__":
    sys.exit(measure_main(sys.modules[__name__], extra=("excess per cond", excess_per_cond)))
