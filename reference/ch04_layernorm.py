"""Chapter 04 reference: nn.LayerNorm forward and backward, and the residual
connection x + f(x) with its backward.

Case tensors (see chapters/04_layernorm/README.md):
    layernorm            input (..., C), weight (C,), bias (C,) -> output
    layernorm_backward   input, weight, bias, grad_output
                         -> output, grad_input, grad_weight, grad_bias
    residual             input, sublayer_output -> output
    residual_backward    grad_output -> grad_input, grad_sublayer_output
weight and bias carry nn.LayerNorm's state_dict names and are absent without
elementwise_affine (bias alone is absent for nn.LayerNorm(C, bias=False)).
LayerNorm metadata: eps, normalized_shape (= C), elementwise_affine, bias,
rows (the kind of input rows) and cond (see below).
"""

import random

import torch
import torch.nn as nn

from reference.common import Case, case_meta, generator, randn

CHAPTER = "04_layernorm"
PROGRAM = "build/04_layernorm"

# Tolerances. Every LayerNorm output passes through n = (x - mean) * rstd. In
# float32 an input is only known to half an ulp, about 6e-8 * |x| (an earlier
# float32 layer rounds it so), and a mean stored as one float32 has that
# accuracy too, so x - mean carries an error of about 6e-8 * max|x| which
# rstd = 1/std then magnifies. The first is the condition of the problem; the
# second is what torch's float32 kernel and this chapter's backward (which
# rebuilds n from the saved mean) have. The chapter's forward keeps the mean
# as a pair and comes within a few ulps of the truth on the given inputs
# (test_layernorm_hard_rows, HARD_CASES below); its tolerance still allows
# for a one-float mean. Per case,
#
#     cond = max over rows of  max|x| * rstd
#
# is about 3 for N(0, 1) rows, 1e4 for rows 1e4 + N(0, 1) (the mean is 1e4
# times the spread) and up to |v| * 1e3 for rows v + 1e-3 N(0, 1). A row of equal
# values counts 1 for max|x|: its x - mean must come out exactly 0 (chapter
# README), so nothing is magnified. The input gradient is rstd times larger
# than the output and inherits its relative error, so for the backward cond is
# multiplied by max(1, rstd) row by row. A case's absolute tolerance is
#
#     atol = a + b * cond       (metadata atol, with cond beside it; rtol fixed)
#
# where a covers the ordinary rounding of a well-conditioned case (the
# variance is a float32 sum of up to 256 squares; the parameter gradients sum
# over up to 216 rows) and b the part that cond magnifies.
#
# The constants are measured. After make,
#     .venv/bin/python -c 'from reference.ch04_layernorm import measure; measure(5000)'
# runs 5000 random cases per op through the C program and prints, per row kind
# and output, the worst excess |C - torch| - rtol |torch|, that excess per unit
# of cond, and the share of atol it uses. Worst seen over 4 x 5000 random cases
# per op (seeds 0, 11, 23, 37):
#   forward:  per unit of cond 1.4e-7 on large-mean and near-constant rows (the
#             rounding of the mean, magnified), up to 7.6e-7 on N(0, 1) and
#             scaled rows, where the rounding of the variance sum adds to it
#   backward: per unit of cond 2.2e-7 for grad_input and 7.7e-7 for grad_weight
#             (each row's error adds up over the rows); on well-conditioned rows
#             an excess of 1.9e-5 in grad_weight, a float32 sum over up to 216 rows
# With the constants below no case used more than 0.27 of its atol (forward
# 0.23), a margin of 3.7 or more. Those runs had the forward's mean as one
# float. With the pair and the sums in blocks of 16, measure(5000) at seed 0:
#   forward:  per unit of cond 1.6e-11 on large-mean and 4.1e-10 on
#             near-constant rows, at most 2.3e-7 (N(0, 1) rows); 0.075 of atol
#   backward: as before (it still rebuilds n from the one-float mean): per unit
#             of cond 2.3e-7 for grad_input and 7.6e-7 for grad_weight; 0.15 of atol
# The constants stay as they were.
LAYERNORM_ATOL = (8e-6, 1e-6)             # forward: atol = a + b * cond
LAYERNORM_BACKWARD_ATOL = (2e-5, 5e-6)    # backward
LAYERNORM_RTOL = 1e-5
# x + f(x) in float32 is the exactly rounded sum, and so is the float64 sum
# rounded to float32 (the sum of two float32 values is exact in float64 unless
# their exponents differ by more than 29); the gradients are copies. Exact.
RESIDUAL_TOL = dict(atol=0.0, rtol=0.0)

ROW_KINDS = ["normal", "scaled", "large_mean", "near_constant", "constant"]


def f32(t):
    """The float32 values C will see, held in float64."""
    return t.float().double()


