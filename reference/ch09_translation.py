"""Chapter 09 reference: seed 002's Taylor-series task in PyTorch, the twin of
build/09_translation.

    python -m reference.ch09_translation eval MODEL [--beam K]
        greedy (or beam) exact match of MODEL (written by C's model_save, or
        by `train` here) on the 750 test pairs, decoded by PyTorch
    python -m reference.ch09_translation train --epochs E --out MODEL [--log CSV]
                                               [--eval-every K] [--minutes MIN]
        the C program's recipe in PyTorch (same model, Adam, cosine schedule
        with warm-up, batch 32, dropout 0.1, length bucketing; --lr, --warmup,
        --dropout as the C program's), for the side-by-side runs of the
        chapter: the validation exact match every K epochs, and with --minutes
        the run stops at the end of the first epoch past that wall time (the
        schedule still spans E epochs) and measures the test pairs there

The data is read and cut exactly as chapters/09_translation/pairs.c does it:
each line source|target, each side tokenized by chapter 01's Taylor
tokenizer, pairs with more than 20 source or 83 target tokens skipped, rows
framed <sos> tokens <eos> <pad>.. to 22 and 85 ids, then in file order
11,000 train, 100 validate and the rest (750) test.

The golden case (taylor_split) holds what that gives: the counts and the first
and last pair of each split, which tests/test_09_translation.c compares with
the C reader.
"""

import argparse
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from reference.ch01_tokenization import PAD, SOS, EOS, bracket, taylor_encode, taylor_vocab
from reference.common import Case, case_meta

CHAPTER = "09_translation"
PROGRAM = "build/09_translation"
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "reference" / "data" / "taylor" / "seq2seq_series_2terms.txt"
MAX_SRC, MAX_TGT = 20, 83             # tokens; 22 and 85 with <sos> and <eos>
TRAIN, VAL = 11000, 100               # then the test: the rest


def read_pairs(path=DATA, max_src=MAX_SRC, max_tgt=MAX_TGT):
    """(src (n, max_src + 2), tgt (n, max_tgt + 2), lines (n,), skipped), int64."""
    source, target = taylor_vocab("source"), taylor_vocab("target")
    src, tgt, lines, skipped = [], [], [], 0
    text = path.read_text()
    for number, line in enumerate(text.split("\n"), start=1):
        if number == text.count("\n") + 1 and line == "":
            break                                  # the newline that ends the last line
        a, b = line.rstrip("\r").split("|")
        s, t = taylor_encode(source, a), taylor_encode(target, b)
        if len(s) > max_src or len(t) > max_tgt:
            skipped += 1
            continue
        src.append(bracket(s, max_src + 2))
        tgt.append(bracket(t, max_tgt + 2))
        lines.append(number)
    as_tensor = lambda rows: torch.tensor(rows, dtype=torch.int64)
    return as_tensor(src), as_tensor(tgt), as_tensor(lines), skipped


def splits():
    """{"train": (src, tgt), "val": ..., "test": ...} in the seed's cut."""
    src, tgt, _, _ = read_pairs()
    cut = {"train": slice(0, TRAIN), "val": slice(TRAIN, TRAIN + VAL),
           "test": slice(TRAIN + VAL, None)}
    return {name: (src[s], tgt[s]) for name, s in cut.items()}


# ---------------------------------------------------------------------------
# Golden case
# ---------------------------------------------------------------------------

def split_case():
    src, tgt, lines, skipped = read_pairs()
    n = src.shape[0]
    bounds = {"train": (0, TRAIN), "val": (TRAIN, TRAIN + VAL), "test": (TRAIN + VAL, n)}
    tensors = {"counts": torch.tensor([TRAIN, VAL, n - TRAIN - VAL, skipped])}
    for name, (lo, hi) in bounds.items():
        for which, i in (("first", lo), ("last", hi - 1)):
            tensors[f"{name}_{which}_src"] = src[i]
            tensors[f"{name}_{which}_tgt"] = tgt[i]
            tensors[f"{name}_{which}_line"] = lines[i]
    return Case("taylor_split", tensors,
                case_meta("taylor_split", 0, atol=0, rtol=0, outputs=[], max_src=MAX_SRC,
                          max_tgt=MAX_TGT, train_size=TRAIN, val_size=VAL,
                          data="reference/data/taylor/seq2seq_series_2terms.txt"))


