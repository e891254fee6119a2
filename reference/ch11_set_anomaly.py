"""Chapter 11 reference: seed 004's set anomaly detection on the 8x8
handwritten digits, the twin of build/11_set_anomaly.

    python -m reference.ch11_set_anomaly export [--check]
        writes reference/data/digits/digits.safetensors from scikit-learn's
        copy of the digits (done once, the file is committed); --check
        regenerates it into a temporary file and compares byte by byte
    python -m reference.ch11_set_anomaly eval MODEL [--sets N] [--min-accuracy A]
        accuracy of a set model (chapter 07's kind "set", written by
        build/11_set_anomaly) on N test sets: the share of sets whose highest
        score is the odd digit's

The task: a set holds 10 images, 9 of one digit and 1 of another; the model
scores each image (SetScorer: no order, no positions) and is trained with a
softmax over the set towards the odd one.

The data: 1797 images of 64 pixels 0..16; an image's features are pixels / 16.
Within each class the images are counted in file order k = 0, 1, 2, ...; the
image is a test image when k % 5 == 4, else a training image. Sets are drawn
with the project's PCG32 (reference/rng.py, the twin of rng.c), see draw_set;
the training sets from (seed 4, stream 1) over the training images, the test
sets from (seed 4, stream 2) over the test images.

The golden case (digits_sets) holds the split (the image indices per split,
class by class, and the counts per class) and the first 8 training and test
sets with their targets, which tests/test_11_set_anomaly.c compares with the
C side.
"""

import argparse
import json
import struct
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open

from reference.common import Case, case_meta
from reference.rng import Pcg32

CHAPTER = "11_set_anomaly"
PROGRAM = "build/11_set_anomaly"
ROOT = Path(__file__).resolve().parent.parent
DIGITS = ROOT / "reference" / "data" / "digits" / "digits.safetensors"
CLASSES, SET_SIZE, PIXELS = 10, 10, 64
TRAIN_RNG, TEST_RNG = (4, 1), (4, 2)          # (seed, stream) of rng_seed
N_TRAIN, N_TEST = 20000, 1000
GOLDEN_SETS = 8


# ---------------------------------------------------------------------------
# The data file, exported once from scikit-learn
# ---------------------------------------------------------------------------