def layernorm_rows(g, rows, C, kind):
    """(rows, C) float64 input rows of one kind:
    normal         N(0, 1)
    scaled         mu + sigma * N(0, 1), sigma from 1e-2 to 1e2 (eps matters at the low end)
    large_mean     1e4 + N(0, 1): the mean dwarfs the spread
    huge_mean      1e6 + N(0, 1): float32 spaces numbers near 1e6 1/16 apart
                   (hard rows only: not in ROW_KINDS, so random cases keep their draws)
    near_constant  v + 1e-3 * N(0, 1): the spread is tiny, rstd large
    constant       every value in a row equal: variance exactly 0
    mixed          each row one of the above
    """
    if kind == "mixed":
        pick = torch.randint(0, len(ROW_KINDS), (rows,), generator=g)
        return torch.cat([layernorm_rows(g, 1, C, ROW_KINDS[i]) for i in pick.tolist()])
    z = randn(g, rows, C)
    if kind == "normal":
        x = z
    elif kind == "scaled":
        sigma = 10.0 ** (4.0 * torch.rand(rows, 1, generator=g, dtype=torch.float64) - 2.0)
        x = 2.0 * randn(g, rows, 1) + sigma * z
    elif kind == "large_mean":
        x = 1e4 + z
    elif kind == "huge_mean":
        x = 1e6 + z
    elif kind == "near_constant":
        x = randn(g, rows, 1) + 1e-3 * z
    elif kind == "constant":
        x = randn(g, rows, 1).expand(rows, C)
    else:
        raise ValueError(f"unknown row kind {kind}")
    return f32(x)


def condition(x, rstd, backward=False):
    """cond of a case (see the tolerance note at the top), at least 1."""
    if x.numel() == 0:
        return 1.0
    constant = (x == x[..., :1]).all(dim=-1, keepdim=True)
    cond = torch.where(constant, torch.ones_like(rstd), x.abs().amax(dim=-1, keepdim=True) * rstd)
    if backward:
        cond = cond * rstd.clamp(min=1.0)
    return max(1.0, cond.max().item())


def tolerance(cond, backward):
    a, b = LAYERNORM_BACKWARD_ATOL if backward else LAYERNORM_ATOL
    return a + b * cond


def layernorm_case(name, shape, kind, seed, eps=1e-5, affine=True, has_bias=True,
                   backward=False, x=None, weight=None, bias=None):
    """One LayerNorm case over the last dimension of `shape`; expected values
    from nn.LayerNorm and autograd in float64. x, weight and bias, when given,
    replace the random ones."""
    g = generator(seed)
    C = shape[-1]
    if x is None:
        rows = 1
        for d in shape[:-1]:
            rows *= d
        x = layernorm_rows(g, rows, C, kind).reshape(shape)
    has_bias = has_bias and affine
    ln = nn.LayerNorm(C, eps=eps, elementwise_affine=affine, bias=has_bias, dtype=torch.float64)
    tensors = {"input": x}
    with torch.no_grad():
        # Random parameters, not the defaults (ones, zeros), so a mix-up shows.
        if affine:
            ln.weight.copy_(f32(1.0 + 0.5 * randn(g, C)) if weight is None else weight)
            tensors["weight"] = ln.weight.detach().clone()
        if has_bias:
            ln.bias.copy_(f32(0.5 * randn(g, C)) if bias is None else bias)
            tensors["bias"] = ln.bias.detach().clone()

    x = x.clone().requires_grad_(backward)
    y = ln(x)
    _, _, rstd = torch.native_layer_norm(x.detach(), [C], None, None, eps)
    tensors["output"] = y.detach()
    cond = condition(x.detach(), rstd, backward)
    options = dict(eps=eps, normalized_shape=C, elementwise_affine=affine, bias=has_bias,
                   info=dict(rows=kind, cond=cond), atol=tolerance(cond, backward),
                   rtol=LAYERNORM_RTOL)
    if not backward:
        return Case(name, tensors, case_meta("layernorm", seed, outputs=["output"], **options))

    dy = f32(randn(g, *shape))
    params = [p for p in (ln.weight, ln.bias) if p is not None]
    grads = torch.autograd.grad(y, [x] + params, dy)
    tensors["grad_output"] = dy
    tensors["grad_input"] = grads[0]
    outputs = ["output", "grad_input"]
    if affine:
        tensors["grad_weight"] = grads[1]
        outputs.append("grad_weight")
    if has_bias:
        tensors["grad_bias"] = grads[2]
        outputs.append("grad_bias")
    return Case(name, tensors, case_meta("layernorm_backward", seed, outputs=outputs, **options))


