"""Byte-level byte-pair encoding (BPE), small and readable: the reference that
chapters/01_tokenization/bpe.c must reproduce merge for merge and id for id.

Ids. 0, 1, 2 are <pad>, <sos>, <eos>. Ids 3 .. 258 are the 256 byte values
(byte b has id 3 + b), so every text can be written with the base tokens and
no <unk> is needed. Merge number k (counting from 0) creates id 259 + k.

Pre-tokenization. The text is first cut into pieces, and merges never cross
a piece boundary (so no token spans "word. Next"). Scanning bytes left to
right, the next piece is the first of these that applies:
    1. a space followed by a letter run or a digit run: the space and the run
    2. a run of letters (ASCII A-Z, a-z, and every byte >= 0x80, so the
       bytes of a multi-byte UTF-8 character stay together)
    3. a run of digits 0-9
    4. a run of whitespace (space, \\t, \\n, \\v, \\f, \\r); when the run is
       longer than one byte and its last byte is a space directly before a
       letter or digit, that space is left to start the next piece (rule 1)
    5. any other single byte
Rules 1 and 4 are how GPT-2 keeps " the" (with its space) as one token.

Training. Count the distinct pieces. Then, for each new token: count every
adjacent pair of ids inside every piece (overlapping pairs count: "aaa" holds
(a, a) twice), each weighted by how often its piece occurs; take the most
frequent pair; replace its occurrences in every piece, left to right and
without overlap ("aaa" -> "aa" "a"); record the merge. Stop when the
vocabulary has vocab_size ids or the best pair occurs fewer than 2 times.

Tie-break rule: among pairs with the same count, the smallest
(left id, right id) wins, comparing left ids first.

Encoding. Cut the text into pieces the same way; in each piece repeatedly
merge the pair present with the lowest merge rank (all its occurrences, left
to right) until no pair of the piece is a merge. Decoding concatenates the
bytes of the ids, skipping the three specials, so decode(encode(t)) == t.
"""

from collections import Counter

SPECIALS = ["<pad>", "<sos>", "<eos>"]
BYTE_BASE = len(SPECIALS)          # id of byte 0
N_BASE = BYTE_BASE + 256           # 259: the vocabulary size before any merge

WHITESPACE = b" \t\n\v\f\r"


def byte_class(b):
    """'letter', 'digit', 'space' or 'other' for one byte."""
    if b >= 0x80 or 65 <= b <= 90 or 97 <= b <= 122:
        return "letter"
    if 48 <= b <= 57:
        return "digit"
    if b in WHITESPACE:
        return "space"
    return "other"


def run_end(data, i, cls):
    """The end of the run of bytes of class cls that starts at i."""
    while i < len(data) and byte_class(data[i]) == cls:
        i += 1
    return i


def pretokenize(data):
    """Cuts bytes into pieces (a list of bytes objects) by the rules above."""
    pieces = []
    i, n = 0, len(data)
    while i < n:
        cls = byte_class(data[i])
        nxt = byte_class(data[i + 1]) if i + 1 < n else None
        if data[i] == 0x20 and nxt in ("letter", "digit"):       # rule 1
            j = run_end(data, i + 1, nxt)
        elif cls in ("letter", "digit"):                           # rules 2, 3
            j = run_end(data, i, cls)
        elif cls == "space":                                       # rule 4
            j = run_end(data, i, "space")
            if (j - i >= 2 and j < n and data[j - 1] == 0x20
                    and byte_class(data[j]) in ("letter", "digit")):
                j -= 1
        else:                                                      # rule 5
            j = i + 1
        pieces.append(data[i:j])
        i = j
    return pieces


def merge(ids, pair, new_id):
    """ids with every occurrence of pair, left to right, replaced by new_id."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train(corpus, vocab_size):
    """The merges, a list of (left id, right id), learnt from corpus (bytes)."""
    if vocab_size < N_BASE:
        raise ValueError(f"vocab_size {vocab_size} is below {N_BASE} (3 specials + 256 bytes)")
    piece_counts = Counter(pretokenize(corpus))
    words = [[BYTE_BASE + b for b in piece] for piece in piece_counts]
    counts = list(piece_counts.values())
    merges = []
    while N_BASE + len(merges) < vocab_size:
        pairs = Counter()
        for ids, count in zip(words, counts):
            for pair in zip(ids, ids[1:]):
                pairs[pair] += count
        if not pairs:
            break
        # Highest count first; among equal counts the smallest (left, right).
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        new_id = N_BASE + len(merges)
        words = [merge(ids, best, new_id) for ids in words]
        merges.append(best)
    return merges


def encode(text, merges):
    """Token ids of text (bytes) under the given merges."""
    rank = {pair: k for k, pair in enumerate(merges)}
    out = []
    for piece in pretokenize(text):
        ids = [BYTE_BASE + b for b in piece]
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, len(merges)))
            if pair not in rank:
                break
            ids = merge(ids, pair, N_BASE + rank[pair])
        out.extend(ids)
    return out


def token_bytes(merges):
    """The bytes of every id: b"" for the specials, then bytes, then merges."""
    table = [b""] * BYTE_BASE + [bytes([b]) for b in range(256)]
    for left, right in merges:
        table.append(table[left] + table[right])
    return table


def decode(ids, merges):
    """The text (bytes) of ids; the specials contribute nothing."""
    table = token_bytes(merges)
    return b"".join(table[i] for i in ids)