def safetensors_bytes(tensors, metadata):
    """A safetensors file as bytes, always the same for the same input:
    header keys sorted (safetensors' own writer orders metadata differently
    from run to run), tensors in name order, the header padded with spaces
    to a multiple of 8 bytes."""
    dtypes = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {"__metadata__": dict(sorted(metadata.items()))}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = t.numpy().tobytes()                 # little-endian on every platform we run
        header[name] = {"dtype": dtypes[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def export_bytes():
    """digits.safetensors from sklearn.datasets.load_digits(): pixels F32
    (1797, 64) the raw values 0..16 in the dataset's order, labels I64
    (1797,), and metadata on where they come from."""
    import sklearn
    from sklearn.datasets import load_digits
    digits = load_digits()
    pixels = torch.tensor(digits.data, dtype=torch.float32)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    assert pixels.shape == (1797, PIXELS) and pixels.min() >= 0 and pixels.max() <= 16
    assert torch.equal(pixels, pixels.round())
    meta = {"source": "sklearn.datasets.load_digits(): the test set (optdigits.tes) of the "
                      "UCI Optical Recognition of Handwritten Digits data, E. Alpaydin and "
                      "C. Kaynak, 1998",
            "version": f"scikit-learn {sklearn.__version__}",
            "licence": "CC BY 4.0 (UCI); scikit-learn BSD-3-Clause; see README.md and LICENSE"}
    return safetensors_bytes({"pixels": pixels, "labels": labels}, meta)


def export(check):
    """Writes DIGITS, or with check compares a fresh export with it."""
    fresh = export_bytes()
    if not check:
        DIGITS.parent.mkdir(parents=True, exist_ok=True)
        DIGITS.write_bytes(fresh)
        print(f"wrote {DIGITS.relative_to(ROOT)} ({len(fresh)} bytes)")
        return
    with tempfile.TemporaryDirectory() as tmp:     # through a file, as asked of a check
        path = Path(tmp) / "digits.safetensors"
        path.write_bytes(fresh)
        fresh = path.read_bytes()
    if not DIGITS.exists():
        sys.exit(f"{DIGITS.relative_to(ROOT)}: no such file (run python -m "
                 "reference.ch11_set_anomaly export)")
    if fresh != DIGITS.read_bytes():
        sys.exit(f"{DIGITS.relative_to(ROOT)} differs from a fresh export ({len(fresh)} bytes "
                 "fresh): another scikit-learn version? (reference/requirements.txt pins it)")
    print(f"{DIGITS.relative_to(ROOT)}: identical to a fresh export")


# ---------------------------------------------------------------------------
# The split and the sets
# ---------------------------------------------------------------------------

def load_digits_file(path=DIGITS):
    """(pixels (1797, 64) float32, labels (1797,) int64) of digits.safetensors."""
    if not Path(path).exists():
        sys.exit(f"{path}: no such file (python -m reference.ch11_set_anomaly export "
                 "writes it)")
    with safe_open(str(path), framework="pt") as f:
        return f.get_tensor("pixels"), f.get_tensor("labels")


def split_pools(labels):
    """{"train": pool, "test": pool}, pool[c] the indices of the images of
    class c in that split, ascending: the k-th image of a class (file order)
    is a test image when k % 5 == 4."""
    pools = {"train": [[] for _ in range(CLASSES)], "test": [[] for _ in range(CLASSES)]}
    seen = [0] * CLASSES
    for i, c in enumerate(labels.tolist()):
        pools["test" if seen[c] % 5 == 4 else "train"][c].append(i)
        seen[c] += 1
    return pools


def draw_set(rng, pool):
    """One set of SET_SIZE image indices from pool, and the position of the
    odd one: the common digit c, the odd digit o != c, 9 distinct images of
    c (in the order drawn), one of o inserted at a random position. Every
    draw is rng.below (rng_below), in this order."""
    c = rng.below(CLASSES)
    o = rng.below(CLASSES - 1)
    if o >= c:
        o += 1
    members = []
    while len(members) < SET_SIZE - 1:
        j = rng.below(len(pool[c]))
        if j not in members:
            members.append(j)
    odd = rng.below(len(pool[o]))
    p = rng.below(SET_SIZE)
    ids = [pool[c][j] for j in members]
    ids.insert(p, pool[o][odd])
    return ids, p


def draw_sets(pool, n, seed, stream):
    """n sets drawn one after the other from Pcg32(seed, stream), C's
    rng_seed(rng, seed, stream): (sets (n, SET_SIZE) int64, odd (n,) int64)."""
    rng = Pcg32(seed, stream)
    drawn = [draw_set(rng, pool) for _ in range(n)]
    return (torch.tensor([ids for ids, _ in drawn], dtype=torch.int64),
            torch.tensor([p for _, p in drawn], dtype=torch.int64))


def features(pixels, sets):
    """(n, SET_SIZE, 64) float32: pixels / 16 of every image of every set."""
    return pixels[sets] / 16.0


# ---------------------------------------------------------------------------
# Golden case
# ---------------------------------------------------------------------------

def sets_case():
    _, labels = load_digits_file()
    pools = split_pools(labels)
    t = lambda values: torch.tensor(values, dtype=torch.int64)
    train_sets, train_odd = draw_sets(pools["train"], GOLDEN_SETS, *TRAIN_RNG)
    test_sets, test_odd = draw_sets(pools["test"], GOLDEN_SETS, *TEST_RNG)
    tensors = {
        "train_images": t([i for pool in pools["train"] for i in pool]),
        "test_images": t([i for pool in pools["test"] for i in pool]),
        "train_sets": train_sets, "train_odd": train_odd,
        "test_sets": test_sets, "test_odd": test_odd,
        "class_counts": t([[len(p) for p in pools[s]] for s in ("train", "test")]),
    }
    return Case("digits_sets", tensors,
                case_meta("digits_sets", TRAIN_RNG[0], atol=0, rtol=0, outputs=[],
                          data="reference/data/digits/digits.safetensors",
                          train_seed=TRAIN_RNG[0], train_stream=TRAIN_RNG[1],
                          test_seed=TEST_RNG[0], test_stream=TEST_RNG[1], set_size=SET_SIZE))


# The per-set softmax head: a small set model (float64, dropout off) scores
# the first 4 training sets, and the loss is the cross-entropy of the softmax
# over each set's 10 scores against the odd one's position, averaged over the
# sets. The case holds the parameters (exactly float32 values), the features
# (k / 16: exact) and the answers; the C side must give the loss, its
# gradient with respect to the scores and every parameter's gradient. The
# tolerance is the gradient cases' of chapter 07 (float32 sums over 10
# elements, 64 features and one layer of width 16).
HEAD_SETS, HEAD_SEED = 4, 1104


def head_case():
    import torch.nn.functional as F
    from reference.ch07_model import build_model, config_metadata, full_config
    pixels, labels = load_digits_file()
    sets, odd = draw_sets(split_pools(labels)["train"], HEAD_SETS, *TRAIN_RNG)
    cfg = full_config(kind="set", input_dim=PIXELS, d_model=16, nhead=2, dim_feedforward=32,
                      num_encoder_layers=1, max_len=SET_SIZE, final_norm=0, dropout=0.0)
    torch.manual_seed(HEAD_SEED)
    model = build_model(cfg)
    params = {k: v.clone() for k, v in model.state_dict().items()}
    model = model.use_float64()
    feats = features(pixels, sets)
    scores = model(feats.double())
    scores.retain_grad()
    loss = F.cross_entropy(scores, odd)
    loss.backward()
    grads = {f"grad_{n}": p.grad for n, p in model.named_parameters()}
    # Two gradients are exactly 0: generator.bias, and the bias of the last
    # LayerNorm (the generator maps it to the same score for every element),
    # each add one constant to all ten scores of a set, which its softmax
    # does not see. float64 gives them as roundoff, about 1e-17, whose last
    # bits depend on the CPU's vector width (an Intel and an AMD machine gave
    # different ones, and the golden check compares bits): the case holds the
    # exact 0, once the roundoff is checked to be roundoff.
    for name in ("grad_generator.bias", "grad_encoder.layers.0.norm2.bias"):
        assert grads[name].abs().max() < 1e-14, f"{name} is not roundoff of 0"
        grads[name] = torch.zeros_like(grads[name])
    outputs = ["loss", "grad_scores", *grads]
    tensors = {"features": feats, "odd": odd, **params, "loss": loss.detach().reshape(1),
               "grad_scores": scores.grad, **grads}
    return Case("set_head", tensors,
                case_meta("set_head", HEAD_SEED, atol=1e-5, rtol=1e-4, outputs=outputs,
                          **config_metadata(cfg)))


def golden_cases():
    return [sets_case(), head_case()]


VERIFY_OPS = []


def random_case(op, seed):
    raise ValueError(f"chapter 11 draws no random cases (op {op})")


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------

@torch.no_grad()
def accuracy(model, feats, odd, batch=250):
    """(share, correct): sets whose highest score (the first, on ties) is
    at the odd image."""
    correct = 0
    for i in range(0, feats.shape[0], batch):
        scores = model(feats[i:i + batch])                  # (batch, SET_SIZE)
        correct += int((scores.argmax(dim=1) == odd[i:i + batch]).sum())
    return correct / feats.shape[0], correct


def evaluate(args):
    from reference.ch07_model import load_checkpoint
    model, cfg = load_checkpoint(args.model)            # float32, evaluation mode
    if cfg["kind"] != "set" or cfg["input_dim"] != PIXELS or cfg["max_len"] < SET_SIZE:
        sys.exit(f"{args.model}: a {cfg['kind']} model with input_dim {cfg['input_dim']} "
                 f"and max_len {cfg['max_len']}, not a set model of {PIXELS} features and "
                 f"sets of {SET_SIZE}")
    pixels, labels = load_digits_file()
    sets, odd = draw_sets(split_pools(labels)["test"], args.sets, *TEST_RNG)
    share, right = accuracy(model, features(pixels, sets), odd)
    print(f"test sets: {share:.4f} ({right} of {args.sets})")
    if args.min_accuracy is not None and share < args.min_accuracy:
        sys.exit(f"test set accuracy {share:.4f} is below {args.min_accuracy}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    x = sub.add_parser("export", help="write (or --check) reference/data/digits/digits.safetensors")
    x.add_argument("--check", action="store_true",
                   help="compare a fresh export with the committed file, exit 1 if different")
    e = sub.add_parser("eval", help="accuracy of a set model on the test sets")
    e.add_argument("model")
    e.add_argument("--sets", type=int, default=N_TEST, help=f"test sets (default {N_TEST})")
    e.add_argument("--min-accuracy", type=float, help="exit 1 below this accuracy")
    e.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.command == "export":
        export(args.check)
    else:
        torch.set_num_threads(args.threads)
        evaluate(args)


if __name__ == "__main__":
    main()