def golden_cases():
    return [split_case()]


VERIFY_OPS = []


def random_case(op, seed):
    raise ValueError(f"chapter 09 draws no random cases (op {op})")


# ---------------------------------------------------------------------------
# Decoding and exact match
# ---------------------------------------------------------------------------

@torch.no_grad()
def greedy(model, src, max_new):
    """Greedy decoding of a batch: (N, max_new) ids, <pad> after <eos>. The
    decoder runs on the whole prefix at every step (no cache)."""
    N = src.shape[0]
    memory = model.encode(src)
    pad = model.padding(src)
    out = torch.full((N, max_new), PAD, dtype=torch.long)
    tgt = torch.full((N, 1), SOS, dtype=torch.long)
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(max_new):
        T = tgt.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = model.decoder(model.embed(tgt, "tgt"), memory, tgt_mask=causal,
                          tgt_key_padding_mask=model.padding(tgt),
                          memory_key_padding_mask=pad)
        nxt = model.generator(y[:, -1]).argmax(dim=-1)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        out[:, t] = nxt
        done |= nxt == EOS
        if done.all():
            break
        tgt = torch.cat([tgt, nxt[:, None]], dim=1)
    return out


def exact(out, tgt):
    """Per row: the decoded ids are the target's tokens and <eos>, then only <pad>."""
    want = tgt[:, 1:]                            # t1 .. tm <eos> <pad> ..
    M = min(out.shape[1], want.shape[1])
    return (out[:, :M] == want[:, :M]).all(dim=1)


def exact_match(model, src, tgt, beam=1, batch=250):
    from reference.ch07_model import beam_decode_one
    right = 0
    for i in range(0, src.shape[0], batch):
        s, t = src[i:i + batch], tgt[i:i + batch]
        if beam == 1:
            out = greedy(model, s, t.shape[1] - 1)
        else:
            out = torch.full((s.shape[0], t.shape[1] - 1), PAD, dtype=torch.long)
            for r in range(s.shape[0]):
                tokens, _ = beam_decode_one(model, s[r:r + 1], SOS, EOS, t.shape[1] - 1, beam,
                                            1.0)
                out[r, :len(tokens)] = torch.tensor(tokens)
        right += int(exact(out, t).sum())
    return right / src.shape[0], right


# ---------------------------------------------------------------------------
# Training: the C program's recipe
# ---------------------------------------------------------------------------

def taylor_config(dropout=0.1):
    """programs/09_translation.c's model_config for the Taylor vocabularies."""
    return dict(kind="seq2seq", src_vocab=37, tgt_vocab=30, d_model=64, nhead=8,
                dim_feedforward=128, num_encoder_layers=2, num_decoder_layers=2,
                max_len=max(MAX_SRC + 2, MAX_TGT + 1), learned_pos=True,
                scale_embedding=2, final_norm=False, pad_id=PAD, eps=1e-5, dropout=dropout)


def bucketed_batches(lengths, batch, run, rand):
    """One epoch's batches: a shuffled order cut into runs of `run` batches,
    each sorted by length and visited in random order (trainer.c's
    bucket_order); the last, short batch is dropped."""
    order = list(range(len(lengths)))
    rand.shuffle(order)
    full = len(order) // batch * batch
    batches = []
    for start in range(0, full, run * batch):
        chunk = sorted(order[start:min(start + run * batch, full)], key=lambda i: lengths[i])
        pieces = [chunk[k:k + batch] for k in range(0, len(chunk), batch)]
        rand.shuffle(pieces)
        batches += pieces
    return batches


def trim(src, tgt):
    """Cut a batch to its longest source and target (trainer.c's trim_batch)."""
    S = int((src != PAD).sum(dim=1).max())
    T = int((tgt != PAD).sum(dim=1).max())
    return src[:, :S], tgt[:, :T]


