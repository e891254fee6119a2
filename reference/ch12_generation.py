"""Chapter 12 reference: the exercises of the generation chapter, namely the
causal next-token loss of a decoder-only language model and one step of
sampling (temperature, top-k, top-p, and the draw by inverse CDF).

Case tensors (see chapters/12_generation/README.md; N batch, T positions,
V vocabulary, R sampling steps, one a row):
    next_token_loss   logits (N, T, V), ids I64 (N, T+1)
                      -> loss F64 (), grad_logits (N, T, V)
    sampling          logits (R, V), u F64 (R,) in [0, 1)
                      -> probs (R, V), ids I64 (R,)
                      metadata temperature, top_k, top_p

The loss is F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1))
with its autograd gradient, in float64 on float32 logits; the loss is stored
in float64 (C returns it in double: summed over a text it is a compressed
size, README.md). The sampling distribution is made with torch ops as the
C function describes it (temperature, softmax, a stable descending sort,
the top-k mask, the top-p mask on the exclusive cumulative sum, the
renormalisation) and the draw with torch.searchsorted on the cumulative sum
in id order.

Decisions a case makes (which ids top-k and top-p keep, which id u picks)
have a margin: every cumulative boundary u falls between is at least MARGIN
(1e-3) away from u, the ids on either side of the top-k cut differ in
logit / temperature by at least MARGIN (or tie exactly, which both sides
break by the lower id), and every share of the mass that top_p is compared
with is at least TOP_P_MARGIN (1e-4) away from top_p. The float32 errors of
the C side (below 1e-5 in a cumulative sum of probabilities, see the
tolerances) can then not flip a decision; a row whose draw falls too close
is drawn again. (top_p has the smaller margin because near 0.9 or 0.95 the
ids of a 256-byte vocabulary have probabilities of a few 1e-3: hardly a row
would keep 1e-3 from every share.)

`python -m reference.ch12_generation --measure N` runs N fresh random cases
of each op through build/12_generation and prints the largest errors, which
is where the tolerances below come from.
"""

import argparse
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from reference.common import Case, case_meta, generator, measure_main, randn

CHAPTER = "12_generation"
PROGRAM = "build/12_generation"
ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------
# Tolerances (TOLERANCES.md, chapter 12; measured with --measure).
#
# The loss: C sums in double from the float32 logits the same terms the
# float64 reference sums, so the loss agrees to about 1e-15 relative (the
# order of the sums differs); the gradient is the double value rounded to
# float32 once, as the reference's float64 gradient is: they differ by one
# float32 rounding at most (1.2e-7 relative). One tolerance holds for both
# outputs of a case, chapter 08's cross-entropy's; the tests hold the loss
# to double accuracy on top of it (test_loss_is_summed_in_double).
LOSS_TOL = dict(atol=1e-12, rtol=2.5e-7)
# Sampling: the probabilities are chapter 00's float32 softmax, its sum over
# the V values of a row in float32, then a renormalisation in double after
# the filters. For the probabilities that matter (above 1e-8, atol below
# that) the float32 sum dominates: measured up to 1.9e-6 relative on rows
# of 256. What no float32 code avoids: the logits are float32 numbers, each
# known to half an ulp (6e-8 |x|), and the temperature magnifies that, so a
# probability is known to about 6e-8 |x| / temperature relative, as
# chapter 04's rows are known to 6e-8 max|x| rstd. A case's condition
#
#     cond = max over rows of max |x| / temperature    (finite logits; 0 at temperature 0)
#
# sets its relative tolerance:
#
#     rtol = a + b * cond      (metadata rtol, with info.cond beside it; atol fixed)
#
# The C code shifts by the maximum before it divides, (x - max) / temperature,
# and loses less; PyTorch's softmax(logits / temperature) in float32 (what
# Hugging Face's samplers do) divides first and is the one that needs b.
# Measured over 3000 random cases each (--measure, and the same cases
# through torch in float32, dividing first): C at most 1.9e-6 relative
# (cond 2), float32 torch 6.1e-6 (cond 84); with the constants below neither
# used more than 0.35 of its tolerance (C 0.35, torch 0.15; a flat rtol of
# 5e-6 would leave torch 0.62 at cond 84 and fail it near cond 150, which
# the random cases reach). The ids must agree exactly (the margins below
# make that possible).
SAMPLING_ATOL = 1e-8
SAMPLING_RTOL = (4e-6, 2.5e-7)         # rtol = a + b * cond


