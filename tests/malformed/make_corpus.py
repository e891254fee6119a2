"""Writes the malformed-input corpus: tests/malformed/<chapter>/<name>.

    python3 tests/malformed/make_corpus.py      (after make: one base is a checkpoint C writes)

Every file is something a clumsy user or an attacker could hand a chapter's
reader: a broken safetensors container, a case file that is a valid container
but an impossible case, a checkpoint with wrapped counters or a config whose
sizes wrap, a pairs file with a bad line. Each chapter's expected.txt says,
per file, a piece of the one-line error the reader must give; the chapter's
cmocka test (test_malformed_corpus) runs the real reader on each file and
asserts that line, a failure status and that no output file appears.

The files are small and committed; this script is how they were made (only
the standard library: the container is written byte by byte, so it can hold
what no well-behaved writer would write).
"""

import json
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------
# The container, by hand
# ---------------------------------------------------------------------------

def read(path):
    """(header dict without __metadata__, metadata dict, {name: bytes}) of a
    file (a relative path is taken from the repository's root)."""
    raw = (ROOT / path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    blobs = {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
    return header, meta, blobs


def container(header_text, data=b""):
    """The 8-byte length, the header text as given, the data."""
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + data


def pack(header, meta, blobs):
    """A well-formed file of the given entries (dtype and shape as given)."""
    entries, data = {}, b""
    if meta:
        entries["__metadata__"] = meta
    for name, v in header.items():
        b = blobs[name]
        entries[name] = {"dtype": v["dtype"], "shape": v["shape"],
                         "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(entries, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    return container(text, data)


def changed(path, meta=None, drop_meta=(), tensors=None, drop=()):
    """A golden case with metadata keys set or dropped and tensors replaced
    ({name: (dtype, shape, bytes)}) or dropped."""
    header, m, blobs = read(path)
    m = {k: v for k, v in m.items() if k not in drop_meta}
    m.update(meta or {})
    for name in drop:
        header.pop(name)
        blobs.pop(name)
    for name, (dtype, shape, b) in (tensors or {}).items():
        header[name] = {"dtype": dtype, "shape": shape}
        blobs[name] = b
    return pack(header, m, blobs)


def f32(n, value=0.5):
    return struct.pack(f"<{n}f", *([value] * n))


# ---------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------

def foundations():
    """The safetensors container itself (chapter 00's reader)."""
    ok = '{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    one = f32(1)

    def entry(**fields):
        e = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
        e.update(fields)
        return container(json.dumps({"x": e}), one)

    nested = '{"x":' + "[" * 2000 + "]" * 2000 + "}"
    return [
        ("empty.safetensors", b"", "too short"),
        ("five_bytes.safetensors", b"\x10\0\0\0\0", "too short"),
        ("header_length_huge.safetensors", struct.pack("<Q", 1 << 40) + b"{}",
         "above the 100 MB limit"),
        ("header_length_past_end.safetensors", struct.pack("<Q", 4096) + ok.encode(),
         "runs past the end"),
        ("header_not_json.safetensors", container("{x:1}"), "not valid JSON"),
        # cJSON 1.7.15-1.7.17 read one byte past the length they are given
        # here (upstream issue 800): the header ends the file.
        ("cjson_issue_800.safetensors", container('{"1":1,'), "not valid JSON"),
        ("header_array.safetensors", container("[1,2]"), "not a JSON object"),
        ("bytes_after_json.safetensors", container(ok + "xx", one), "unexpected bytes after"),
        ("nesting_2000_deep.safetensors", container(nested), "not valid JSON"),
        ("dtype_f16.safetensors", entry(dtype="F16"), "unsupported dtype 'F16'"),
        # A dtype string with a terminal escape and a newline: printed escaped, on one line.
        ("dtype_escape.safetensors", entry(dtype="\x1b[2J\nF32"), "\\x1b[2J\\x0aF32"),
        ("dtype_number.safetensors", entry(dtype=32), 'missing string "dtype"'),
        ("shape_negative.safetensors", entry(shape=[-1]), "not a non-negative integer"),
        ("shape_fraction.safetensors", entry(shape=[0.5]), "not a non-negative integer"),
        ("shape_string.safetensors", entry(shape=["1"]), "not a non-negative integer"),
        ("shape_not_array.safetensors", entry(shape=1), 'missing array "shape"'),
        ("rank_9.safetensors", entry(shape=[1] * 9), "rank 9 is above"),
        ("shape_wraps.safetensors", entry(shape=[1 << 31, 1 << 31, 1 << 31]),
         "shape is too large"),
        ("offsets_outside.safetensors", entry(data_offsets=[0, 8]), "lie outside"),
        ("offsets_reversed.safetensors", entry(data_offsets=[4, 0]), "0 <= begin <= end"),
        ("offsets_three.safetensors", entry(data_offsets=[0, 2, 4]), "must be [begin, end]"),
        ("offsets_too_big.safetensors", entry(data_offsets=[0, 2 ** 64]), "0 <= begin <= end"),
        ("size_mismatch.safetensors", entry(shape=[2]), "need 8 bytes but data_offsets give 4"),
        ("entry_not_object.safetensors", container('{"x":5}'), "not an object"),
        ("duplicate_name.safetensors",
         container('{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                   '"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f32(2)),
         "appears twice"),
        ("overlap.safetensors",
         container('{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                   '"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f32(2)),
         "overlaps"),
        ("gap.safetensors",
         container('{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f32(2)),
         "gap of 4 unused bytes"),
        ("bytes_after_tensors.safetensors", container(ok, f32(2)), "belong to no tensor"),
        ("metadata_not_object.safetensors", container('{"__metadata__":[1]}'),
         '"__metadata__" is not an object'),
        ("metadata_number.safetensors", container('{"__metadata__":{"op":1}}'),
         "metadata 'op' is not a string"),
    ]


def sdpa():
    g = "golden/02_sdpa/seed_example.safetensors"
    return [
        ("no_op.safetensors", changed(g, drop_meta=["op"]), "op"),
        ("unknown_op.safetensors", changed(g, meta={"op": "sdpa_v2"}), "sdpa_v2"),
        ("query_missing.safetensors", changed(g, drop=["query"]), "query"),
        ("query_i64.safetensors", changed(g, tensors={"query": ("I64", [3, 2], bytes(48))}),
         "query"),
        ("key_rows_differ.safetensors",
         changed(g, tensors={"key": ("F32", [4, 2], f32(8))}), "value"),
        ("dropout_1_5.safetensors", changed(g, meta={"dropout": "1.5"}), "dropout"),
        ("is_causal_maybe.safetensors", changed(g, meta={"is_causal": "maybe"}), "is_causal"),
        # Empty tensors, sizes that would need 2^62 attention weights.
        ("empty_but_huge.safetensors",
         changed(g, tensors={"query": ("F32", [1 << 31, 0], b""),
                             "key": ("F32", [1 << 31, 0], b""),
                             "value": ("F32", [1 << 31, 0], b"")}), "between 1 and"),
    ]


def mha():
    g = "golden/03_mha/worked_example.safetensors"
    return [
        ("nhead_0.safetensors", changed(g, meta={"nhead": "0"}), "nhead"),
        ("nhead_3.safetensors", changed(g, meta={"nhead": "3"}), "nhead"),
        ("nhead_text.safetensors", changed(g, meta={"nhead": "two"}), "nhead"),
        ("embed_dim_wraps.safetensors", changed(g, meta={"embed_dim": "4294967300"}),
         "embed_dim"),
        ("in_proj_short.safetensors",
         changed(g, tensors={"in_proj_weight": ("F32", [11, 4], f32(44))}), "in_proj_weight"),
    ]


def layernorm():
    g = "golden/04_layernorm/layernorm_c1_3x1.safetensors"
    return [
        ("eps_negative.safetensors", changed(g, meta={"eps": "-1"}), "eps"),
        ("eps_nan.safetensors", changed(g, meta={"eps": "nan"}), "eps"),
        ("weight_wrong_size.safetensors",
         changed(g, tensors={"weight": ("F32", [2], f32(2))}), "weight"),
    ]


def decoder():
    g = "golden/06_decoder/decoder_layer_post_T1_S1_N2_D4_H2.safetensors"
    return [
        ("nhead_0.safetensors", changed(g, meta={"nhead": "0"}), "nhead"),
        ("tgt_mask_f64.safetensors",
         changed(g, tensors={"tgt_mask": ("F64", [1, 1], bytes(8))}), "tgt_mask"),
        ("memory_width_3.safetensors",
         changed(g, tensors={"memory": ("F32", [2, 1, 3], f32(6))}), "memory"),
    ]


def model():
    g = "golden/07_model/model_classifier_nopad_pre.safetensors"
    return [
        # The sizes of issue 14: the parameter count wraps a size_t. The case
        # holds one (empty) tensor of the declared FFN size: the refusal must
        # come from the config, before any layout or allocation.
        ("config_wraps.safetensors",
         changed(g, meta={"model.d_model": "123456789", "model.dim_feedforward": "1531879606",
                          "model.num_encoder_layers": "42", "model.nhead": "1"},
                 tensors={"encoder.layers.0.linear1.weight": ("F32", [1531879606, 0], b"")}),
         "parameters"),
        ("max_len_16m.safetensors",
         changed(g, meta={"model.max_len": "16777215", "model.d_model": "32", "model.nhead": "1"}),
         "max_len"),
        ("d_model_text.safetensors", changed(g, meta={"model.d_model": "6x4"}), "model.d_model"),
        ("kind_gpt.safetensors", changed(g, meta={"model.kind": "gpt"}), "gpt"),
        ("src_id_out_of_vocab.safetensors",
         changed(g, tensors={"src": ("I64", [3, 6], struct.pack("<18q", *([99] * 18)))}),
         "99"),
        ("generator_missing.safetensors", changed(g, drop=["generator.weight"]),
         "generator.weight"),
    ]


def training():
    """Checkpoints (checkpoint_load): a small real one, written by chapter 08,
    with its counters or its config broken."""
    tmp = Path(tempfile.mkdtemp())
    try:
        ckpt = tmp / "ckpt.safetensors"
        subprocess.run([str(ROOT / "build/08_training"), "--train", "--seq-len", "2",
                        "--categories", "3", "--d-model", "4", "--ffn", "4", "--train-size", "8",
                        "--test-size", "8", "--batch-size", "8", "--epochs", "1",
                        "--checkpoint", str(ckpt)], check=True, stdout=subprocess.DEVNULL)
        header, meta, blobs = read(ckpt)
    finally:
        shutil.rmtree(tmp)

    def with_meta(**changes):
        m = dict(meta)
        m.update(changes)
        return pack(header, m, blobs)

    step_key = next(k for k in meta if k.endswith("step") and k.startswith("optimizer"))
    epoch_key = next(k for k in meta if k.endswith("epoch") and k.startswith("train"))
    return [
        ("step_negative.safetensors", with_meta(**{step_key: "-5"}), step_key),
        ("step_text.safetensors", with_meta(**{step_key: "12abc"}), step_key),
        ("epoch_2_64_minus_1.safetensors", with_meta(**{epoch_key: str(2 ** 64 - 1)}),
         epoch_key),
        ("ffn_2e9.safetensors", with_meta(**{"model.dim_feedforward": "2000000000"}),
         "parameters"),
        ("no_optimizer_state.safetensors",
         pack({k: v for k, v in header.items() if not k.startswith("optimizer")}, meta,
              {k: v for k, v in blobs.items() if not k.startswith("optimizer")}),
         "optimizer"),
    ]


def translation():
    """Pairs files (pairs_read with the Taylor tokenizers)."""
    good = "sin(x)|x-x**3/6+x**5/120+O(x**6)\n"
    return [
        ("no_bar.txt", (good + "sin(x) x\n").encode(), ":2:"),
        ("two_bars.txt", (good + "sin(x)|x|x\n").encode(), ":2:"),
        ("empty_line.txt", (good + "\n" + good).encode(), ":2:"),
        ("unknown_character.txt", (good + "sin(x)#|x\n").encode(), ":2:"),
        ("nul_byte.txt", (good + "sin(x)\0|x\n").encode(), ":2:"),
        ("empty_file.txt", b"", "empty"),
        ("all_too_long.txt", ("x" + "+x" * 30 + "|x\n").encode(), "none of its 1 pairs"),
    ]


CHAPTERS = {"00_foundations": foundations, "02_sdpa": sdpa, "03_mha": mha,
            "04_layernorm": layernorm, "06_decoder": decoder, "07_model": model,
            "08_training": training, "09_translation": translation}


def main():
    total = 0
    for chapter, make in CHAPTERS.items():
        folder = OUT / chapter
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        lines = []
        for name, content, expect in make():
            (folder / name).write_bytes(content)
            lines.append(f"{name}  {expect}")
        (folder / "expected.txt").write_text(
            "# file  piece of the one-line error it must get (tests/malformed/make_corpus.py)\n"
            + "\n".join(lines) + "\n")
        total += len(lines)
        print(f"{folder.relative_to(ROOT)}: {len(lines)} files")
    print(f"{total} malformed files")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