def train(args):
    from reference.ch07_model import build_model, save_checkpoint
    from reference.ch08_training import CosineWarmupScheduler
    torch.manual_seed(args.seed)
    rand = random.Random(args.seed)
    data = splits()
    src, tgt = data["train"]
    cfg = taylor_config(args.dropout)
    model = build_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    per_epoch = src.shape[0] // args.batch_size
    sched = CosineWarmupScheduler(opt, args.warmup, per_epoch * args.epochs)
    lengths = ((src != PAD).sum(dim=1) + (tgt != PAD).sum(dim=1)).tolist()
    log = open(args.log, "w") if args.log else None
    if log:
        log.write("step,epoch,lr,train_loss,val_exact,seconds\n")
    started, step = time.time(), 0
    for epoch in range(args.epochs):
        model.train()
        for idx in bucketed_batches(lengths, args.batch_size, args.bucket, rand):
            s, t = trim(src[idx], tgt[idx])
            logits = model(s, t[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), t[:, 1:].flatten(), ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if log and step % 50 == 0:
                log.write(f"{step},{epoch + 1},{sched.get_last_lr()[0]:.6g},{loss.item():.6f},,"
                          f"{time.time() - started:.1f}\n")
        out_of_time = args.minutes > 0 and time.time() - started >= 60 * args.minutes
        last = epoch + 1 == args.epochs or out_of_time
        if (epoch + 1) % args.eval_every == 0 or last:
            model.eval()
            val, _ = exact_match(model, *data["val"])
            print(f"epoch {epoch + 1}/{args.epochs}: loss {loss.item():.4f}, validation exact "
                  f"match {val:.4f}, {time.time() - started:.0f} s", flush=True)
            if log:
                log.write(f"{step},{epoch + 1},,,{val:.6f},{time.time() - started:.1f}\n")
                log.flush()
        if out_of_time:
            print(f"--minutes {args.minutes:g}: stopped after epoch {epoch + 1} of {args.epochs}")
            break
    test, right = exact_match(model, *data["test"])
    print(f"test: exact match {test:.4f} ({right} of {data['test'][0].shape[0]}), greedy; "
          f"{step} steps in {time.time() - started:.0f} s")
    if args.out:
        save_checkpoint(model, cfg, args.out)


def evaluate(args):
    from reference.ch07_model import load_checkpoint
    model, _ = load_checkpoint(args.model)
    src, tgt = splits()["test"]
    started = time.time()
    share, right = exact_match(model, src, tgt, beam=args.beam)
    print(f"PyTorch: {args.model} on the {src.shape[0]} test pairs: exact match {share:.4f} "
          f"({right} of {src.shape[0]}), {'greedy' if args.beam == 1 else f'beam {args.beam}'}"
          f", {time.time() - started:.0f} s")
    if args.min_exact is not None and share < args.min_exact:
        sys.exit(f"exact match {share:.4f} is below {args.min_exact}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="exact match of a model on the test pairs")
    e.add_argument("model")
    e.add_argument("--beam", type=int, default=1)
    e.add_argument("--min-exact", type=float, help="exit 1 below this exact match")
    t = sub.add_parser("train", help="the C program's recipe in PyTorch")
    t.add_argument("--epochs", type=int, default=20)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--warmup", type=int, default=1000)
    t.add_argument("--dropout", type=float, default=0.1)
    t.add_argument("--bucket", type=int, default=50)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--eval-every", type=int, default=1,
                   help="the validation exact match every this many epochs (and at the end)")
    t.add_argument("--minutes", type=float, default=0,
                   help="stop at the end of the first epoch past this wall time (0: none)")
    t.add_argument("--log")
    t.add_argument("--out")
    args = parser.parse_args()
    if args.command == "train" and args.eval_every < 1:
        parser.error(f"--eval-every {args.eval_every}: must be at least 1")
    if args.command == "train":
        torch.set_num_threads(args.threads)
        train(args)
    else:
        evaluate(args)


if __name__ == "__main__":
    main()
