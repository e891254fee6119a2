"""Chapter 01 reference: character, word and byte-level BPE tokenizers, the
Taylor-series tokenizer of seed 002, and bracketing, padding and batching.

Everything works on bytes (UTF-8 text) so that the C side, which sees bytes,
can be matched exactly. Every output is an integer or byte tensor, compared
exactly (atol = rtol = 0). Case tensors (see chapters/01_tokenization/README.md):

    char_encode        corpus, text -> codepoints, ids, decoded
    word_encode        corpus, text (min_freq) -> vocab, counts, ids, decoded
    bpe_train_encode   corpus, text (vocab_size) -> merges, ids, decoded
    taylor_source      text (length) -> ids, sequence, decoded
    taylor_target      text (length) -> ids, sequence, decoded
    batch              texts (side, length) -> batch, lengths, decoded

Byte strings travel as U8 tensors; a list of words or lines as one U8 tensor
joined by newlines (a word never contains whitespace, a line never a newline).
"""

import random
from collections import Counter
from pathlib import Path

import torch

from reference import bpe
from reference.common import Case, case_meta

CHAPTER = "01_tokenization"
PROGRAM = "build/01_tokenization"

CORPUS_PATH = Path(__file__).resolve().parent / "data" / "gpl-3.0.txt"

PAD, SOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<sos>", "<eos>"]
CLOSED_SPECIALS = SPECIALS + ["<unk>"]       # char and word vocabularies are closed
EXACT = dict(atol=0.0, rtol=0.0)


def corpus():
    return CORPUS_PATH.read_bytes()


def u8(data):
    return torch.tensor(list(data), dtype=torch.uint8)


def i64(values):
    return torch.tensor(list(values), dtype=torch.int64)


def decode_tokens(tokens, ids, n_special, sep=b""):
    """Joins the tokens of ids with sep. <pad>, <sos> and <eos> are skipped;
    <unk> (id 3 of a closed vocabulary) is written as the text "<unk>"."""
    parts = []
    for i in ids:
        if i < n_special and i != UNK:
            continue
        parts.append(b"<unk>" if i < n_special else tokens[i])
    return sep.join(parts)


# --------------------------------------------------------------------------
# Character level: the tokens are Unicode code points.
# --------------------------------------------------------------------------

def char_vocab(corpus_bytes):
    """Specials, then every distinct character of the corpus by code point."""
    chars = sorted(set(corpus_bytes.decode("utf-8")))
    return CLOSED_SPECIALS + chars


def char_encode(vocab, text):
    index = {t: i for i, t in enumerate(vocab)}
    return [index.get(c, UNK) for c in text.decode("utf-8")]


def char_decode(vocab, ids):
    tokens = [t.encode("utf-8") for t in vocab]
    return decode_tokens(tokens, ids, len(CLOSED_SPECIALS))


# --------------------------------------------------------------------------
# Word level.
# --------------------------------------------------------------------------

WORD_SPACE = b" \t\n\v\f\r"


def is_word_byte(b):
    """Letters, digits, the apostrophe, and every byte of a non-ASCII character."""
    return b >= 0x80 or 65 <= b <= 90 or 97 <= b <= 122 or 48 <= b <= 57 or b == 0x27


def word_split(text):
    """Words are maximal runs of word bytes; whitespace separates; any other
    byte (punctuation) is a token of its own."""
    tokens, i = [], 0
    while i < len(text):
        if text[i] in WORD_SPACE:
            i += 1
        elif is_word_byte(text[i]):
            j = i
            while j < len(text) and is_word_byte(text[j]):
                j += 1
            tokens.append(text[i:j])
            i = j
        else:
            tokens.append(text[i:i + 1])
            i += 1
    return tokens


def word_vocab(corpus_bytes, min_freq):
    """Specials, then the words seen at least min_freq times, most frequent
    first, ties in bytewise order. Returns (tokens, counts)."""
    counts = Counter(word_split(corpus_bytes))
    kept = sorted((w for w in counts if counts[w] >= min_freq), key=lambda w: (-counts[w], w))
    return [s.encode() for s in CLOSED_SPECIALS] + kept, [0] * 4 + [counts[w] for w in kept]


def word_encode(tokens, text):
    index = {t: i for i, t in enumerate(tokens)}
    return [index.get(w, UNK) for w in word_split(text)]


def word_decode(tokens, ids):
    """Words joined by single spaces: the original spacing is not recoverable."""
    return decode_tokens(tokens, ids, len(CLOSED_SPECIALS), sep=b" ")


