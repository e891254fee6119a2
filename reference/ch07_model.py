"""Chapter 07 reference: the whole models of chapters/07_model/model.h in
PyTorch, under the same state_dict names, so that a checkpoint moves between
C and PyTorch in both directions; greedy decoding, beam search and top-k with
exactly the algorithms of chapters/07_model/decode.h; and the golden cases.

The kinds (model.h). All but the set share the front end

    x = dropout(embed(ids) * scale + pos[:len])

    seq2seq      logits = generator(decoder(x_tgt, encoder(x_src)))    (N, T, Vt)
    labeller     logits = generator(encoder(x_src))                    (N, S, Vt)
    classifier   logits = generator(mean over non-padding positions
                                    of encoder(x_src))                 (N, Vt)
    lm           logits = generator(encoder(x_src, causal))            (N, S, V)

The lm (chapter 12's decoder-only language model) is the labeller with a
causal self-attention: position t sees ids 0..t and predicts id t+1. Like
PyTorch's word-language-model example it is nn.TransformerEncoder with a
causal mask, so it keeps the encoder's names.

Masks are built from the ids: an id equal to pad_id is padding, ignored as a
key by every attention; the decoder's self-attention is causal as well.

The fourth reads a set of S feature vectors (N, S, input_dim) instead of ids.
A set has no order, so there is no embedding, no position and no mask (the
encoder is permutation-equivariant): a linear layer input_net lifts each
element to D, and the generator gives one score per element (tgt_vocab 1):

    set          scores = generator(encoder(dropout(input_net(features))))
                                                                       (N, S)

Chapter 11 trains it to find the odd one out: softmax over the set's scores.

Functions other modules use (reference/bench.py, the chapter 08 reference):
    full_config(**kw)          a complete config dict (the ModelConfig fields)
    build_model(cfg)           the nn.Module of cfg's kind, initialised as model_init does
    save_checkpoint(model, cfg, path)   a safetensors checkpoint C's model_load reads
    load_checkpoint(path)      -> (model, cfg), e.g. of a checkpoint C wrote
    greedy_decode, beam_decode, topk   the decoding algorithms of decode.h

Case tensors (see chapters/07_model/README.md; N batch, S source length, T
target length, Vt target vocabulary or classes). Every case carries the
model's parameters under their state_dict names and its config as metadata
"model.<field>", the checkpoint format:
    model           src I64 (N, S), tgt I64 (N, T) (seq2seq) -> logits
                    (N, T, Vt) / (N, S, Vt) / (N, Vt); a set takes features
                    F32 (N, S, input_dim) instead of src -> logits (N, S)
    model_backward  + grad_logits (the shape of logits) -> logits and
                    grad_<name> for every parameter <name>
    greedy          src; metadata sos_id, eos_id, max_new -> output I64
                    (N, max_new), score (N,)
    beam            the same + beam_width, length_penalty -> output, score
    topk            src, tgt (seq2seq); metadata k -> topk_ids I64
                    (..., k), topk_probs (..., k) of softmax(logits)
    checkpoint      only the parameters (a file save_checkpoint writes, plus
                    the case metadata) -> every parameter, as C saves it back

`python -m reference.ch07_model --measure [N]` runs N fresh random cases of
every op through build/07_model and prints the largest errors and the share
of the tolerance they use; the tolerances below come from it.
"""

import copy
import math
import random
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file

from reference.ch05_encoder import sinusoidal_table
from reference.common import (Case, case_meta, check_checksums, checksums, generator,
                              measure_main, randn)

CHAPTER = "07_model"
PROGRAM = "build/07_model"

# ---------------------------------------------------------------------------
# The config: the fields of ModelConfig in model.h, in its order
# ---------------------------------------------------------------------------

KINDS = ("seq2seq", "labeller", "classifier", "set", "lm")
CONFIG_FIELDS = ("kind", "src_vocab", "tgt_vocab", "input_dim", "d_model", "nhead",
                 "dim_feedforward", "num_encoder_layers", "num_decoder_layers", "max_len",
                 "learned_pos", "scale_embedding", "share_embeddings", "final_norm",
                 "norm_first", "pad_id", "eps", "dropout")
FLAG_FIELDS = ("learned_pos", "share_embeddings", "final_norm", "norm_first")
FLOAT_FIELDS = ("eps", "dropout")
INT_FIELDS = tuple(f for f in CONFIG_FIELDS if f not in FLAG_FIELDS + FLOAT_FIELDS + ("kind",))

# The defaults are nn.Transformer's where it has one (d_model 512, 8 heads,
# FFN 2048, 6 + 6 layers, final norms, post-norm, eps 1e-5), the PyTorch
# tutorials' max_len 5000, no padding, and dropout 0: set it to train.
DEFAULTS = dict(kind="seq2seq", d_model=512, nhead=8, dim_feedforward=2048,
                num_encoder_layers=6, max_len=5000, learned_pos=0, scale_embedding=0,
                share_embeddings=0, final_norm=1, norm_first=0, pad_id=-1, eps=1e-5,
                dropout=0.0, input_dim=0)


def full_config(**kw):
    """A complete, checked config: every ModelConfig field. src_vocab is
    required (but for a set, which has none: 0); tgt_vocab defaults to
    src_vocab (1 for a set), num_decoder_layers to num_encoder_layers for
    seq2seq and 0 otherwise. Flags may be given as bools; they are stored
    as 0/1."""
    unknown = sorted(set(kw) - set(CONFIG_FIELDS))
    if unknown:
        raise ValueError(f"unknown model config fields {unknown} (known: {', '.join(CONFIG_FIELDS)})")
    cfg = dict(DEFAULTS, **kw)
    if cfg["kind"] == "set":
        cfg.setdefault("src_vocab", 0)
        cfg.setdefault("tgt_vocab", 1)
    if "src_vocab" not in cfg:
        raise ValueError("the model config needs src_vocab")
    cfg.setdefault("tgt_vocab", cfg["src_vocab"])
    if cfg.get("num_decoder_layers") is None:
        cfg["num_decoder_layers"] = cfg["num_encoder_layers"] if cfg["kind"] == "seq2seq" else 0
    for f in FLAG_FIELDS:
        cfg[f] = int(bool(cfg[f]))
    for f in INT_FIELDS:
        if cfg[f] != int(cfg[f]):
            raise ValueError(f"model config: {f} = {cfg[f]} is not an integer")
        cfg[f] = int(cfg[f])
    for f in FLOAT_FIELDS:
        cfg[f] = float(cfg[f])
    check_config(cfg)
    return {f: cfg[f] for f in CONFIG_FIELDS}