def sampling_tolerance(logits, temperature):
    """(atol, rtol, cond) of a sampling case (see above)."""
    if temperature == 0.0:
        return SAMPLING_ATOL, SAMPLING_RTOL[0], 0.0
    finite = torch.isfinite(logits)
    cond = torch.where(finite, logits.abs(), torch.zeros_like(logits)).max().item() / temperature
    a, b = SAMPLING_RTOL
    return SAMPLING_ATOL, float(f"{a + b * cond:.3g}"), cond


MARGIN = 1e-3
TOP_P_MARGIN = 1e-4


def f32(t):
    """The float32 values C will see, held in float64."""
    return t.float().double()


def as_f32(x):
    """x rounded to float32, as a Python float: the value C will use."""
    return torch.tensor(x, dtype=torch.float32).item()


# ---------------------------------------------------------------------------
# The next-token loss
# ---------------------------------------------------------------------------

def next_token_loss_case(name, N, T, V, seed, scale=1.0, big_rows=(), logits=None, ids=None):
    """F.cross_entropy over the N * T positions, the target of position t
    being ids[:, t + 1]; float64 on float32 logits of N(0, scale^2). Each
    (n, t, s) of big_rows multiplies that position's logits by s (logits of
    1e4 or 1e30: the log-sum-exp must subtract the maximum). logits and ids,
    when given, replace the random ones."""
    g = generator(seed)
    if logits is None:
        logits = randn(g, N, T, V) * scale
        for n, t, s in big_rows:
            logits[n, t] *= s
    logits = f32(logits)
    if ids is None:
        ids = torch.randint(0, V, (N, T + 1), generator=g)
    x = logits.clone().requires_grad_(True)
    loss = F.cross_entropy(x.reshape(-1, V), ids[:, 1:].reshape(-1))
    loss.backward()
    tensors = {"logits": logits.float(), "ids": ids, "loss": loss.detach(),
               "grad_logits": x.grad.float()}
    info = dict(N=N, T=T, V=V, bits_per_token=loss.item() / math.log(2))
    return Case(name, tensors, case_meta("next_token_loss", seed, outputs=["loss", "grad_logits"],
                                         info=info, **LOSS_TOL), keep_float64=True)


# ---------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------

def sampling_probs(logits, temperature, top_k, top_p):
    """(probs (R, V), margin) for float64 logits (R, V) holding float32
    values, with the semantics of sampling_probs in chapters/12_generation/
    sampling.h. temperature and top_p are the float32 values C holds.
    margin is the smallest distance of a decision from its boundary, in
    units of its own margin (1: exactly MARGIN or TOP_P_MARGIN; inf when the
    settings decide nothing)."""
    R, V = logits.shape
    if temperature == 0.0:
        best = logits.argmax(dim=-1)                      # the first maximum
        return F.one_hot(best, V).double(), math.inf
    p = torch.softmax(logits / temperature, dim=-1)
    sorted_p, order = torch.sort(p, dim=-1, descending=True, stable=True)
    keep = torch.ones_like(sorted_p, dtype=torch.bool)
    margin = math.inf
    k = top_k if 0 < top_k < V else V
    if k < V:
        keep[:, k:] = False
        # The ids either side of the cut: apart in logit / temperature, or
        # tied exactly (then the lower id ranks first on both sides). Below
        # the underflow of p to 0 nothing is decided: those ids are 0 anyway.
        x = torch.gather(logits, 1, order) / temperature
        for r in range(R):
            if sorted_p[r, k] > 0 and x[r, k - 1] != x[r, k]:
                margin = min(margin, (x[r, k - 1] - x[r, k]).item() / MARGIN)
    if top_p < 1.0:
        kept = sorted_p * keep
        mass = kept.sum(dim=-1, keepdim=True)
        before = torch.cumsum(kept, dim=-1) - kept         # the mass before each id
        keep &= before < top_p * mass
        # Every comparison of a kept-by-top-k id with top_p, as a share of the mass.
        share = (before / mass - top_p).abs()[:, :k]
        margin = min(margin, share.min().item() / TOP_P_MARGIN)
    kept = sorted_p * keep
    kept = kept / kept.sum(dim=-1, keepdim=True)
    return torch.zeros_like(p).scatter(1, order, kept), margin