# --------------------------------------------------------------------------
# The Taylor-series tokenizer of seed 002.
# --------------------------------------------------------------------------

DIGITS = [str(d) for d in range(10)]
SOURCE_TOKENS = ["(", ")", "*", "**", "+", "-", "/", *DIGITS, "a", "b", "c", "d", "f", "g",
                 "h", "m", "n", "x", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh"]
TARGET_TOKENS = ["(", ")", "*", "**", "+", "-", "/", *DIGITS, "a", "b", "c", "d", "f", "g",
                 "h", "m", "x", "O(x**6)"]

# The vocabularies exactly as seed 002 prints them.
SEED_SOURCE_VOCAB = {
    '<pad>': 0, '<sos>': 1, '<eos>': 2, '(': 3, ')': 4, '*': 5, '**': 6, '+': 7, '-': 8,
    '/': 9, '0': 10, '1': 11, '2': 12, '3': 13, '4': 14, '5': 15, '6': 16, '7': 17, '8': 18,
    '9': 19, 'a': 20, 'b': 21, 'c': 22, 'cos': 23, 'cosh': 24, 'd': 25, 'exp': 26, 'f': 27,
    'g': 28, 'h': 29, 'm': 30, 'n': 31, 'sin': 32, 'sinh': 33, 'tan': 34, 'tanh': 35, 'x': 36}
SEED_TARGET_VOCAB = {
    '<pad>': 0, '<sos>': 1, '<eos>': 2, '(': 3, ')': 4, '*': 5, '**': 6, '+': 7, '-': 8,
    '/': 9, '0': 10, '1': 11, '2': 12, '3': 13, '4': 14, '5': 15, '6': 16, '7': 17, '8': 18,
    '9': 19, 'O(x**6)': 20, 'a': 21, 'b': 22, 'c': 23, 'd': 24, 'f': 25, 'g': 26, 'h': 27,
    'm': 28, 'x': 29}

# Seed 002's four printed examples (source, target as printed).
SEED_EXAMPLES = [
    ("cosh(a*x)**3 + tanh(b*x)",
     "1 + b*x - b**3*x**3/3 + 2*b**5*x**5/15 + 3*a**2*x**2/2 + 7*a**4*x**4/8 + O(x**6)"),
    ("exp(a*x)*cosh(h*x)**2",
     "1 + x**2*(a**2/2 + h**2) + x**3*(a**3/6 + a*h**2) + x**4*(a**4/24 + a**2*h**2/2 + h**4/3)"
     " + x**5*(a**5/120 + a**3*h**2/6 + a*h**4/3) + a*x + O(x**6)"),
    ("tan(d*x)/tanh(c*x)",
     "d/c + x**2*(c*d/3 + d**3/(3*c)) + x**4*(-c**3*d/45 + c*d**3/9 + 2*d**5/(15*c)) + O(x**6)"),
    ("sinh(c*x) - cosh(m*x)",
     "-1 - m**2*x**2/2 - m**4*x**4/24 + c*x + c**3*x**3/6 + c**5*x**5/120 + O(x**6)"),
]
# The arrays the seed prints for seqdata.sources[0] and seqdata.targets[0]. The
# seed brackets as <sos> tokens <pad>... <eos>. Its target array spells the
# first example's series with the terms in another order (below).
SEED_SOURCE_ARRAY = [1, 24, 3, 20, 5, 36, 4, 6, 13, 7, 35, 3, 21, 5, 36, 4, 0, 0, 0, 0, 0, 2]
SEED_TARGET_TEXT = ("1 + b*x + 3*a**2*x**2/2 - b**3*x**3/3 + 7*a**4*x**4/8 + 2*b**5*x**5/15"
                    " + O(x**6)")
SEED_TARGET_ARRAY = [
    1, 11, 7, 22, 5, 29, 7, 13, 5, 21, 6, 12, 5, 29, 6, 12, 9, 12, 8, 22, 6, 13, 5, 29, 6, 13,
    9, 13, 7, 17, 5, 21, 6, 14, 5, 29, 6, 14, 9, 18, 7, 12, 5, 22, 6, 15, 5, 29, 6, 15, 9, 11,
    15, 7, 20] + [0] * 29 + [2]
SEED_SOURCE_LENGTH, SEED_TARGET_LENGTH = 22, 85


def taylor_vocab(side):
    """Specials, then the side's token inventory in sorted (bytewise) order."""
    inventory = SOURCE_TOKENS if side == "source" else TARGET_TOKENS
    return SPECIALS + sorted(inventory)


def taylor_encode(vocab, text):
    """Longest match: at each position (spaces skipped) the longest token
    that the text continues with, so cosh beats cos and ** beats *."""
    tokens = vocab[len(SPECIALS):]
    ids, i = [], 0
    while i < len(text):
        if text[i] in " \t\n\v\f\r":
            i += 1
            continue
        best = None
        for k, token in enumerate(tokens):
            if text.startswith(token, i) and (best is None or len(token) > len(tokens[best])):
                best = k
        if best is None:
            raise ValueError(f"no token matches {text[i]!r} at position {i}")
        ids.append(len(SPECIALS) + best)
        i += len(tokens[best])
    return ids


def taylor_decode(vocab, ids):
    return decode_tokens([t.encode() for t in vocab], ids, len(SPECIALS)).decode()


def bracket(ids, length):
    """<sos> ids <eos>, then <pad> up to length. (<eos> comes right after the
    last token, not after the padding as in seed 002.)"""
    seq = [SOS] + list(ids) + [EOS]
    if len(seq) > length:
        raise ValueError(f"{len(ids)} tokens + <sos> + <eos> do not fit in length {length}")
    return seq + [PAD] * (length - len(seq))


def batch(sequences, length=0):
    """A (B, T) list of bracketed, padded rows and the (B,) row lengths
    (tokens + 2). length 0 means the longest sequence + 2."""
    T = length or max(len(s) for s in sequences) + 2
    return [bracket(s, T) for s in sequences], [len(s) + 2 for s in sequences]


def check_against_seed():
    """The vocabularies and the printed example of seed 002 come out of the
    rules above; the seed's own layout differs only in where <eos> goes."""
    source, target = taylor_vocab("source"), taylor_vocab("target")
    assert {t: i for i, t in enumerate(source)} == SEED_SOURCE_VOCAB
    assert {t: i for i, t in enumerate(target)} == SEED_TARGET_VOCAB
    ids = taylor_encode(source, SEED_EXAMPLES[0][0])
    n_pad = SEED_SOURCE_LENGTH - len(ids) - 2
    assert [SOS] + ids + [PAD] * n_pad + [EOS] == SEED_SOURCE_ARRAY
    assert bracket(ids, SEED_SOURCE_LENGTH) == [SOS] + ids + [EOS] + [PAD] * n_pad
    ids = taylor_encode(target, SEED_TARGET_TEXT)
    n_pad = SEED_TARGET_LENGTH - len(ids) - 2
    assert [SOS] + ids + [PAD] * n_pad + [EOS] == SEED_TARGET_ARRAY
    for src, trg in SEED_EXAMPLES:
        taylor_encode(source, src)
        taylor_encode(target, trg)


# --------------------------------------------------------------------------
# Cases.
# --------------------------------------------------------------------------

def char_case(name, corpus_bytes, text, seed=0):
    vocab = char_vocab(corpus_bytes)
    ids = char_encode(vocab, text)
    codepoints = [ord(c) for c in vocab[len(CLOSED_SPECIALS):]]
    return Case(name, {"corpus": u8(corpus_bytes), "text": u8(text),
                       "codepoints": i64(codepoints), "ids": i64(ids),
                       "decoded": u8(char_decode(vocab, ids))},
                case_meta("char_encode", seed, outputs=["codepoints", "ids", "decoded"],
                          info=dict(vocab_size=len(vocab)), **EXACT))


def word_case(name, corpus_bytes, text, min_freq, seed=0):
    tokens, counts = word_vocab(corpus_bytes, min_freq)
    ids = word_encode(tokens, text)
    return Case(name, {"corpus": u8(corpus_bytes), "text": u8(text),
                       "vocab": u8(b"\n".join(tokens[len(CLOSED_SPECIALS):])),
                       "counts": i64(counts), "ids": i64(ids),
                       "decoded": u8(word_decode(tokens, ids))},
                case_meta("word_encode", seed, outputs=["vocab", "counts", "ids", "decoded"],
                          min_freq=min_freq, info=dict(vocab_size=len(tokens)), **EXACT))


def bpe_case(name, corpus_bytes, text, vocab_size, seed=0):
    merges = bpe.train(corpus_bytes, vocab_size)
    ids = bpe.encode(text, merges)
    decoded = bpe.decode(ids, merges)
    assert decoded == text
    merges_t = torch.tensor(merges, dtype=torch.int64).reshape(len(merges), 2)
    return Case(name, {"corpus": u8(corpus_bytes), "text": u8(text), "merges": merges_t,
                       "ids": i64(ids), "decoded": u8(decoded)},
                case_meta("bpe_train_encode", seed, outputs=["merges", "ids", "decoded"],
                          vocab_size=vocab_size, info=dict(n_merges=len(merges)), **EXACT))


def taylor_case(name, side, text, length, seed=0):
    vocab = taylor_vocab(side)
    ids = taylor_encode(vocab, text)
    return Case(name, {"text": u8(text.encode()), "ids": i64(ids),
                       "sequence": i64(bracket(ids, length)),
                       "decoded": u8(taylor_decode(vocab, ids).encode())},
                case_meta(f"taylor_{side}", seed, outputs=["ids", "sequence", "decoded"],
                          length=length, **EXACT))


def batch_case(name, side, texts, length, seed=0):
    vocab = taylor_vocab(side)
    seqs = [taylor_encode(vocab, t) for t in texts]
    rows, lengths = batch(seqs, length)
    decoded = "\n".join(taylor_decode(vocab, row) for row in rows)
    return Case(name, {"texts": u8("\n".join(texts).encode()),
                       "batch": torch.tensor(rows, dtype=torch.int64),
                       "lengths": i64(lengths), "decoded": u8(decoded.encode())},
                case_meta("batch", seed, outputs=["batch", "lengths", "decoded"], side=side,
                          length=length, **EXACT))


# Text with characters outside the GPL's ASCII: accents, a dash, CJK, an emoji.
UNICODE_TEXT = "naïve café — 日本語 😀 x".encode()
# The small corpus the README trains BPE on by hand.
TINY_BPE_CORPUS = b"low lower lowest newer newest wider"


def golden_cases():
    check_against_seed()
    gpl = corpus()
    passage = gpl[gpl.index(b"  The GNU General Public License is"):][:400]
    cases = [
        char_case("char_gpl_ascii", gpl, passage),
        char_case("char_gpl_unknown", gpl, "Licence: naïve — 日本 😀 {~}".encode()),
        char_case("char_unicode", "héllo wörld ✓ 😀 日本語 ".encode() + gpl[:300], UNICODE_TEXT),
        char_case("char_empty_text", gpl[:200], b""),
        word_case("word_gpl_min1", gpl, passage, 1),
        word_case("word_gpl_min3", gpl, b"The licensee's quantum-program isn't free,  is it?",
                  3),
        word_case("word_small", b"the cat sat on the mat. the cat's hat!", b"the dog sat.", 1),
        bpe_case("bpe_gpl_500", gpl, passage, 500),
        bpe_case("bpe_gpl_1000", gpl, passage + b"\n" + UNICODE_TEXT, 1000),
        bpe_case("bpe_gpl_259", gpl[:2000], passage[:100], 259),
        bpe_case("bpe_tiny", TINY_BPE_CORPUS, b"lowest newer flower", 265),
        bpe_case("bpe_tiny_exhausted", TINY_BPE_CORPUS, b"wider lows", 10000),
        bpe_case("bpe_unicode", UNICODE_TEXT * 3 + gpl[:1000], UNICODE_TEXT + b"\n\t 12345",
                 300),
    ]
    names = ["cosh_tanh", "exp_cosh", "tan_tanh", "sinh_cosh"]
    for name, (src, trg) in zip(names, SEED_EXAMPLES):
        cases.append(taylor_case(f"taylor_source_{name}", "source", src, SEED_SOURCE_LENGTH))
        cases.append(taylor_case(f"taylor_target_{name}", "target", trg, 120))
    cases.append(taylor_case("taylor_target_seed_array", "target", SEED_TARGET_TEXT,
                             SEED_TARGET_LENGTH))
    cases.append(taylor_case("taylor_source_spaces", "source", "  sinh ( 2 * n * x ) ** 3  ",
                             16))
    sources = [s for s, _ in SEED_EXAMPLES]
    targets = [SEED_TARGET_TEXT] + [t for _, t in SEED_EXAMPLES[1:]]
    cases.append(batch_case("batch_source_auto", "source", sources, 0))
    cases.append(batch_case("batch_source_22", "source", sources, SEED_SOURCE_LENGTH))
    cases.append(batch_case("batch_target_120", "target", targets, 120))
    return cases


# --------------------------------------------------------------------------
# Random cases for make verify.
# --------------------------------------------------------------------------

VERIFY_OPS = ["char_encode", "word_encode", "bpe_train_encode", "taylor_source",
              "taylor_target", "batch"]

EXTRA_CHARS = "éüßçñøå—–“”‘’…€£°±×÷αβγπΩ日本語中文한국어😀🙂🚀✓∑√∞"


def random_codepoint(draw):
    """Any valid Unicode scalar value above ASCII (no surrogates)."""
    while True:
        cp = draw.choice([draw.randint(0x80, 0x7FF), draw.randint(0x800, 0xFFFF),
                          draw.randint(0x10000, 0x10FFFF)])
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def sprinkle(draw, data, n, chars):
    """data (bytes) with n characters drawn from chars inserted at random
    character boundaries (data is ASCII or valid UTF-8)."""
    text = data.decode("utf-8")
    for _ in range(n):
        at = draw.randint(0, len(text))
        text = text[:at] + (chars() if callable(chars) else draw.choice(chars)) + text[at:]
    return text.encode("utf-8")


def corpus_slice(draw, gpl, lo, hi):
    n = draw.randint(lo, hi)
    start = draw.randint(0, len(gpl) - n)
    return gpl[start:start + n]


def random_source(draw):
    """A random source function in the seed's style, e.g. sinh(c*x)**2 - exp(a*x)."""
    funcs = ["exp", "sin", "cos", "tan", "sinh", "cosh", "tanh"]
    letters = list("abcdfghmn")

    def term():
        arg = draw.choice(letters) + "*x"
        if draw.random() < 0.3:
            arg = f"{draw.randint(2, 9)}*" + arg
        t = f"{draw.choice(funcs)}({arg})"
        if draw.random() < 0.3:
            t += f"**{draw.randint(2, 5)}"
        return t

    text = term()
    for _ in range(draw.randint(0, 2)):
        text += draw.choice([" + ", " - ", "*", "/"]) + term()
    return text


def random_target(draw):
    """A random Taylor series in the seed's target style."""
    letters = list("abcdfghm")
    terms = []
    for power in range(draw.randint(1, 5) + 1):
        coef = draw.choice(["", f"{draw.randint(2, 120)}*"])
        mono = "*".join(f"{draw.choice(letters)}**{draw.randint(1, 5)}"
                        for _ in range(draw.randint(1, 2)))
        x = "" if power == 0 else ("x" if power == 1 else f"x**{power}")
        t = coef + mono + ("*" + x if x else "")
        if draw.random() < 0.4:
            t += f"/{draw.randint(2, 720)}"
        if draw.random() < 0.2:
            t = f"x**{power}*({t} + {draw.choice(letters)}**2/(3*{draw.choice(letters)}))"
        terms.append(t)
    text = (draw.choice(["", "-"]) + terms[0] + "".join(
        draw.choice([" + ", " - "]) + t for t in terms[1:]) + " + O(x**6)")
    return text


def random_case(op, seed):
    draw = random.Random(seed)
    gpl = corpus()
    if op == "char_encode":
        corp = sprinkle(draw, corpus_slice(draw, gpl, 50, 3000), draw.randint(0, 20), EXTRA_CHARS)
        text = corpus_slice(draw, gpl, 0, 400)
        text = sprinkle(draw, text, draw.randint(0, 10), EXTRA_CHARS)
        text = sprinkle(draw, text, draw.randint(0, 5), lambda: random_codepoint(draw))
        return char_case(op, corp, text, seed)
    if op == "word_encode":
        corp = sprinkle(draw, corpus_slice(draw, gpl, 100, 8000), draw.randint(0, 10), EXTRA_CHARS)
        text = sprinkle(draw, corpus_slice(draw, gpl, 0, 500), draw.randint(0, 5), EXTRA_CHARS)
        return word_case(op, corp, text, draw.randint(1, 4), seed)
    if op == "bpe_train_encode":
        corp = sprinkle(draw, corpus_slice(draw, gpl, 50, 3000), draw.randint(0, 10), EXTRA_CHARS)
        text = sprinkle(draw, corpus_slice(draw, gpl, 0, 500), draw.randint(0, 5), EXTRA_CHARS)
        return bpe_case(op, corp, text, draw.randint(259, 420), seed)
    if op in ("taylor_source", "taylor_target"):
        side = op.split("_")[1]
        text = random_source(draw) if side == "source" else random_target(draw)
        n = len(taylor_encode(taylor_vocab(side), text))
        return taylor_case(op, side, text, n + 2 + draw.randint(0, 10), seed)
    if op == "batch":
        side = draw.choice(["source", "target"])
        make = random_source if side == "source" else random_target
        texts = [make(draw) for _ in range(draw.randint(1, 8))]
        longest = max(len(taylor_encode(taylor_vocab(side), t)) for t in texts)
        length = draw.choice([0, longest + 2 + draw.randint(0, 10)])
        return batch_case(op, side, texts, length, seed)
    raise ValueError(f"unknown op {op}")