# Hard rows: where a float32 LayerNorm loses digits because the mean is much
# larger than the spread. These cases keep, beside the float64 truth rounded
# to float32 ("output", as in every case), what nn.LayerNorm computes in
# float32 from the same float32 tensors ("torch_float32_output"), so the test
# can check that C comes closer to the truth than torch's float32 kernel does
# (tests/test_04_layernorm.c, test_layernorm_hard_rows). That tensor is
# torch's own float32 arithmetic, so its bits follow torch's CPU kernel: the
# AVX2 and AVX-512 kernels give the same (checked with ATEN_CPU_CAPABILITY);
# the unvectorised one rounds otherwise, as it already does in the float64
# rstd behind every case's cond, and make golden-check would report both.
HARD_CASES = [   # (name, shape, row kind, eps)
    ("mean1e4", (8, 64), "large_mean", 1e-5),
    ("mean1e4", (4, 1024), "large_mean", 1e-5),
    ("mean1e6", (4, 256), "huge_mean", 1e-5),
    ("near_constant", (8, 512), "near_constant", 1e-12),
]


def hard_rows_case(name, shape, kind, seed, eps):
    """An affine layernorm case of hard rows, with torch's float32 output."""
    case = layernorm_case(name, shape, kind, seed, eps=eps)
    t = case.tensors
    C = shape[-1]
    weight, bias = t["weight"].float(), t["bias"].float()
    t["torch_float32_output"] = nn.functional.layer_norm(t["input"].float(), [C], weight, bias,
                                                         eps)
    return case


def residual_case(name, shape, seed, backward=False):
    g = generator(seed)
    x, fx = f32(randn(g, *shape)), f32(randn(g, *shape))
    if not backward:
        return Case(name, {"input": x, "sublayer_output": fx, "output": x + fx},
                    case_meta("residual", seed, outputs=["output"], **RESIDUAL_TOL))
    x.requires_grad_(True)
    fx.requires_grad_(True)
    dy = f32(randn(g, *shape))
    dx, dfx = torch.autograd.grad(x + fx, [x, fx], dy)
    return Case(name, {"grad_output": dy, "grad_input": dx, "grad_sublayer_output": dfx},
                case_meta("residual_backward", seed,
                          outputs=["grad_input", "grad_sublayer_output"], **RESIDUAL_TOL))


def shape_tag(shape):
    return "x".join(str(d) for d in shape)


def golden_cases():
    cases = []
    # The worked example of the README and the demo: [1, 2, 3, 4], weight 2, bias 1.
    example = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    for backward in (False, True):
        op = "layernorm_backward" if backward else "layernorm"
        cases.append(layernorm_case(f"{op}_example_4", (4,), "example", 400, backward=backward,
                                    x=example, weight=torch.full((4,), 2.0, dtype=torch.float64),
                                    bias=torch.ones(4, dtype=torch.float64)))

    # (name suffix, shape, row kind, eps, affine, bias)
    variants = [
        ("affine", (8,), "normal", 1e-5, True, True),
        ("affine", (2, 3, 8), "normal", 1e-5, True, True),
        ("affine", (4, 16, 64), "normal", 1e-5, True, True),
        ("affine", (2, 2, 3, 16), "scaled", 1e-5, True, True),
        ("plain", (2, 3, 8), "normal", 1e-5, False, False),
        ("plain", (4, 16, 64), "scaled", 1e-5, False, False),
        ("nobias", (2, 3, 8), "normal", 1e-5, True, False),
        ("c1", (3, 1), "normal", 1e-5, True, True),
        ("eps1e-3", (2, 5, 16), "scaled", 1e-3, True, True),
        ("eps1e-12", (2, 5, 16), "scaled", 1e-12, True, True),
        ("large_mean", (4, 32), "large_mean", 1e-5, True, True),
        ("near_constant", (4, 32), "near_constant", 1e-5, True, True),
        ("near_constant_eps1e-12", (4, 32), "near_constant", 1e-12, True, True),
        ("constant", (3, 16), "constant", 1e-5, True, True),
        ("constant_eps1e-12", (3, 16), "constant", 1e-12, True, True),
        ("mixed", (10, 48), "mixed", 1e-5, True, True),
    ]
    for i, (tag, shape, kind, eps, affine, bias) in enumerate(variants):
        for backward in (False, True):
            op = "layernorm_backward" if backward else "layernorm"
            cases.append(layernorm_case(f"{op}_{tag}_{shape_tag(shape)}", shape, kind,
                                        seed=410 + 2 * i + backward, eps=eps, affine=affine,
                                        has_bias=bias, backward=backward))
    for i, (tag, shape, kind, eps) in enumerate(HARD_CASES):
        cases.append(hard_rows_case(f"layernorm_hard_{tag}_{shape_tag(shape)}", shape, kind,
                                    seed=480 + i, eps=eps))
    for i, shape in enumerate([(2, 3, 8), (4, 16, 64)]):
        cases.append(residual_case(f"residual_{shape_tag(shape)}", shape, seed=460 + i))
        cases.append(residual_case(f"residual_backward_{shape_tag(shape)}", shape, seed=470 + i,
                                   backward=True))
    return cases