def sampling_pick(probs, u):
    """The ids drawn by inverse CDF (R,) and the smallest distance of a u
    from a cumulative boundary of the ids it could pick."""
    cdf = torch.cumsum(probs, dim=-1)
    ids = torch.searchsorted(cdf, u.unsqueeze(1), right=True).squeeze(1)
    last = (probs > 0).double().cumsum(-1).argmax(-1)      # the last id with probs > 0
    ids = torch.where(ids >= probs.shape[1], last, ids)
    positive = probs > 0
    margin = (cdf - u.unsqueeze(1)).abs()[positive].min().item()
    return ids, margin


def draw_u(g, probs_row):
    """A u in [0, 1) at least MARGIN from every cumulative boundary of the
    row: a gap between boundaries is chosen by its width, u uniformly inside
    it; None if there is no gap."""
    cdf = torch.cumsum(probs_row, dim=0)[probs_row > 0].tolist()
    edges = sorted(set(cdf + [1.0]))
    gaps, lo = [], 0.0
    for e in edges:
        hi = e - MARGIN
        if hi > lo:
            gaps.append((lo, hi))
        lo = e + MARGIN
    if not gaps:
        return None
    # A point of the gaps laid end to end, and where it falls.
    w = sum(hi - lo for lo, hi in gaps) * torch.rand(1, generator=g, dtype=torch.float64).item()
    for lo, hi in gaps:
        if w < hi - lo:
            return lo + w
        w -= hi - lo
    return gaps[-1][1]


def draw_logits(g, V, scale, integer):
    if integer:       # small integers: ties, broken by the lower id
        return torch.randint(-2, 3, (V,), generator=g).double()
    return f32(randn(g, V) * scale)


def sampling_case(name, R, V, seed, temperature=1.0, top_k=0, top_p=1.0, scale=2.0,
                  integer=False, banned=0.0, logits=None, u=None):
    """R sampling steps of one setting. Each row's logits are drawn again
    (up to 1000 times) until every decision it makes has its margin; then
    its u, away from every boundary. banned: the share of ids whose logit is
    -inf (never the whole row). logits and u, when given, replace the random
    ones (and must have their margins)."""
    g = generator(seed)
    temperature, top_p = as_f32(temperature), as_f32(top_p)
    rows, us = [], []
    for r in range(R):
        for attempt in range(1000):
            if logits is not None:
                x = f32(logits[r])
            else:
                x = draw_logits(g, V, scale, integer)
                ban = torch.rand(V, generator=g) < banned
                ban[torch.randint(0, V, (1,), generator=g)] = False
                x[ban] = -math.inf
            probs, margin = sampling_probs(x.unsqueeze(0), temperature, top_k, top_p)
            w = draw_u(g, probs[0]) if u is None else float(u[r])
            if margin >= 1 and w is not None:
                break
            assert logits is None, f"{name}: row {r} of the given logits decides within its margin"
        else:
            raise RuntimeError(f"{name}: no row of {V} logits with its margins in 1000 draws")
        rows.append(x)
        us.append(w)
    x = torch.stack(rows)
    u = torch.tensor(us, dtype=torch.float64)
    probs, margin = sampling_probs(x, temperature, top_k, top_p)
    ids, u_margin = sampling_pick(probs, u)
    assert margin >= 1 and u_margin >= MARGIN, (name, margin, u_margin)
    tensors = {"logits": x.float(), "u": u, "probs": probs.float(), "ids": ids}
    atol, rtol, cond = sampling_tolerance(x, temperature)
    info = dict(R=R, V=V, cond=cond, u_margin=u_margin)
    return Case(name, tensors, case_meta("sampling", seed, atol=atol, rtol=rtol,
                                         outputs=["probs", "ids"], info=info,
                                         temperature=temperature, top_k=top_k, top_p=top_p),
                keep_float64=True)


