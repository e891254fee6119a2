"""Chapter 00 reference: matmul in its three forms, softmax and its backward,
the RNG stream, and a file of every dtype written by PyTorch's safetensors.

Case tensors (see chapters/00_foundations/README.md):
    matmul_nt / matmul_nn / matmul_tn   a, b -> c
    linear                              input, weight, bias -> output   (nn.Linear names)
    linear_backward                     + grad_output -> grad_input, grad_weight, grad_bias
    softmax                             input -> output
    softmax_backward                    output, grad_output -> grad_input
    rng_stream                          -> u32, uniform, normal  (options seed, stream)
    dtypes                              one tensor of each dtype, read back by the test
"""

import math
import random

import torch

from reference.common import Case, case_meta, generator, randn
from reference.rng import Pcg32

CHAPTER = "00_foundations"
PROGRAM = "build/00_foundations"

# float32 has a 24-bit significand (eps 6e-8). A dot product of K terms of
# size ~1 carries an error growing like sqrt(K) * eps * |terms|; these
# tolerances leave room for K up to a few hundred.
MATMUL_TOL = dict(atol=2e-5, rtol=1e-5)
SOFTMAX_TOL = dict(atol=1e-6, rtol=1e-5)


def matmul_case(name, op, M, N, K, seed):
    g = generator(seed)
    a_shape = {"matmul_nt": (M, K), "matmul_nn": (M, K), "matmul_tn": (K, M)}[op]
    b_shape = {"matmul_nt": (N, K), "matmul_nn": (K, N), "matmul_tn": (K, N)}[op]
    a = randn(g, *a_shape).float().double()      # the float32 values C will see
    b = randn(g, *b_shape).float().double()
    if op == "matmul_nt":
        c = a @ b.T
    elif op == "matmul_nn":
        c = a @ b
    else:
        c = a.T @ b
    return Case(name, {"a": a, "b": b, "c": c},
                case_meta(op, seed, outputs=["c"], info=dict(M=M, N=N, K=K), **MATMUL_TOL))


def linear_case(name, M, K, N, bias, seed, backward=False):
    """nn.Linear(K, N) on M rows, in float64; parameters under state_dict names."""
    g = generator(seed)
    layer = torch.nn.Linear(K, N, bias=bias, dtype=torch.float64)
    with torch.no_grad():                 # float32-representable values, as C sees them
        layer.weight.copy_(randn(g, N, K).float().double() / math.sqrt(K))
        if bias:
            layer.bias.copy_(randn(g, N).float().double())
    x = randn(g, M, K).float().double().requires_grad_(True)
    y = layer(x)
    tensors = {"input": x, **layer.state_dict(), "output": y}
    outputs = ["output"]
    if backward:
        dy = randn(g, M, N).float().double()
        y.backward(dy)
        tensors.update(grad_output=dy, grad_input=x.grad, grad_weight=layer.weight.grad)
        outputs += ["grad_input", "grad_weight"]
        if bias:
            tensors["grad_bias"] = layer.bias.grad
            outputs.append("grad_bias")
    op = "linear_backward" if backward else "linear"
    return Case(name, tensors, case_meta(op, seed, outputs=outputs, info=dict(bias=bias), **MATMUL_TOL))


def softmax_inputs(g, rows, cols, kind):
    x = randn(g, rows, cols)
    if kind == "large":                 # exp() of these overflows without the max shift
        x = x * 1000.0 + 5000.0
    elif kind == "masked":              # some -inf entries, never a whole row
        drop = torch.rand(rows, cols, generator=g, dtype=torch.float64) < 0.4
        drop[:, 0] = False
        x = x.masked_fill(drop, -math.inf)
    elif kind == "peaked":              # one entry dominates: probabilities near 0 and 1
        x = x * 30.0
    return x.float().double()


def softmax_case(name, rows, cols, kind, seed, backward=False):
    g = generator(seed)
    x = softmax_inputs(g, rows, cols, kind).requires_grad_(True)
    y = torch.softmax(x, dim=-1)
    if not backward:
        return Case(name, {"input": x, "output": y},
                    case_meta("softmax", seed, outputs=["output"], info=dict(kind=kind), **SOFTMAX_TOL))
    dy = randn(g, rows, cols).float().double()
    (dx,) = torch.autograd.grad(y, x, dy)
    # The program gets the float32 output, as a layer's backward would.
    return Case(name, {"output": y.float().double(), "grad_output": dy, "grad_input": dx},
                case_meta("softmax_backward", seed, outputs=["grad_input"], info=dict(kind=kind),
                          **SOFTMAX_TOL))