VERIFY_OPS = ["layernorm", "layernorm_backward", "residual", "residual_backward"]


def random_case(op, seed):
    draw = random.Random(seed)
    if op.startswith("residual"):
        shape = tuple(draw.randint(1, 12) for _ in range(draw.randint(1, 4)))
        return residual_case(op, shape, seed, backward=(op == "residual_backward"))
    rank = draw.randint(1, 4)
    C = draw.choice([1, 2, 3, draw.randint(1, 256), draw.randint(1, 256)])
    shape = tuple(draw.randint(1, 6) for _ in range(rank - 1)) + (C,)
    kind = draw.choice(ROW_KINDS + ["mixed"])
    eps = draw.choice([1e-5, 1e-5, 1e-6, 1e-3, 0.1, 1e-12])
    affine, bias = draw.choice([(True, True), (True, True), (True, False), (False, False)])
    return layernorm_case(op, shape, kind, seed, eps=eps, affine=affine, has_bias=bias,
                          backward=(op == "layernorm_backward"))


def measure(n_cases, seed=0):
    """How the tolerance constants were chosen: runs n_cases random cases of
    each LayerNorm op through the C program and prints, per row kind and
    output, the worst excess = |C - torch| - rtol * |torch| over elements, as
    it is, divided by cond, and divided by the case's atol (the share of the
    tolerance used; must stay below 1)."""
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
        for op in ("layernorm", "layernorm_backward"):
            for _ in range(n_cases):
                case = random_case(op, draw.randrange(2**31))
                write_case(case_in, case)
                subprocess.run([str(root / PROGRAM), "--case", str(case_in), "--out",
                                str(case_out)], check=True)
                got, want = load_file(str(case_out)), load_file(str(case_in))
                cond, atol = float(case.meta["info.cond"]), float(case.meta["atol"])
                for name in case.meta["outputs"].split(","):
                    e, a = want[name].double(), got[name].double()
                    if e.numel() == 0:
                        continue
                    excess = ((a - e).abs() - LAYERNORM_RTOL * e.abs()).max().item()
                    key = (op, case.meta["info.rows"], name)
                    old = worst.get(key, (float("-inf"),) * 3)
                    worst[key] = tuple(max(o, v) for o, v in
                                       zip(old, (excess, excess / cond, excess / atol)))
    print(f"{'op':<20} {'rows':<14} {'output':<12} {'excess':>10} {'/ cond':>10} {'/ atol':>10}")
    for (op, kind, name), (ex, per_cond, used) in sorted(worst.items()):
        print(f"{op:<20} {kind:<14} {name:<12} {ex:10.3g} {per_cond:10.3g} {used:10.3g}")


def measure_hard(n_cases, seed=0):
    """Where the bound of test_layernorm_hard_rows comes from: n_cases random
    hard-row cases (the kinds of HARD_CASES, C from 64 to 1024, affine) run
    through the C program; prints per row kind the worst error of C and of
    torch's float32 nn.LayerNorm against the float64 truth, in units of the
    output's largest value, as the test measures them."""
    import subprocess
    import tempfile
    from pathlib import Path

    from safetensors.torch import load_file

    from reference.common import write_case

    root = Path(__file__).resolve().parent.parent
    draw = random.Random(seed)
    worst = {}
    with tempfile.TemporaryDirectory() as tmp:
        case_in, case_out = Path(tmp) / "in.safetensors", Path(tmp) / "out.safetensors"
        for _ in range(n_cases):
            kind = draw.choice(["large_mean", "huge_mean", "near_constant"])
            eps = draw.choice([1e-5, 1e-12])
            rows = draw.randint(1, 8)
            shape = (rows, draw.choice([64, 128, 256, 512, 1024, draw.randint(64, 1024)]))
            case = hard_rows_case("hard", shape, kind, draw.randrange(2**31), eps)
            write_case(case_in, case)
            subprocess.run([str(root / PROGRAM), "--case", str(case_in), "--out", str(case_out)],
                           check=True)
            want = case.tensors["output"].float().double()
            scale = want.abs().max().item()
            got = load_file(str(case_out))["output"].double()
            torch32 = case.tensors["torch_float32_output"].double()
            errors = ((got - want).abs().max().item() / scale,
                      (torch32 - want).abs().max().item() / scale)
            key = (kind, eps)
            worst[key] = tuple(max(w, e) for w, e in zip(worst.get(key, (0.0, 0.0)), errors))
    print(f"{'rows':<14} {'eps':>6} {'C':>10} {'torch float32':>14}")
    for (kind, eps), (c, t) in sorted(worst.items()):
        print(f"{kind:<14} {eps:>6.0e} {c:>10.3g} {t:>14.3g}")