# ---------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------

# The worked examples of the README. The loss: one sequence of three ids
# [0, 2, 1] over V = 3, the logits the logs of the probabilities
# (0.2, 0.3, 0.5) and (0.5, 0.25, 0.25): the targets 2 and 1 get 0.5 and
# 0.25, 1 and 2 bits. Sampling: four ids with probabilities
# (0.15, 0.5, 0.1, 0.25) at temperature 1, and u = 0.1, 0.5, 0.9.
EXAMPLE_LOSS_LOGITS = torch.tensor([[[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]]],
                                   dtype=torch.float64).log()
EXAMPLE_LOSS_IDS = torch.tensor([[0, 2, 1]])
EXAMPLE_SAMPLING_LOGITS = torch.tensor([0.15, 0.5, 0.1, 0.25], dtype=torch.float64).log()
EXAMPLE_U = [0.1, 0.5, 0.9]


def golden_cases():
    cases = [next_token_loss_case("next_token_loss_example", 1, 2, 3, 1200,
                                  logits=EXAMPLE_LOSS_LOGITS, ids=EXAMPLE_LOSS_IDS)]
    # tag, N, T, V, scale, big rows (n, t, factor)
    loss_configs = [
        ("N1_T1_V2", 1, 1, 2, 1.0, ()),
        ("N1_T1_V256", 1, 1, 256, 1.0, ()),
        ("N3_T1_V10", 3, 1, 10, 1.0, ()),
        ("N1_T12_V7", 1, 12, 7, 2.0, ()),
        ("N2_T8_V5", 2, 8, 5, 1.0, ()),
        ("N1_T5_V1", 1, 5, 1, 1.0, ()),
        ("N2_T3_V16_large", 2, 3, 16, 1.0, ((0, 0, 1e4), (1, 2, 1e30))),
        ("N2_T16_V256_confident", 2, 16, 256, 10.0, ()),
        ("N4_T32_V256", 4, 32, 256, 1.0, ()),
    ]
    for i, (tag, N, T, V, scale, big) in enumerate(loss_configs):
        cases.append(next_token_loss_case(f"next_token_loss_{tag}", N, T, V, 1210 + i, scale, big))

    # The README's sampling example, one case per setting it works out.
    x = EXAMPLE_SAMPLING_LOGITS.expand(3, 4)
    for j, (tag, t, k, p) in enumerate([("t1", 1.0, 0, 1.0), ("t0", 0.0, 0, 1.0),
                                        ("t2", 2.0, 0, 1.0), ("t0.5", 0.5, 0, 1.0),
                                        ("topk2", 1.0, 2, 1.0), ("topp0.8", 1.0, 0, 0.8),
                                        ("topp0.7", 1.0, 0, 0.7)]):
        cases.append(sampling_case(f"sampling_example_{tag}", 3, 4, 1240 + j, t, k, p,
                                   logits=x, u=EXAMPLE_U))
    # tag, R, V, temperature, top_k, top_p, scale, integer logits, banned share
    sampling_configs = [
        ("t0_V10", 8, 10, 0.0, 0, 1.0, 2.0, False, 0.0),
        ("t0_ties_V6", 8, 6, 0.0, 0, 1.0, 1.0, True, 0.0),
        ("t0.5_V10", 8, 10, 0.5, 0, 1.0, 2.0, False, 0.0),
        ("t1_V10", 8, 10, 1.0, 0, 1.0, 2.0, False, 0.0),
        ("t2_V10", 8, 10, 2.0, 0, 1.0, 2.0, False, 0.0),
        ("topk1_V10", 8, 10, 1.0, 1, 1.0, 2.0, False, 0.0),
        ("topk5_V10", 8, 10, 1.0, 5, 1.0, 2.0, False, 0.0),
        ("topkV_V10", 8, 10, 1.0, 10, 1.0, 2.0, False, 0.0),
        ("topk3_ties_V8", 8, 8, 1.0, 3, 1.0, 1.0, True, 0.0),
        ("topp0.5_V10", 8, 10, 1.0, 0, 0.5, 2.0, False, 0.0),
        ("topp0.9_V10", 8, 10, 1.0, 0, 0.9, 2.0, False, 0.0),
        ("topp1_V10", 8, 10, 1.0, 0, 1.0, 2.0, False, 0.0),
        ("topp0.9_ties_V8", 8, 8, 1.0, 0, 0.9, 1.0, True, 0.0),
        ("t0.7_topk5_topp0.9_V10", 8, 10, 0.7, 5, 0.9, 2.0, False, 0.0),
        ("t2_topk3_topp0.5_V10", 8, 10, 2.0, 3, 0.5, 2.0, False, 0.0),
        ("t0_topk5_topp0.5_V10", 8, 10, 0.0, 5, 0.5, 2.0, False, 0.0),
        ("banned_t1_topk4_V12", 8, 12, 1.0, 4, 1.0, 2.0, False, 0.4),
        ("V1", 4, 1, 1.0, 0, 0.5, 1.0, False, 0.0),
        ("t1_V256", 8, 256, 1.0, 0, 1.0, 3.0, False, 0.0),
        ("t0.5_V256", 8, 256, 0.5, 0, 1.0, 3.0, False, 0.0),
        ("topk40_V256", 8, 256, 1.0, 40, 1.0, 3.0, False, 0.0),
        ("topp0.9_V256", 8, 256, 1.0, 0, 0.9, 3.0, False, 0.0),
        ("t0.8_topk40_topp0.95_V256", 8, 256, 0.8, 40, 0.95, 3.0, False, 0.0),
    ]
    for i, (tag, R, V, t, k, p, scale, ties, banned) in enumerate(sampling_configs):
        cases.append(sampling_case(f"sampling_{tag}", R, V, 1260 + i, t, k, p, scale, ties,
                                   banned))
    return cases