def rng_case(name, seed, stream, n=64):
    rng = Pcg32(seed, stream)
    u32 = torch.tensor([rng.u32() for _ in range(n)], dtype=torch.int64)
    uniform = torch.tensor([rng.uniform() for _ in range(n)], dtype=torch.float64)
    normal = torch.tensor([rng.normal() for _ in range(n)], dtype=torch.float64)
    below = torch.tensor([rng.below(10) for _ in range(n)], dtype=torch.int64)
    # u32 and uniform are exact; normal passes through float32 log/sqrt/cos in C.
    return Case(name, {"u32": u32, "uniform": uniform, "normal": normal, "below10": below},
                case_meta("rng_stream", 0, outputs=["u32", "uniform", "normal", "below10"],
                          rng_seed=seed, rng_stream=stream, count=n, atol=1e-5, rtol=1e-5))


def dtypes_case():
    """One tensor per dtype the reader supports, with values the test knows by
    formula (element i of the flattened tensor holds i, or i % 2 for BOOL)."""
    shape = (2, 3, 4)
    index = torch.arange(24).reshape(shape)
    tensors = {
        "f32": index.to(torch.float32), "f64": index.to(torch.float64),
        "i64": index.to(torch.int64), "i32": index.to(torch.int32),
        "u8": index.to(torch.uint8), "bool": (index % 2).to(torch.bool),
        "scalar": torch.tensor(3.5, dtype=torch.float32),
        "empty": torch.zeros(0, 5, dtype=torch.float32),
    }
    return Case("dtypes", tensors, case_meta("dtypes", 0, outputs=[], atol=0.0, rtol=0.0,
                                             note="element i holds i"), keep_float64=True)


def golden_cases():
    cases = []
    # The last two reach every path of the blocked product: M >= 256 (B
    # packed), N >= 256 (A^T's slivers packed), K > 256 (two blocks of k),
    # M % 6 and N % 16 != 0 (short edge tiles), N > 256 (several column blocks).
    shapes = [(1, 1, 1), (3, 5, 4), (7, 2, 9), (16, 16, 16), (33, 17, 65), (64, 96, 80),
              (2, 128, 256), (5, 1, 300), (301, 260, 270), (7, 2100, 9)]
    for op in ("matmul_nt", "matmul_nn", "matmul_tn"):
        for i, (M, N, K) in enumerate(shapes):
            cases.append(matmul_case(f"{op}_{M}x{N}x{K}", op, M, N, K, seed=100 + i))
    for i, (M, K, N, bias) in enumerate([(1, 1, 1, True), (5, 8, 3, True), (32, 64, 48, True),
                                         (7, 20, 9, False), (128, 32, 64, True)]):
        tag = f"{M}x{K}x{N}{'' if bias else '_nobias'}"
        cases.append(linear_case(f"linear_{tag}", M, K, N, bias, seed=400 + i))
        cases.append(linear_case(f"linear_backward_{tag}", M, K, N, bias, seed=500 + i,
                                 backward=True))
    for kind, rows, cols in [("normal", 4, 7), ("normal", 1, 1), ("normal", 16, 513),
                             ("large", 5, 9), ("masked", 8, 12), ("peaked", 6, 10)]:
        cases.append(softmax_case(f"softmax_{kind}_{rows}x{cols}", rows, cols, kind, seed=200 + cols))
        cases.append(softmax_case(f"softmax_backward_{kind}_{rows}x{cols}", rows, cols, kind,
                                  seed=300 + cols, backward=True))
    cases.append(rng_case("rng_seed42", 42, 0))
    cases.append(rng_case("rng_seed7_stream3", 7, 3))
    cases.append(dtypes_case())
    return cases


VERIFY_OPS = ["matmul_nt", "matmul_nn", "matmul_tn", "linear", "linear_backward", "softmax",
              "softmax_backward"]


def random_case(op, seed):
    draw = random.Random(seed)
    if op.startswith("matmul"):
        M, N, K = (draw.randint(1, 70) for _ in range(3))
        return matmul_case(op, op, M, N, K, seed)
    if op.startswith("linear"):
        M, K, N = (draw.randint(1, 70) for _ in range(3))
        return linear_case(op, M, K, N, draw.random() < 0.7, seed, backward=(op == "linear_backward"))
    kind = draw.choice(["normal", "large", "masked", "peaked"])
    rows, cols = draw.randint(1, 40), draw.randint(1, 300)
    return softmax_case(op, rows, cols, kind, seed, backward=(op == "softmax_backward"))