def check_config(cfg):
    """The checks of model_config_check in model.h; raises ValueError."""
    def bad(msg):
        raise ValueError(f"model config: {msg}")
    if cfg["kind"] not in KINDS:
        bad(f"kind '{cfg['kind']}' is not one of {', '.join(KINDS)}")
    is_set = cfg["kind"] == "set"
    for f in ("src_vocab", "tgt_vocab", "d_model", "nhead", "dim_feedforward",
              "num_encoder_layers", "max_len"):
        if cfg[f] < 1 and not (is_set and f == "src_vocab"):
            bad(f"{f} = {cfg[f]} must be at least 1")
    # A set has features instead of ids: no vocabulary, no embedding, no
    # positions, no padding, and one score per element.
    if is_set:
        if cfg["input_dim"] < 1:
            bad(f"input_dim = {cfg['input_dim']} must be at least 1 for a set")
        want = dict(src_vocab=0, tgt_vocab=1, learned_pos=0, scale_embedding=0,
                    share_embeddings=0, pad_id=-1)
        for f, v in want.items():
            if cfg[f] != v:
                bad(f"a set needs {f} = {v} (no ids, no positions, one score per element), "
                    f"not {cfg[f]}")
    elif cfg["input_dim"] != 0:
        bad(f"input_dim = {cfg['input_dim']} is only for a set (0 for a {cfg['kind']})")
    if cfg["num_encoder_layers"] > 64 or cfg["num_decoder_layers"] > 64:
        bad("at most 64 layers per stack (model_config_check's limit)")
    if cfg["d_model"] % cfg["nhead"]:
        bad(f"d_model {cfg['d_model']} is not divisible by nhead {cfg['nhead']}")
    if cfg["kind"] == "seq2seq" and cfg["num_decoder_layers"] < 1:
        bad("a seq2seq model needs num_decoder_layers >= 1")
    if cfg["kind"] != "seq2seq" and cfg["num_decoder_layers"] != 0:
        bad(f"a {cfg['kind']} has no decoder (num_decoder_layers must be 0)")
    if cfg["scale_embedding"] not in (0, 1, 2):
        bad(f"scale_embedding = {cfg['scale_embedding']} (0 none, 1 sqrt(d_model), 2 learned)")
    if not (cfg["eps"] > 0 and math.isfinite(cfg["eps"])):
        bad(f"eps = {cfg['eps']} must be positive")
    if not 0.0 <= cfg["dropout"] < 1.0:
        bad(f"dropout = {cfg['dropout']} must lie in [0, 1)")
    # pad_id is an input id: it must lie in the source vocabulary, and for
    # seq2seq in the target vocabulary too (a labeller's or classifier's
    # tgt_vocab counts classes, not ids).
    limit = min(cfg["src_vocab"], cfg["tgt_vocab"]) if cfg["kind"] == "seq2seq" \
        else cfg["src_vocab"]
    if cfg["pad_id"] != -1 and not 0 <= cfg["pad_id"] < limit:
        bad(f"pad_id {cfg['pad_id']} lies outside the vocabularies ({cfg['src_vocab']}, "
            f"{cfg['tgt_vocab']}); -1 means none")
    if cfg["kind"] == "lm" and cfg["src_vocab"] != cfg["tgt_vocab"]:
        bad(f"a language model predicts its own ids: src_vocab {cfg['src_vocab']} and "
            f"tgt_vocab {cfg['tgt_vocab']} must be equal")
    if cfg["share_embeddings"] and (cfg["kind"] != "seq2seq" or
                                    cfg["src_vocab"] != cfg["tgt_vocab"]):
        bad("share_embeddings needs a seq2seq model with src_vocab == tgt_vocab")


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------