VERIFY_OPS = ["next_token_loss", "sampling"]


def random_case(op, seed):
    draw = random.Random(seed)
    if op == "next_token_loss":
        N, T = draw.randint(1, 4), draw.choice([1, draw.randint(1, 8), draw.randint(1, 64)])
        V = draw.choice([1, 2, draw.randint(2, 64), 256, draw.randint(2, 1000)])
        scale = draw.choice([1.0, 3.0, 10.0, 1e3])
        big = [(draw.randrange(N), draw.randrange(T), 1e4)] if draw.random() < 0.2 else []
        return next_token_loss_case(op, N, T, V, seed, scale, big)
    if op == "sampling":
        R, V = draw.randint(1, 8), draw.choice([1, 2, draw.randint(2, 64), 256])
        temperature = draw.choice([0.0, 0.5, 0.7, 1.0, 1.0, 2.0, round(draw.uniform(0.1, 3), 3)])
        top_k = draw.choice([0, 0, 1, draw.randint(1, V), V, V + 5])
        top_p = draw.choice([1.0, 1.0, 0.5, 0.9, 0.95, round(draw.uniform(0.05, 0.99), 3)])
        scale = draw.choice([1.0, 2.0, 5.0])
        return sampling_case(op, R, V, seed, temperature, top_k, top_p, scale,
                             integer=draw.random() < 0.15, banned=draw.choice([0.0, 0.0, 0.3]))
    raise ValueError(f"unknown op {op}")


# ---------------------------------------------------------------------------
# The task: the language model of chapters/12_generation/lm_text.h in PyTorch
# ---------------------------------------------------------------------------

def streams(train_reviews=-1, test_reviews=0):
    """(train, val, test) as lm_text_read makes them: chapter 10's split,
    "<br />" to a space and the case kept, each part b"\\n" + the reviews
    joined by b"\\n"; every 20th training review validates. train_reviews
    -1: no training streams, 0: all; test_reviews 0: all."""
    from reference.ch10_classification import DATA, read_reviews, split
    train, test = split(read_reviews(DATA / "imdb.tsv", clean_text=unbreak))
    if test_reviews:
        test = test[:test_reviews]
    train = [] if train_reviews < 0 else train[:train_reviews or len(train)]

    def stream(part):
        return b"\n" + b"\n".join(text for _, text, _ in part) if part else b""
    return (stream([r for i, r in enumerate(train) if i % 20 != 19]),
            stream([r for i, r in enumerate(train) if i % 20 == 19]), stream(test))


