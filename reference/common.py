"""What every chapter's reference shares: the Case record and the case-file writer.

A case file is a safetensors file holding the inputs, the parameters (under
PyTorch state_dict names), the expected outputs and gradients, and in its
metadata the op, its options, the tolerances, the seed and the torch version.
The metadata key "outputs" lists, comma-separated, the tensors a chapter
program must write when it evaluates the case (`PROGRAM --case in --out out`).

Expected values are computed in float64 and rounded to float32 once, so they
are the float32 nearest to the exact answer and do not depend on which vector
path the CPU's BLAS takes; C, computing in float32, is compared against them
with the tolerance the case states.
"""

import argparse
import random
import subprocess
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    name: str
    tensors: dict                      # name -> torch.Tensor
    meta: dict = field(default_factory=dict)
    keep_float64: bool = False         # True: store float64 tensors as F64, not F32


def case_meta(op, seed, atol, rtol, outputs, info=None, **options):
    """The metadata every case carries, with options rendered as strings.

    `options` are the op's arguments, the keys a chapter program reads; it
    refuses any key that is not one of them. `info` holds what the case notes
    for people and tests (its sizes, a condition number, the loss PyTorch
    reported), stored as "info.<key>", which the programs never read."""
    meta = {"op": op, "seed": seed, "atol": atol, "rtol": rtol, "outputs": ",".join(outputs)}
    meta.update(options)
    meta.update({f"info.{k}": v for k, v in (info or {}).items()})
    return meta


def _as_string(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


CHECKSUM = "crc32."   # safetensors.h: the CRC-32 of each tensor's data, in the metadata


def checksums(tensors):
    """{"crc32.NAME": 8 hex digits} of each tensor's data (little-endian,
    contiguous), as C's writer puts in the metadata."""
    return {CHECKSUM + k: "%08x" % zlib.crc32(v.detach().contiguous().cpu().numpy().tobytes())
            for k, v in tensors.items()}


def check_checksums(path, meta, tensors):
    """Raises ValueError naming the tensor whose data does not match its
    checksum in meta; a file without checksums passes unchecked."""
    for key, want in meta.items():
        if not key.startswith(CHECKSUM):
            continue
        name = key[len(CHECKSUM):]
        if name not in tensors:
            raise ValueError(f"{path}: metadata '{key}' is the checksum of a tensor the file "
                             "does not have")
        got = checksums({name: tensors[name]})[key]
        if got != want:
            raise ValueError(f"{path}: tensor '{name}' does not match its checksum (crc32 {got}, "
                             f"the file says {want}): the file is damaged")


def write_case(path, case):
    """Writes one case to `path` as safetensors (float64 tensors become float32)."""
    tensors = {}
    for name, t in case.tensors.items():
        t = t.detach()
        if t.dtype == torch.float64 and not case.keep_float64:
            t = t.to(torch.float32)
        tensors[name] = t.contiguous()
    meta = {k: _as_string(v) for k, v in case.meta.items()}
    meta["torch_version"] = torch.__version__
    save_file(tensors, str(path), metadata=meta)


def generator(seed):
    """A torch.Generator seeded for one case, so each case is reproducible alone."""
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def randn(g, *shape):
    """Standard normal float64 values from generator g."""
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def measure(module, n_cases, seed, ops=None, program=None, extra=None):
    """Where a chapter's tolerances come from: runs n_cases fresh random
    cases of each op (module.VERIFY_OPS, or `ops`) through the chapter
    program (module.PROGRAM, or `program`) and prints per op the largest
    absolute error, the largest error relative to |expected| (over expected
    values above 1e-3 of the tensor's largest), the largest share of the
    case's own tolerance used (|C - torch| / (atol + rtol |torch|); 1 would
    fail) and the output where that happened. Integer outputs must match
    exactly, and a NaN expected (a loss over no rows) must come back NaN.

    extra, if given, is (label, function): function(case, name, expected,
    diff) is a chapter's own measure of one float output (float64 tensors),
    whose largest value is printed after the label."""
    program = Path(program or module.PROGRAM)
    if not program.is_absolute():
        program = ROOT / program
    draw = random.Random(seed)
    print(f"{'op':<32} {'cases':>6} {'max abs':>10} {'max rel':>10} {'of tol':>8}  worst output")
    with tempfile.TemporaryDirectory() as tmp:
        case_in, case_out = Path(tmp) / "in.safetensors", Path(tmp) / "out.safetensors"
        for op in ops or module.VERIFY_OPS:
            worst_abs = worst_rel = worst_share = worst_extra = 0.0
            worst_name = ""
            for _ in range(n_cases):
                case = module.random_case(op, draw.randrange(2**31))
                write_case(case_in, case)
                subprocess.run([str(program), "--case", str(case_in), "--out", str(case_out)],
                               check=True)
                expected, actual = load_file(str(case_in)), load_file(str(case_out))
                atol, rtol = float(case.meta["atol"]), float(case.meta["rtol"])
                for name in case.meta["outputs"].split(","):
                    e, a = expected[name], actual[name]
                    assert e.shape == a.shape, f"{op}: {name} has shape {a.shape}, not {e.shape}"
                    if not e.dtype.is_floating_point:
                        assert torch.equal(e, a), f"{op}: {name} differs"
                        continue
                    e, a = e.double(), a.double()
                    nan = e.isnan()
                    assert torch.equal(nan, a.isnan()), f"{op}: {name}: NaN where torch has none"
                    if nan.any():
                        e, a = e[~nan], a[~nan]
                    if e.numel() == 0:
                        continue
                    diff = (a - e).abs()
                    worst_abs = max(worst_abs, diff.max().item())
                    share = (diff / (atol + rtol * e.abs())).max().item() if atol or rtol \
                        else (0.0 if diff.max() == 0 else float("inf"))
                    if share > worst_share:
                        worst_share, worst_name = share, name
                    big = e.abs() > 1e-3 * e.abs().max()
                    if big.any():
                        worst_rel = max(worst_rel, (diff[big] / e.abs()[big]).max().item())
                    if extra:
                        worst_extra = max(worst_extra, extra[1](case, name, e, diff))
            more = f", {extra[0]} {worst_extra:.3g}" if extra else ""
            print(f"{op:<32} {n_cases:>6} {worst_abs:>10.3g} {worst_rel:>10.3g} "
                  f"{worst_share:>8.2f}  {worst_name}{more}", flush=True)


def measure_main(module, default_cases=200, extra=None):
    """The command line of a chapter module run as a program:
    python -m reference.chNN_name --measure N [--seed S] [--ops OP ...]."""
    parser = argparse.ArgumentParser(description="measure the C errors behind the tolerances")
    parser.add_argument("--measure", type=int, default=default_cases, metavar="N",
                        help=f"random cases per op (default {default_cases})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", nargs="*", metavar="OP", help="only these ops")
    parser.add_argument("--program", default=module.PROGRAM,
                        help=f"the chapter program (default {module.PROGRAM})")
    args = parser.parse_args()
    torch.set_num_threads(1)
    measure(module, args.measure, args.seed, args.ops, args.program, extra)
    return 0