class TransformerModel(nn.Module):
    """What the kinds share: the front ends, the encoder and the generator.
    Submodules and parameters carry model.h's state_dict names: src_embed,
    tgt_embed, src_scale, tgt_scale, src_pos, tgt_pos, input_net (a set's
    front end, instead of src_embed), encoder, decoder, generator. The
    sinusoidal table is a buffer that is not saved (it is computed, as
    chapter 05 does)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        D, L, p = cfg["d_model"], cfg["max_len"], cfg["dropout"]
        seq2seq = cfg["kind"] == "seq2seq"
        pad = cfg["pad_id"] if cfg["pad_id"] >= 0 else None
        if cfg["kind"] == "set":
            self.input_net = nn.Linear(cfg["input_dim"], D)      # the set's front end
        else:
            self.src_embed = nn.Embedding(cfg["src_vocab"], D, padding_idx=pad)
        if seq2seq and not cfg["share_embeddings"]:
            self.tgt_embed = nn.Embedding(cfg["tgt_vocab"], D, padding_idx=pad)
        if cfg["scale_embedding"] == 2:
            self.src_scale = nn.Parameter(torch.full((1,), math.sqrt(D)))
            if seq2seq:
                self.tgt_scale = nn.Parameter(torch.full((1,), math.sqrt(D)))
        if cfg["learned_pos"]:
            self.src_pos = nn.Embedding(L, D)
            if seq2seq:
                self.tgt_pos = nn.Embedding(L, D)
        elif self.has_sinusoids():
            self.register_buffer("pe", sinusoidal_table(L, D).float(), persistent=False)
        layer = nn.TransformerEncoderLayer(D, cfg["nhead"], cfg["dim_feedforward"], dropout=p,
                                           activation="relu", layer_norm_eps=cfg["eps"],
                                           batch_first=True, norm_first=bool(cfg["norm_first"]))
        norm = nn.LayerNorm(D, eps=cfg["eps"]) if cfg["final_norm"] else None
        self.encoder = nn.TransformerEncoder(layer, cfg["num_encoder_layers"], norm=norm,
                                             enable_nested_tensor=False)
        if seq2seq:
            layer = nn.TransformerDecoderLayer(D, cfg["nhead"], cfg["dim_feedforward"],
                                               dropout=p, activation="relu",
                                               layer_norm_eps=cfg["eps"], batch_first=True,
                                               norm_first=bool(cfg["norm_first"]))
            norm = nn.LayerNorm(D, eps=cfg["eps"]) if cfg["final_norm"] else None
            self.decoder = nn.TransformerDecoder(layer, cfg["num_decoder_layers"], norm=norm)
        self.generator = nn.Linear(D, cfg["tgt_vocab"])
        self.dropout = nn.Dropout(p)          # the front ends' dropout (no parameters)
        self.reset_parameters()

    def reset_parameters(self):
        """model_init's initialisation: every linear layer uniform(+-1/sqrt(in))
        (nn.Linear's own), the packed attention projections Xavier-uniform with
        zero biases (nn.MultiheadAttention's), embeddings N(0, 1) with a zero
        padding row, LayerNorm ones and zeros, learned scales sqrt(D).
        nn.TransformerEncoder deep-copies one layer, so without this every
        layer would start with the same values."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.LayerNorm, nn.Embedding)):
                m.reset_parameters()
        for m in self.modules():
            if isinstance(m, nn.MultiheadAttention):
                m._reset_parameters()
        with torch.no_grad():
            for name in ("src_scale", "tgt_scale"):
                if hasattr(self, name):
                    getattr(self, name).fill_(math.sqrt(self.cfg["d_model"]))

    def has_sinusoids(self):
        """True when the model adds the sinusoidal table (ids without learned
        positions; a set has no positions at all)."""
        return self.cfg["kind"] != "set" and not self.cfg["learned_pos"]

    def use_float64(self):
        """model.double(), with the sinusoidal table recomputed in float64
        (converting the float32 buffer would keep its rounding)."""
        self.double()
        if self.has_sinusoids():
            self.pe = sinusoidal_table(self.cfg["max_len"], self.cfg["d_model"])
        return self

    def padding(self, ids):
        """(N, len) bool, True where ids == pad_id (nn.MultiheadAttention's
        convention: True = a key nobody attends to), or None without padding."""
        return ids == self.cfg["pad_id"] if self.cfg["pad_id"] >= 0 else None

    def embed(self, ids, side="src"):
        """dropout(embed(ids) * scale + pos[:len]), (N, len, D)."""
        n = ids.shape[1]
        if n > self.cfg["max_len"]:
            raise ValueError(f"a sequence of length {n} is longer than max_len "
                             f"{self.cfg['max_len']}")
        table = self.src_embed if side == "src" or self.cfg["share_embeddings"] \
            else self.tgt_embed
        x = table(ids)
        if self.cfg["scale_embedding"] == 1:
            x = x * math.sqrt(self.cfg["d_model"])
        elif self.cfg["scale_embedding"] == 2:
            x = x * getattr(self, f"{side}_scale")
        if self.cfg["learned_pos"]:
            pos = getattr(self, f"{side}_pos").weight[:n]
        else:
            pos = self.pe[:n]
        return self.dropout(x + pos)

    def encode(self, src):
        """The encoder's output (N, S, D), the memory."""
        return self.encoder(self.embed(src, "src"), src_key_padding_mask=self.padding(src))


class Seq2SeqTransformer(TransformerModel):
    """The paper's encoder-decoder: forward(src (N, S), tgt (N, T)) -> (N, T, Vt)."""

    def forward(self, src, tgt):
        memory = self.encode(src)
        T = tgt.shape[1]
        # The subsequent mask as booleans, True = not allowed (key j > query
        # t). nn.TransformerDecoder recognises it as causal and may hand the
        # attention is_causal instead; both mean the same.
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)
        y = self.decoder(self.embed(tgt, "tgt"), memory, tgt_mask=causal,
                         tgt_key_padding_mask=self.padding(tgt),
                         memory_key_padding_mask=self.padding(src))
        return self.generator(y)


class SequenceLabeller(TransformerModel):
    """Encoder only, one class per position: forward(src (N, S)) -> (N, S, Vt)."""

    def forward(self, src):
        return self.generator(self.encode(src))


class SequenceClassifier(TransformerModel):
    """Encoder only, one class per sequence: the mean of the encoder's output
    over the non-padding positions, then the generator. forward(src) -> (N, Vt)."""

    def forward(self, src):
        memory = self.encode(src)
        pad = self.padding(src)
        if pad is None:
            return self.generator(memory.mean(dim=1))
        keep = (~pad).to(memory.dtype)[:, :, None]                 # (N, S, 1)
        return self.generator((memory * keep).sum(dim=1) / keep.sum(dim=1))


class SetScorer(TransformerModel):
    """Encoder only, one score per element of a set, no order and no mask:
    forward(features (N, S, input_dim) float) -> (N, S). Chapter 11's loss is
    cross_entropy(scores, index of the odd element): a softmax over the set."""

    def forward(self, features):
        if features.shape[1] > self.cfg["max_len"]:
            raise ValueError(f"a set of {features.shape[1]} elements is larger than max_len "
                             f"{self.cfg['max_len']}")
        x = self.dropout(self.input_net(features))              # (N, S, D)
        memory = self.encoder(x)
        return self.generator(memory).squeeze(-1)               # (N, S)


class LanguageModel(TransformerModel):
    """Decoder-only (chapter 12): the encoder stack with a causal mask, one
    distribution over the next id per position: forward(ids (N, S)) -> (N, S, V),
    row t predicting ids[:, t + 1]."""

    def forward(self, src):
        S = src.shape[1]
        causal = torch.ones(S, S, dtype=torch.bool, device=src.device).triu(1)
        return self.generator(self.encoder(self.embed(src, "src"), mask=causal, is_causal=True,
                                           src_key_padding_mask=self.padding(src)))


MODEL_CLASSES = {"seq2seq": Seq2SeqTransformer, "labeller": SequenceLabeller,
                 "classifier": SequenceClassifier, "set": SetScorer, "lm": LanguageModel}


def build_model(cfg):
    """The model of cfg's kind, initialised from torch's global generator."""
    cfg = full_config(**cfg)
    return MODEL_CLASSES[cfg["kind"]](cfg)


def run(model, src, tgt=None):
    """model(src, tgt) for seq2seq, model(src) otherwise (for a set, src is
    the float features (N, S, input_dim))."""
    return model(src, tgt) if model.cfg["kind"] == "seq2seq" else model(src)


# ---------------------------------------------------------------------------
# Checkpoints: the state_dict as safetensors, the config as metadata
# ---------------------------------------------------------------------------

def config_metadata(cfg):
    """The config as checkpoint metadata: "model.<field>" for every field,
    kind as its name, flags as 0/1, integers in decimal, floats as repr().
    input_dim is written only for a set (it is 0 for every other kind)."""
    meta = {}
    for f in CONFIG_FIELDS:
        if f == "input_dim" and cfg["kind"] != "set":
            continue
        v = cfg[f]
        meta[f"model.{f}"] = v if f == "kind" else repr(float(v)) if f in FLOAT_FIELDS \
            else str(int(v))
    return meta


def config_from_metadata(meta, where="checkpoint"):
    """Reads the config back from metadata written by config_metadata or by
    C's model_to_file (flags as 0/1 or true/false, floats in any notation).
    A missing model.input_dim means 0."""
    kw = {}
    for f in CONFIG_FIELDS:
        key = f"model.{f}"
        if key not in meta and f == "input_dim":
            continue
        if key not in meta:
            raise ValueError(f"{where}: metadata '{key}' is missing")
        v = meta[key].strip()
        try:
            if f == "kind":
                kw[f] = v
            elif f in FLOAT_FIELDS:
                kw[f] = float(v)
            elif f in FLAG_FIELDS and v in ("true", "false"):
                kw[f] = int(v == "true")
            else:
                kw[f] = int(v)
        except ValueError:
            raise ValueError(f"{where}: metadata '{key}' is '{v}', not a number") from None
    return full_config(**kw)


def checkpoint_tensors(model):
    """The state_dict as contiguous float32 tensors (what a checkpoint holds)."""
    return {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}


def save_checkpoint(model, cfg, path):
    """Writes model's state_dict (float32) with the config as "model.*"
    metadata: the file C's model_load reads."""
    tensors = checkpoint_tensors(model)
    meta = config_metadata(full_config(**cfg))
    meta.update(checksums(tensors))
    save_file(tensors, str(path), metadata=meta)


def load_checkpoint(path):
    """(model, cfg) from a checkpoint written by save_checkpoint or by C
    (model_save, or chapter 08's training checkpoints, whose "optimizer.*"
    tensors are skipped). The model is float32, in evaluation mode."""
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    check_checksums(str(path), meta, tensors)
    tensors = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    cfg = config_from_metadata(meta, str(path))
    model = build_model(cfg)
    model.load_state_dict(tensors, strict=True)
    model.eval()
    return model, cfg


# ---------------------------------------------------------------------------
# Decoding: the algorithms of decode.h, written plainly
# ---------------------------------------------------------------------------

class Margins:
    """The smallest gaps between the scores the decoding decisions compared:
    float32 C decides the same as float64 PyTorch only where these are well
    above float32's error of the logits (about 1e-5 here)."""

    def __init__(self):
        self.min = math.inf

    def add(self, gap):
        self.min = min(self.min, gap)


def fill_id(cfg, eos_id):
    """What fills an output row after <eos>: pad_id, or eos_id without padding."""
    return cfg["pad_id"] if cfg["pad_id"] >= 0 else eos_id


@torch.no_grad()
def greedy_decode(model, src, sos_id, eos_id, max_new, margins=None):
    """decode_greedy of decode.h. Every row starts from <sos> and appends the
    argmax of the next-token logits (the first maximum on ties) until it
    writes <eos> or has max_new tokens; positions after <eos> get pad_id
    (eos_id when pad_id < 0). Returns (out (N, max_new) int64, scores (N,)
    float64: the sum of the log-probabilities of the tokens written)."""
    N = src.shape[0]
    fill = fill_id(model.cfg, eos_id)
    out = torch.full((N, max_new), fill, dtype=torch.long)
    scores = torch.zeros(N, dtype=torch.float64)
    tgt = torch.full((N, 1), sos_id, dtype=torch.long)
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(max_new):
        logp = F.log_softmax(run(model, src, tgt)[:, t].double(), dim=-1)     # (N, Vt)
        nxt = torch.empty(N, dtype=torch.long)
        for n in range(N):
            if done[n]:
                nxt[n] = fill
                continue
            row = logp[n]
            best = int(torch.argmax(row))            # torch.argmax returns the first maximum
            if margins is not None and row.numel() > 1:
                top2 = torch.topk(row, 2).values
                margins.add((top2[0] - top2[1]).item())
            out[n, t] = best
            scores[n] += row[best]
            nxt[n] = best
            done[n] = best == eos_id
        if done.all():
            break
        tgt = torch.cat([tgt, nxt[:, None]], dim=1)
    return out, scores


@torch.no_grad()
def beam_decode_one(model, src_row, sos_id, eos_id, max_new, beam_width, length_penalty,
                    margins=None):
    """decode_beam of decode.h for one source row (1, S). Returns (tokens,
    normalised score)."""
    beams = [([], 0.0)]
    finished = []                                    # (tokens, normalised score)
    for _ in range(max_new):
        if not beams:
            break
        tgt = torch.tensor([[sos_id] + toks for toks, _ in beams], dtype=torch.long)
        logits = run(model, src_row.expand(len(beams), -1), tgt)[:, -1].double()
        logp = F.log_softmax(logits, dim=-1)         # (beams, Vt)
        cands = [(lp + logp[b, v].item(), b, v) for b, (_, lp) in enumerate(beams)
                 for v in range(logp.shape[1])]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        if margins is not None and len(cands) > beam_width:
            margins.add(cands[beam_width - 1][0] - cands[beam_width][0])
        beams = []
        for score, b, v in cands[:beam_width]:
            toks = tgt[b, 1:].tolist() + [v]
            if v == eos_id:
                finished.append((toks, score / len(toks) ** length_penalty))
            else:
                beams.append((toks, score))
    for toks, score in beams:
        finished.append((toks, score / len(toks) ** length_penalty))
    best = 0
    for i, (_, s) in enumerate(finished):
        if s > finished[best][1]:
            best = i
    if margins is not None and len(finished) > 1:
        rest = [s for i, (_, s) in enumerate(finished) if i != best]
        margins.add(finished[best][1] - max(rest))
    return finished[best]


def beam_decode(model, src, sos_id, eos_id, max_new, beam_width, length_penalty,
                margins=None):
    """beam_decode_one for every row: (out (N, max_new) int64, scores (N,))."""
    N = src.shape[0]
    out = torch.full((N, max_new), fill_id(model.cfg, eos_id), dtype=torch.long)
    scores = torch.zeros(N, dtype=torch.float64)
    for n in range(N):
        toks, score = beam_decode_one(model, src[n:n + 1], sos_id, eos_id, max_new, beam_width,
                                      length_penalty, margins)
        out[n, :len(toks)] = torch.tensor(toks, dtype=torch.long)
        scores[n] = score
    return out, scores


def topk(logits, k, margins=None):
    """model_topk: the k most probable classes of softmax(logits) per row,
    descending, ties to the lower id. Returns (ids int64, probs), (..., k).
    Ranked by the logits (the same order, without the underflow of tiny
    probabilities)."""
    logits = logits.double()
    probs = torch.softmax(logits, dim=-1)
    s, ids = torch.sort(logits, dim=-1, descending=True, stable=True)
    if margins is not None:
        upto = min(k + 1, s.shape[-1])
        if upto > 1:
            margins.add((s[..., :upto - 1] - s[..., 1:upto]).min().item())
    return ids[..., :k], torch.gather(probs, -1, ids[..., :k])


# ---------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------

# A whole model chains what chapters 05 and 06 test one stack at a time: the
# front end (an embedding row times a scale, plus a position row: a product
# and a sum, exact to an ulp), up to three encoder and three decoder layers
# and the generator (a float32 sum of D products). LayerNorm keeps values of
# order 1 between layers, so errors do not grow from layer to layer; the
# weight gradients are sums over every position of the batch and reach
# about 50. As in chapter 05, each case also measures its own condition:
# PyTorch computes it in float32 too, and so do ROUNDING_DRAWS float64 runs
# with every parameter off by one float32 rounding; the atol is the larger of
# the fixed one and FLOAT32_ERROR_FACTOR times the largest of those errors
# (a random model with a tiny d_model is sometimes ill-conditioned: about 1
# case in 20 forward and 1 in 8 backward). The inputs are redrawn away from
# ReLU's kink (KINK_MARGIN) and from ill-conditioned LayerNorm rows
# (COND_MAX), the two discontinuities chapters 05 and 06 explain.
#
# Measured with `--measure 300` (after make), over random models of every
# kind with 1-3 layers per stack, d_model 4-32, up to 10 positions: where
# the fixed atol applied, the largest error was 4.2e-6 (logits) and 3.8e-5
# (a weight gradient), and at most 1.4e-6 and 2.5e-5 above rtol * |torch|.
# With the tolerances below the largest share of a tolerance used was 0.22
# (model) and 0.27 (model_backward), a margin of about 4. Before the
# perturbed runs joined PyTorch's float32 run, one `make verify` case in
# some thousands failed: a position whose logits move by 9e-5 when the
# weights move by one rounding, where PyTorch's float32 happened to land
# within 4.4e-6 and C's within 5.4e-5 (seed 1581428051, now 0.19 of its
# tolerance).
MODEL_TOL = dict(atol=1e-5, rtol=1e-5)
MODEL_BACKWARD_TOL = dict(atol=1e-4, rtol=2e-5)
FLOAT32_ERROR_FACTOR = 4.0
ROUNDING_DRAWS = 8
KINK_MARGIN = 1e-4
COND_MAX = 20.0
# Decoding compares scores: greedy takes an argmax, beam search keeps the
# beam_width best candidates and picks the best normalised score, top-k
# sorts. float32 C agrees with float64 PyTorch only where the compared
# values are further apart than float32's error of the logits (about 1e-5
# for logits up to 50). Every decoding case checks, over every decision it
# makes, that the gap is at least DECODE_MARGIN (a golden case asserts it,
# a random case is redrawn). The token ids are then compared exactly; the
# scores (sums of up to max_new log-probabilities, each off by about the
# logits' error) with DECODE_TOL, the probabilities of top-k (relative
# error about the logits' absolute error) with TOPK_TOL. Measured (--measure
# 300): at most 1.7e-5 on a score, 5.2e-6 on a probability.
DECODE_MARGIN = 1e-3
DECODE_TOL = dict(atol=5e-5, rtol=1e-5)
TOPK_TOL = dict(atol=2e-6, rtol=1e-4)
# A checkpoint's tensors travel through C unchanged: load, save, bit for bit.
CHECKPOINT_TOL = dict(atol=0.0, rtol=0.0)


# ---------------------------------------------------------------------------
# Golden and random cases
# ---------------------------------------------------------------------------

def f32(t):
    """The float32 values C will see, held in float64."""
    return t.float().double()


class float64_plain_math:
    """Runs a float64 copy of the model in training mode with dropout 0:
    the plain math. (In evaluation mode, under no_grad, the encoder layers
    may take PyTorch's fused fast path.)"""

    def __init__(self, model):
        assert model.cfg["dropout"] == 0.0, "golden cases run with dropout 0"
        self.model = model

    def __enter__(self):
        self.was_training = self.model.training
        self.model.train()
        return self.model

    def __exit__(self, *exc):
        self.model.train(self.was_training)


def randomize(model, g):
    """Random, non-default values for every parameter of a float64 model, each
    rounded to float32: weights N(0, 1/fan_in), biases N(0, 0.2^2), LayerNorm
    weights 1 + N(0, 0.2^2), embedding rows (the padding row too: the forward
    reads it) and learned positions N(0, 1), learned scales sqrt(D) (1 + N(0,
    0.1^2)), so a forgotten weight, bias or scale shows."""
    D = model.cfg["d_model"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in ("src_scale", "tgt_scale"):
                p.copy_(f32(math.sqrt(D) * (1 + 0.1 * randn(g, 1))))
            elif "norm" in name.split(".")[-2] and name.endswith("weight"):
                p.copy_(f32(1 + 0.2 * randn(g, *p.shape)))
            elif name.endswith("bias"):
                p.copy_(f32(0.2 * randn(g, *p.shape)))
            elif name.startswith(("src_embed", "tgt_embed", "src_pos", "tgt_pos")):
                p.copy_(f32(randn(g, *p.shape)))
            else:
                p.copy_(f32(randn(g, *p.shape) / math.sqrt(p.shape[1])))


def random_ids(g, N, L, vocab, pad_id, pad_lengths=False, low=0):
    """(N, L) ids in [low, vocab) other than pad_id; with pad_lengths, the
    tail of each row but the first is padding (every row keeps position 0,
    so no query is left without a key)."""
    choices = torch.tensor([i for i in range(low, vocab) if i != pad_id], dtype=torch.long)
    ids = choices[torch.randint(0, len(choices), (N, L), generator=g)]
    if pad_lengths and pad_id >= 0 and L > 1:
        lengths = torch.randint(1, L + 1, (N,), generator=g)
        lengths[0] = L
        if N > 1:
            lengths[1] = min(lengths[1].item(), L - 1)     # at least one padded row
        ids[torch.arange(L)[None, :] >= lengths[:, None]] = pad_id
    return ids


def conditions(model, src, tgt):
    """Runs the float64 model once and returns (the smallest |pre-activation|
    of any linear1 that is not exactly 0, the largest LayerNorm cond)."""
    pres, conds = [], []
    hooks = []
    for m in model.modules():
        if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            hooks.append(m.linear1.register_forward_hook(
                lambda mod, i, o: pres.append(o.detach())))
        if isinstance(m, nn.LayerNorm):
            def cond(mod, inputs):
                x = inputs[0].detach()
                rstd = (x.var(dim=-1, unbiased=False) + mod.eps).rsqrt()
                conds.append((x.abs().amax(dim=-1) * rstd).max().item())
            hooks.append(m.register_forward_pre_hook(cond))
    with torch.no_grad():
        run(model, src, tgt)
    for h in hooks:
        h.remove()
    kink = min((p[p != 0].abs().min().item() for p in pres if (p != 0).any()), default=math.inf)
    return kink, max(conds, default=0.0)


def case_outputs(model, tensors, src, tgt):
    """The case's outputs as the model computes them in its own dtype: the
    logits and, for a backward case, every parameter's gradient."""
    if src.is_floating_point():                  # a set's features, in the model's dtype
        src = src.to(model.generator.weight.dtype)
    y = run(model, src, tgt)
    got = {"logits": y}
    if "grad_logits" in tensors:
        y.backward(tensors["grad_logits"].to(y.dtype))
        for k, p in model.named_parameters():
            got[f"grad_{k}"] = p.grad
    return got


def float32_error(model, tensors, outputs, src, tgt, seed):
    """How far a float32 computation of the case may land from float64: the
    largest |difference| over the case's outputs (a) when PyTorch computes
    the case in float32 and (b) over ROUNDING_DRAWS float64 runs whose
    parameters are each multiplied by 1 + 2^-24 z (z standard normal), one
    float32 rounding per value. (a) alone is a single sample of the rounding
    and can be lucky: in one case PyTorch's float32 logits at a position
    were off by 4.4e-6 where C's, summing in another order, were off by
    5.4e-5, and the perturbed runs moved them by up to 9e-5."""
    m32 = copy.deepcopy(model).float()
    if m32.has_sinusoids():
        m32.pe = sinusoidal_table(m32.cfg["max_len"], m32.cfg["d_model"]).float()
    m32.train()
    runs = [case_outputs(m32, tensors, src, tgt)]
    g = torch.Generator().manual_seed(seed)
    for _ in range(ROUNDING_DRAWS):
        m64 = copy.deepcopy(model)
        m64.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p in m64.parameters():
                p.mul_(1 + 2.0 ** -24 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        with float64_plain_math(m64):
            runs.append(case_outputs(m64, tensors, src, tgt))
    return max((got[name].double() - tensors[name].detach()).abs().max().item()
               for got in runs for name in outputs)


def model_case(name, cfg, seed, N, S, T=0, backward=False, pad_src=False, pad_tgt=False):
    """One "model" or "model_backward" case: a float64 model of cfg with
    random parameters, random ids (padded at the tail when asked) or for a
    set random features N(0, 1) (N, S, input_dim) rounded to float32,
    autograd of (logits * grad_logits).sum()."""
    g = generator(seed)
    cfg = full_config(**cfg)
    torch.manual_seed(seed)
    model = build_model(cfg).use_float64()
    seq2seq = cfg["kind"] == "seq2seq"
    is_set = cfg["kind"] == "set"
    for _ in range(200):
        randomize(model, g)
        if is_set:
            src = f32(randn(g, N, S, cfg["input_dim"]))
        else:
            src = random_ids(g, N, S, cfg["src_vocab"], cfg["pad_id"], pad_src)
        tgt = random_ids(g, N, T, cfg["tgt_vocab"], cfg["pad_id"], pad_tgt) if seq2seq else None
        kink, cond = conditions(model, src, tgt)
        if kink >= KINK_MARGIN and cond <= COND_MAX:
            break
    else:
        raise RuntimeError(f"{name}: no input away from ReLU's kink and well conditioned "
                           "in 200 draws")
    with float64_plain_math(model):
        logits = run(model, src, tgt)
    assert torch.isfinite(logits).all(), f"{name}: the reference logits are not finite"
    params = model.state_dict()
    tensors = {"features" if is_set else "src": src, **({"tgt": tgt} if seq2seq else {}),
               **params, "logits": logits}
    outputs = ["logits"]
    if backward:
        dlogits = f32(randn(g, *logits.shape))
        logits.backward(dlogits)
        tensors["grad_logits"] = dlogits
        D = cfg["d_model"]
        for k, p in model.named_parameters():
            grad = p.grad
            if k.endswith("in_proj_bias"):
                # The key bias adds q . b_k to every score of a query, which
                # softmax ignores: its gradient is exactly 0. Autograd's
                # float64 value is rounding noise (about 1e-16) that differs
                # from CPU to CPU, so the golden holds the exact 0.
                grad = grad.clone()
                grad[D:2 * D] = 0.0
            tensors[f"grad_{k}"] = grad
            outputs.append(f"grad_{k}")
    tol = MODEL_BACKWARD_TOL if backward else MODEL_TOL
    err32 = float32_error(model, tensors, outputs, src, tgt, seed)
    tol = dict(tol, atol=max(tol["atol"], float(f"{FLOAT32_ERROR_FACTOR * err32:.3g}")))
    op = "model_backward" if backward else "model"
    return Case(name, tensors, case_meta(op, seed, outputs=outputs, **config_metadata(cfg),
                                         **tol))


def checkpoint_case(name, model, cfg, seed):
    """A checkpoint exactly as save_checkpoint writes it (the same tensors and
    "model.*" metadata), plus the case metadata. C loads it strictly and
    writes every tensor back."""
    tensors = checkpoint_tensors(model)
    return Case(name, tensors, case_meta("checkpoint", seed, outputs=list(tensors),
                                         **config_metadata(cfg), **CHECKPOINT_TOL))


def decode_case(name, model, op, src, seed, sos_id, eos_id, max_new, beam_width=1,
                length_penalty=0.0, check_margin=True):
    """A "greedy" or "beam" case of a float64 model. Returns (case, smallest
    margin); with check_margin a margin below DECODE_MARGIN is an error."""
    length_penalty = torch.tensor(length_penalty, dtype=torch.float32).item()  # C's float
    margins = Margins()
    with float64_plain_math(model):
        if op == "greedy":
            out, scores = greedy_decode(model, src, sos_id, eos_id, max_new, margins)
        else:
            out, scores = beam_decode(model, src, sos_id, eos_id, max_new, beam_width,
                                      length_penalty, margins)
    if check_margin:
        assert margins.min >= DECODE_MARGIN, \
            f"{name}: a decoding decision is within {margins.min:.3g} of a tie"
    options = dict(sos_id=sos_id, eos_id=eos_id, max_new=max_new)
    if op == "beam":
        options.update(beam_width=beam_width, length_penalty=float(length_penalty))
    tensors = {"src": src, **model.state_dict(), "output": out, "score": scores}
    return Case(name, tensors, case_meta(op, seed, outputs=["output", "score"],
                                         **config_metadata(model.cfg), **options,
                                         **DECODE_TOL)), margins.min


def topk_case(name, model, src, tgt, k, seed, check_margin=True):
    margins = Margins()
    with float64_plain_math(model), torch.no_grad():
        logits = run(model, src, tgt)
    ids, probs = topk(logits, k, margins)
    if check_margin:
        assert margins.min >= DECODE_MARGIN, f"{name}: two logits within {margins.min:.3g}"
    tensors = {"src": src, **({"tgt": tgt} if tgt is not None else {}), **model.state_dict(),
               "topk_ids": ids, "topk_probs": probs}
    return Case(name, tensors, case_meta("topk", seed, outputs=["topk_ids", "topk_probs"],
                                         **config_metadata(model.cfg), k=k,
                                         **TOPK_TOL)), margins.min


# ---------------------------------------------------------------------------
# A small seq2seq model trained in PyTorch, for the decoding goldens
# ---------------------------------------------------------------------------

# The id layout of seq2seq tasks (chapter 01's specials): tokens from 3.
PAD, SOS, EOS = 0, 1, 2
TASK_TOKENS = 8              # ids 3..10
TASK_MAX_LEN = 6             # source lengths 2..6
TRAINED_CONFIG = dict(kind="seq2seq", src_vocab=3 + TASK_TOKENS, tgt_vocab=3 + TASK_TOKENS,
                      d_model=32, nhead=2, dim_feedforward=64, num_encoder_layers=1,
                      num_decoder_layers=1, max_len=TASK_MAX_LEN + 2, learned_pos=1,
                      final_norm=1, norm_first=1, pad_id=PAD)
TRAIN_STEPS = 400
# Trained weights are rounded to multiples of 2^-12 (see trained_model).
WEIGHT_GRID = 2.0 ** -12


def reverse_batch(g, n):
    """n examples of the reverse task: src (n, TASK_MAX_LEN) tokens padded
    with PAD; tgt (n, TASK_MAX_LEN + 2) = <sos> reversed <eos> padded."""
    lengths = torch.randint(2, TASK_MAX_LEN + 1, (n,), generator=g)
    src = torch.full((n, TASK_MAX_LEN), PAD, dtype=torch.long)
    tgt = torch.full((n, TASK_MAX_LEN + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lengths.tolist()):
        toks = torch.randint(3, 3 + TASK_TOKENS, (L,), generator=g)
        src[i, :L] = toks
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = toks.flip(0)
        tgt[i, L + 1] = EOS
    return src, tgt


_TRAINED = {}


def trained_model():
    """A seq2seq model trained on the reverse task with Adam: TRAIN_STEPS steps
    of 32 examples, in float64, one thread, deterministic algorithms, from a
    fixed seed (about 3 s). Float64 training still differs in its last bits
    between CPUs (the BLAS vector paths sum in different orders), and a few
    hundred optimizer steps carry such differences into the weights, so the
    weights are rounded to multiples of WEIGHT_GRID afterwards: the goldens
    are then the same on every machine (unless a weight lands within about
    1e-10 of a grid midpoint). Returns (model in float64, token accuracy of
    greedy decoding on 200 held-out examples)."""
    if "model" in _TRAINED:
        return _TRAINED["model"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(7000)
        model = build_model(full_config(**TRAINED_CONFIG)).use_float64()
        g = generator(7001)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
        model.train()
        for _ in range(TRAIN_STEPS):
            src, tgt = reverse_batch(g, 32)
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                                   ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.round(p / WEIGHT_GRID) * WEIGHT_GRID)
        src, tgt = reverse_batch(generator(7002), 200)
        with float64_plain_math(model):
            out, _ = greedy_decode(model, src, SOS, EOS, TASK_MAX_LEN + 1)
        want = tgt[:, 1:]
        mask = want != PAD
        accuracy = ((out == want) & mask).sum().item() / mask.sum().item()
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(threads)
    _TRAINED["model"] = (model, accuracy)
    return model, accuracy


def untrained_decoder(seed):
    """A random float64 seq2seq model (ids as the reverse task's, 7 target
    ids) whose generator is scaled up so its choices are clear, with <eos>
    favoured so that hypotheses end at different lengths; and 3 padded
    sources (3, 6)."""
    cfg = full_config(kind="seq2seq", src_vocab=9, tgt_vocab=7, d_model=16, nhead=2,
                      dim_feedforward=32, num_encoder_layers=1, num_decoder_layers=2,
                      max_len=8, scale_embedding=1, final_norm=1, pad_id=PAD)
    torch.manual_seed(seed)
    model = build_model(cfg).use_float64()
    g = generator(seed)
    randomize(model, g)
    with torch.no_grad():
        model.generator.weight.mul_(2.0)
        model.generator.bias[EOS] += 1.0
    return model, random_ids(g, 3, 6, 9, PAD, True)


# ---------------------------------------------------------------------------

# (name tag, config, N, S, T, pad_src, pad_tgt)
MODEL_CONFIGS = [
    # Seeds 000/004's reverse labeller: 10 digits, D 32, one head, one layer.
    ("labeller_reverse", dict(kind="labeller", src_vocab=10, tgt_vocab=10, d_model=32, nhead=1,
                              dim_feedforward=64, num_encoder_layers=1, max_len=16,
                              final_norm=0, pad_id=-1), 4, 16, 0, False, False),
    # Post-norm seq2seq, sinusoidal positions, sqrt(D) scale, padding both sides.
    ("seq2seq_post_pad_sqrt", dict(kind="seq2seq", src_vocab=11, tgt_vocab=9, d_model=16,
                                   nhead=2, dim_feedforward=32, num_encoder_layers=2,
                                   num_decoder_layers=1, max_len=10, scale_embedding=1,
                                   final_norm=1, pad_id=0), 3, 7, 6, True, True),
    # Pre-norm, final norms, learned positions and scales, 2 + 2 layers, 4 heads.
    ("seq2seq_pre_learned_2x2", dict(kind="seq2seq", src_vocab=13, tgt_vocab=10, d_model=16,
                                     nhead=4, dim_feedforward=24, num_encoder_layers=2,
                                     num_decoder_layers=2, max_len=8, learned_pos=1,
                                     scale_embedding=2, final_norm=1, norm_first=1, pad_id=0),
     3, 6, 5, True, True),
    # One shared embedding table, post-norm without final norms, 3 heads.
    ("seq2seq_shared", dict(kind="seq2seq", src_vocab=12, tgt_vocab=12, d_model=12, nhead=3,
                            dim_feedforward=20, num_encoder_layers=1, num_decoder_layers=2,
                            max_len=9, scale_embedding=1, share_embeddings=1, final_norm=0,
                            pad_id=1), 2, 9, 7, True, True),
    # The classifier, mean-pooled over the non-padding positions.
    ("classifier_pad", dict(kind="classifier", src_vocab=15, tgt_vocab=4, d_model=16, nhead=2,
                            dim_feedforward=24, num_encoder_layers=2, max_len=12,
                            learned_pos=1, final_norm=1, pad_id=0), 4, 10, 0, True, False),
    # The classifier without padding (a plain mean), pre-norm.
    ("classifier_nopad_pre", dict(kind="classifier", src_vocab=7, tgt_vocab=3, d_model=8,
                                  nhead=2, dim_feedforward=16, num_encoder_layers=1, max_len=6,
                                  scale_embedding=2, norm_first=1, final_norm=0, pad_id=-1),
     3, 6, 0, False, False),
    # A labeller with padding, pre-norm, learned positions, eps 1e-6.
    ("labeller_pad_pre", dict(kind="labeller", src_vocab=9, tgt_vocab=5, d_model=12, nhead=2,
                              dim_feedforward=16, num_encoder_layers=2, max_len=8,
                              learned_pos=1, norm_first=1, final_norm=1, pad_id=0, eps=1e-6),
     3, 8, 0, True, False),
    # Seed 004's set scorer (chapter 11): features in, one score per element.
    ("set_post", dict(kind="set", input_dim=7, d_model=16, nhead=2, dim_feedforward=24,
                      num_encoder_layers=2, max_len=10, final_norm=0), 3, 10, 0, False, False),
    # A set, pre-norm with the final norm, 3 heads, eps 1e-6, smaller than max_len.
    ("set_pre_final", dict(kind="set", input_dim=5, d_model=12, nhead=3, dim_feedforward=16,
                           num_encoder_layers=1, max_len=6, norm_first=1, final_norm=1,
                           eps=1e-6), 2, 5, 0, False, False),
    # Chapter 12's decoder-only language model: pre-norm, learned positions,
    # the final norm; and one with padding at the tail and post-norm.
    ("lm_pre", dict(kind="lm", src_vocab=11, d_model=16, nhead=2, dim_feedforward=24,
                    num_encoder_layers=2, max_len=9, learned_pos=1, norm_first=1,
                    final_norm=1, pad_id=-1), 3, 9, 0, False, False),
    ("lm_pad_post", dict(kind="lm", src_vocab=8, d_model=12, nhead=3, dim_feedforward=16,
                         num_encoder_layers=1, max_len=8, final_norm=0, pad_id=0), 2, 7, 0,
     True, False),
]


def golden_cases():
    cases = []
    for i, (tag, cfg, N, S, T, ps, pt) in enumerate(MODEL_CONFIGS):
        cases.append(model_case(f"model_{tag}", cfg, 900 + i, N, S, T, False, ps, pt))
        cases.append(model_case(f"model_backward_{tag}", cfg, 920 + i, N, S, T, True, ps, pt))

    # A checkpoint of PyTorch's own initialisation (learned positions and
    # scales, shared embeddings: every kind of name), and the logits of the
    # same model, to check that model_load of this file gives them.
    cfg = full_config(kind="seq2seq", src_vocab=9, tgt_vocab=9, d_model=8, nhead=2,
                      dim_feedforward=16, num_encoder_layers=2, num_decoder_layers=1,
                      max_len=7, learned_pos=1, scale_embedding=2, share_embeddings=1,
                      final_norm=1, pad_id=0)
    torch.manual_seed(950)
    model = build_model(cfg)
    with tempfile.TemporaryDirectory() as tmp:      # the Python round trip, while at it
        save_checkpoint(model, cfg, Path(tmp) / "c.safetensors")
        back, cfg_back = load_checkpoint(Path(tmp) / "c.safetensors")
        assert cfg_back == cfg
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                      back.state_dict().values()))
    cases.append(checkpoint_case("checkpoint_seq2seq", model, cfg, 950))
    g = generator(951)
    model64 = copy.deepcopy(model).use_float64()
    src = random_ids(g, 2, 7, 9, 0, True)
    tgt = random_ids(g, 2, 5, 9, 0, True)
    with float64_plain_math(model64), torch.no_grad():
        logits = model64(src, tgt)
    tensors = {"src": src, "tgt": tgt, **model64.state_dict(), "logits": logits}
    cases.append(Case("model_checkpoint_seq2seq", tensors,
                      case_meta("model", 951, outputs=["logits"], **config_metadata(cfg),
                                **MODEL_TOL)))

    # Decoding with the trained reverse model.
    model, accuracy = trained_model()
    assert accuracy > 0.9, f"the reverse model reached only {accuracy:.3f} token accuracy"
    src, tgt = reverse_batch(generator(960), 6)
    cases.append(decode_case("greedy_reverse", model, "greedy", src, 960, SOS, EOS,
                             TASK_MAX_LEN + 2)[0])
    cases.append(decode_case("greedy_reverse_truncated", model, "greedy", src, 961, SOS, EOS,
                             3)[0])
    src, _ = reverse_batch(generator(962), 4)
    for i, (width, lp) in enumerate([(1, 0.0), (3, 0.6), (4, 1.0)]):
        tag = f"w{width}_lp{round(10 * lp)}"
        cases.append(decode_case(f"beam_reverse_{tag}", model, "beam", src, 963 + i, SOS, EOS,
                                 TASK_MAX_LEN + 2, width, lp)[0])
    src, tgt = reverse_batch(generator(970), 3)
    cases.append(topk_case("topk_reverse_k3", model, src, tgt[:, :-1], 3, 970)[0])
    # An untrained model that often writes <eos> early: here greedy, beam
    # search and the length penalties all choose differently (beam with
    # alpha 0 prefers the shortest hypotheses, alpha 1 the longest).
    model, src = untrained_decoder(984)
    cases.append(decode_case("greedy_untrained", model, "greedy", src, 984, SOS, EOS, 6)[0])
    for i, (width, lp) in enumerate([(3, 0.0), (3, 1.0), (4, 0.6)]):
        tag = f"w{width}_lp{round(10 * lp)}"
        cases.append(decode_case(f"beam_untrained_{tag}", model, "beam", src, 984, SOS, EOS, 6,
                                 width, lp)[0])
    # Top-k of an untrained classifier, every class (k = Vt).
    cfg = full_config(kind="classifier", src_vocab=8, tgt_vocab=5, d_model=8, nhead=2,
                      dim_feedforward=16, num_encoder_layers=1, max_len=6, pad_id=0)
    torch.manual_seed(971)
    model = build_model(cfg).use_float64()
    randomize(model, generator(971))
    src = random_ids(generator(972), 4, 6, 8, 0, True)
    cases.append(topk_case("topk_classifier_all", model, src, None, 5, 971)[0])
    return cases


# ---------------------------------------------------------------------------
# Random cases for make verify
# ---------------------------------------------------------------------------

VERIFY_OPS = ["model", "model_backward", "checkpoint", "greedy", "beam", "topk"]


def random_config(draw, kind=None):
    kind = kind or draw.choice(KINDS)
    H = draw.choice([1, 2, 3, 4])
    D = H * draw.randint(-(-4 // H), 32 // H)          # 4 <= D <= 32, a multiple of H
    if kind == "set":
        return full_config(kind=kind, input_dim=draw.randint(1, 20), d_model=D, nhead=H,
                           dim_feedforward=draw.randint(1, 48),
                           num_encoder_layers=draw.randint(1, 3),
                           max_len=draw.randint(10, 14), final_norm=draw.random() < 0.5,
                           norm_first=draw.random() < 0.5, eps=draw.choice([1e-5, 1e-5, 1e-6]))
    Vs = draw.randint(3, 20)
    Vt = Vs if kind == "lm" or (kind == "seq2seq" and draw.random() < 0.4) \
        else draw.randint(2, 20)
    share = kind == "seq2seq" and Vs == Vt and draw.random() < 0.5
    pad = draw.choice([-1, draw.randint(0, (min(Vs, Vt) if kind == "seq2seq" else Vs) - 1)])
    return full_config(kind=kind, src_vocab=Vs, tgt_vocab=Vt, d_model=D, nhead=H,
                       dim_feedforward=draw.randint(1, 48),
                       num_encoder_layers=draw.randint(1, 3),
                       num_decoder_layers=draw.randint(1, 3) if kind == "seq2seq" else 0,
                       max_len=draw.randint(10, 14), learned_pos=draw.random() < 0.5,
                       scale_embedding=draw.choice([0, 1, 2]), share_embeddings=share,
                       final_norm=draw.random() < 0.5, norm_first=draw.random() < 0.5,
                       pad_id=pad, eps=draw.choice([1e-5, 1e-5, 1e-6]))


def random_case(op, seed):
    draw = random.Random(seed)
    if op in ("model", "model_backward"):
        cfg = random_config(draw)
        N, S = draw.randint(1, 3), draw.randint(1, 10)
        T = draw.randint(1, 10) if cfg["kind"] == "seq2seq" else 0
        return model_case(op, cfg, seed, N, S, T, op == "model_backward",
                          draw.random() < 0.6, draw.random() < 0.6)
    if op == "checkpoint":
        cfg = random_config(draw)
        torch.manual_seed(seed)
        return checkpoint_case(op, build_model(cfg), cfg, seed)
    # Decoding: random untrained models (generator weights scaled up, so the
    # logits spread, and for greedy and beam <eos> favoured, so hypotheses
    # end at different lengths), redrawn until no decision is near a tie.
    kind = "seq2seq" if op in ("greedy", "beam") else draw.choice(KINDS[:3])   # ids only
    for attempt in range(100):
        cfg = random_config(draw, kind)
        g = generator(seed + attempt)
        torch.manual_seed(seed + attempt)
        model = build_model(cfg).use_float64()
        randomize(model, g)
        with torch.no_grad():
            model.generator.weight.mul_(4.0)
        N, S = draw.randint(1, 3), draw.randint(1, 8)
        src = random_ids(g, N, S, cfg["src_vocab"], cfg["pad_id"], draw.random() < 0.5)
        if op == "topk":
            T = draw.randint(1, 8)
            tgt = random_ids(g, N, T, cfg["tgt_vocab"], cfg["pad_id"], draw.random() < 0.5) \
                if kind == "seq2seq" else None
            k = draw.randint(1, cfg["tgt_vocab"])
            case, margin = topk_case(op, model, src, tgt, k, seed, check_margin=False)
        else:
            ids = [v for v in range(cfg["tgt_vocab"]) if v != cfg["pad_id"]]
            if len(ids) < 2:
                continue
            sos, eos = draw.sample(ids, 2)          # <sos> is never the padding id
            with torch.no_grad():
                model.generator.bias[eos] += 2.0
            max_new = draw.randint(1, cfg["max_len"])
            width = draw.randint(1, 4)
            lp = draw.choice([0.0, 0.6, 1.0])
            case, margin = decode_case(op, model, op, src, seed, sos, eos, max_new, width, lp,
                                       check_margin=False)
        if margin >= DECODE_MARGIN:
            return case
    raise RuntimeError(f"{op} {seed}: no case without near ties in 100 draws")


# ---------------------------------------------------------------------------
# --measure: where the tolerances come from
# ---------------------------------------------------------------------------

if __name__ == "__main__":
    sys.exit(measure_main(sys.modules[__name__], default_cases=100))