def unbreak(text):
    """review.c's review_unbreak: "<br />" to a space, nothing else."""
    return text.replace(b"<br />", b" ")


def byte_ids(stream):
    """The bytes of stream as an int64 tensor of ids 0..255."""
    return torch.frombuffer(bytearray(stream), dtype=torch.uint8).to(torch.int64)


def windows(L, S, R):
    """lm_bits's windows over L predicted bytes: [(start, first scored index)]."""
    out, scored = [(0, 0)], S
    while scored < L:
        start = min(scored + R - S, L - S)
        out.append((start, scored - start))
        scored = start + S
    return out


@torch.no_grad()
def bits(model, stream, R=0, batch=32):
    """(total bits, predicted bytes) of model on stream, as lm_bits counts them."""
    L = len(stream) - 1
    S = min(model.cfg["max_len"], L)
    R = R or (model.cfg["max_len"] + 1) // 2
    data = byte_ids(stream)
    wins = windows(L, S, R)
    total = 0.0
    for i in range(0, len(wins), batch):
        part = wins[i:i + batch]
        ids = torch.stack([data[s:s + S + 1] for s, _ in part])
        logp = F.log_softmax(model(ids[:, :S]).double(), dim=-1)
        nll = -logp.gather(-1, ids[:, 1:, None])[..., 0]          # (n, S) nats
        for row, (_, first) in enumerate(part):
            total += float(nll[row, first:].sum())
    return total / math.log(2.0), L


def compressors(stream):
    """Bits per byte of gzip -9, bzip2 -9 and xz -9e on the predicted bytes
    (the stream without its leading newline: the reviews, one per line)."""
    import bz2
    import lzma
    import zlib
    text = stream[1:]
    sizes = {"gzip -9": len(zlib.compress(text, 9)), "bzip2 -9": len(bz2.compress(text, 9)),
             "xz -9e": len(lzma.compress(text, preset=9 | lzma.PRESET_EXTREME))}
    return {k: 8.0 * v / len(text) for k, v in sizes.items()}


COMPRESSORS_DAT = ROOT / "plots" / "generation_compressors.dat"


def compressors_command(args):
    """The compressors command: their bits per byte on the 5,000 test
    reviews, printed, and written to (or with --check, compared with)
    plots/generation_compressors.dat, the horizontal lines of the figure."""
    _, _, test = streams(-1, 0)
    rates = compressors(test)
    text = "# bits per byte of the 5,000 IMDb test reviews (%d bytes, one review a line),\n" \
        "# written by python -m reference.ch12_generation compressors\n" % (len(test) - 1)
    text += "".join(f"{name},{rate:.4f}\n" for name, rate in rates.items())
    print(text, end="")
    if args.check:
        if COMPRESSORS_DAT.read_text() != text:
            sys.exit(f"{COMPRESSORS_DAT} is not what the compressors give now (rewrite it "
                     "with python -m reference.ch12_generation compressors)")
    else:
        COMPRESSORS_DAT.write_text(text)


def evaluate(args):
    """The eval command: bits per byte of MODEL on the test reviews in
    PyTorch, with the compressors on the same bytes (and with --c, the C
    program's figure beside it)."""
    import json
    import subprocess

    from reference.ch07_model import load_checkpoint
    model, cfg = load_checkpoint(args.model)
    if cfg["kind"] != "lm" or cfg["tgt_vocab"] != 256:
        raise SystemExit(f"{args.model}: not a byte-level language model ({cfg['kind']}, "
                         f"{cfg['tgt_vocab']} ids)")
    _, _, test = streams(-1, args.test_reviews)
    rows = []
    if args.c:
        cmd = [PROGRAM, "--eval", str(args.model), "--test-reviews", str(args.test_reviews),
               "--stride", str(args.stride)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
        c = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(("the model, in C", c["bits_per_byte"]))
    started = time.time()
    total, n = bits(model, test, args.stride)
    rows.append(("the model, in PyTorch", total / n))
    seconds = time.time() - started
    rows += list(compressors(test).items())
    reviews = test.count(b"\n")
    print(f"{reviews} test reviews, {n} bytes (PyTorch: {seconds:.0f} s)")
    print("| | bits per byte |\n| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value:.4f} |")
    if args.max_bpb is not None and total / n > args.max_bpb:
        sys.exit(f"PyTorch: {total / n:.4f} bits per byte is above {args.max_bpb}")


def train(args):
    """The train command: the recipe of build/12_generation --train in
    PyTorch (the same model, data, batches of windows, AdamW, warm-up and
    cosine schedule, clipping), stopped after --minutes of wall time; the
    validation bits per byte every --validate-every steps, as CSV."""
    from reference.ch07_model import build_model, full_config, save_checkpoint
    from reference.ch08_training import CosineWarmupScheduler
    torch.manual_seed(args.seed)
    train_s, val_s, _ = streams(0, -1)
    S, B = args.context, args.batch_size
    cfg = full_config(kind="lm", src_vocab=256, d_model=args.d_model, nhead=args.heads,
                      dim_feedforward=args.ffn, num_encoder_layers=args.layers, max_len=S,
                      learned_pos=1, final_norm=1, norm_first=1, pad_id=-1, dropout=0.0)
    model = build_model(cfg)
    data = byte_ids(train_s)
    n = (len(train_s) - 1) // S
    per_epoch = n // B
    total = per_epoch * args.epochs
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = CosineWarmupScheduler(opt, args.warmup, total)
    val = byte_ids(val_s)
    n_val = (len(val_s) - 1) // S
    val_x = torch.stack([val[i * S:i * S + S + 1] for i in range(n_val)])

    def validate():
        model.eval()
        with torch.no_grad():
            loss = sum(float(F.cross_entropy(model(x[:, :S]).reshape(-1, 256), x[:, 1:].reshape(-1),
                                             reduction="sum"))
                       for x in val_x.split(B))
        model.train()
        return loss / (n_val * S) / math.log(2.0)

    started, step = time.time(), 0
    print("step,seconds,val_bits_per_byte", flush=True)
    for epoch in range(args.epochs):
        order = torch.randperm(n)
        for k in range(per_epoch):
            idx = order[k * B:(k + 1) * B]
            x = torch.stack([data[i * S:i * S + S + 1] for i in idx.tolist()])
            loss = F.cross_entropy(model(x[:, :S]).reshape(-1, 256), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            out_of_time = time.time() - started > args.minutes * 60
            if step % args.validate_every == 0 or step == total or out_of_time:
                print(f"{step},{time.time() - started:.1f},{validate():.4f}", flush=True)
            if out_of_time:
                break
        else:
            continue
        break
    if args.out:
        save_checkpoint(model, cfg, args.out)


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("eval", "train", "compressors"):
        return measure_main(sys.modules[__name__])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="bits per byte of a language model on the test reviews")
    e.add_argument("model")
    e.add_argument("--test-reviews", type=int, default=0, help="the first N (0: all 5,000)")
    e.add_argument("--stride", type=int, default=0, help="bytes between windows (0: half the "
                   "context)")
    e.add_argument("--max-bpb", type=float, help="exit 1 above this many bits per byte")
    e.add_argument("--c", action="store_true", help="run build/12_generation --eval too")
    e.add_argument("--threads", type=int, default=2)
    c = sub.add_parser("compressors", help="gzip, bzip2 and xz on the test reviews, into "
                       "plots/generation_compressors.dat")
    c.add_argument("--check", action="store_true", help="compare with the committed file")
    t = sub.add_parser("train", help="the C recipe in PyTorch, for --minutes of wall time")
    for name, kind, default in (("--context", int, 256), ("--batch-size", int, 16),
                                ("--d-model", int, 128), ("--heads", int, 4),
                                ("--layers", int, 4), ("--ffn", int, 512),
                                ("--epochs", int, 2), ("--lr", float, 2e-3),
                                ("--warmup", int, 200), ("--seed", int, 0),
                                ("--validate-every", int, 1500), ("--minutes", float, 60.0),
                                ("--threads", int, 2)):
        t.add_argument(name, type=kind, default=default)
    t.add_argument("--out", help="save the model here")
    args = parser.parse_args()
    if args.command == "compressors":
        compressors_command(args)
        return 0
    torch.set_num_threads(args.threads)
    evaluate(args) if args.command == "eval" else train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
