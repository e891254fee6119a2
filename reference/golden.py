"""Writes golden/ from the reference, or checks that the committed goldens are
exactly what the reference makes (`--check`, run by CI).

    python -m reference.golden            rewrite golden/<chapter>/*.safetensors
    python -m reference.golden --check    regenerate into a temporary folder and
                                          compare tensor by tensor, bit for bit
    --chapter NN_name                     only that chapter (either mode)
"""

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open

from reference import chapter_modules
from reference.common import write_case

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def write_chapter(module, folder, keep_identical=False):
    """Writes every case of a chapter into folder. With keep_identical, a file
    whose content already equals the new case is left untouched (safetensors
    orders metadata keys differently from run to run, so bytes alone would
    always change)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = set()
    for case in module.golden_cases():
        assert case.name not in names, f"duplicate case name {case.name}"
        names.add(case.name)
        path = folder / f"{case.name}.safetensors"
        if keep_identical and path.exists():
            fresh = path.with_suffix(".new")
            write_case(fresh, case)
            if differences(fresh, path):
                fresh.replace(path)
            else:
                fresh.unlink()
        else:
            write_case(path, case)
    return names


def load(path):
    with safe_open(str(path), framework="pt") as f:
        return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}


# The reference computes in float64, whose last bits differ between CPUs:
# torch's kernels sum in another order with AVX-512 than with AVX2 (seen on
# the gradients of chapters 02, 03, 05 and 06: up to 1e-14 against values of
# order 1, and in the key slice of in_proj_bias, a gradient that is 0 in
# exact arithmetic, rounding noise of 1e-16 that also survives the cast to
# float32). A float tensor counts as the same when every value is within
# FLOAT_RTOL of the tensor's largest value: a hundred float64 roundings, a
# million times below what float32 code (and so any test) can see.
# Everything else (ids, metadata, shapes, dtypes) must be equal.
FLOAT_RTOL = 1e-13


def same_values(a, b):
    if a.dtype == torch.bool:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    if torch.equal(a, b) or not a.is_floating_point():
        return torch.equal(a, b)
    a, b = a.double(), b.double()
    finite = torch.isfinite(a)
    # infinities and NaNs (masks, fully masked rows) must sit in the same places
    if not torch.equal(finite, torch.isfinite(b)) or \
            not torch.equal(torch.isnan(a), torch.isnan(b)) or \
            not torch.equal(a[torch.isinf(a)], b[torch.isinf(a)]):
        return False
    if not finite.any():
        return True
    a, b = a[finite], b[finite]
    scale = max(a.abs().max().item(), b.abs().max().item(), 1e-300)
    return (a - b).abs().max().item() <= FLOAT_RTOL * scale


def differences(fresh, committed):
    """The ways two case files differ, as short strings (empty when identical,
    float tensors up to FLOAT_RTOL)."""
    meta_a, tensors_a = load(fresh)
    meta_b, tensors_b = load(committed)
    found = []
    if meta_a != meta_b:
        keys = sorted(k for k in set(meta_a) | set(meta_b) if meta_a.get(k) != meta_b.get(k))
        found.append("metadata differs: " + ", ".join(keys))
    if set(tensors_a) != set(tensors_b):
        found.append(f"tensor names differ: {sorted(set(tensors_a) ^ set(tensors_b))}")
    for name in sorted(set(tensors_a) & set(tensors_b)):
        a, b = tensors_a[name], tensors_b[name]
        if a.dtype != b.dtype or a.shape != b.shape:
            found.append(f"{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
        elif not same_values(a, b):
            diff = (a.double() - b.double()).abs().max().item()
            found.append(f"{name}: values differ (max abs diff {diff:.3g})")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare a fresh generation with golden/ instead of writing")
    parser.add_argument("--chapter", help="only this chapter, e.g. 07_model")
    args = parser.parse_args()
    torch.set_num_threads(1)
    modules = chapter_modules(args.chapter)

    if not args.check:
        for module in modules:
            folder = GOLDEN / module.CHAPTER
            names = write_chapter(module, folder, keep_identical=True)
            for stale in folder.glob("*.safetensors"):
                if stale.stem not in names:
                    stale.unlink()
            print(f"golden/{module.CHAPTER}: {len(names)} cases")
        return 0

    problems = []
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for module in modules:
            names = write_chapter(module, Path(tmp) / module.CHAPTER)
            committed = {p.stem for p in (GOLDEN / module.CHAPTER).glob("*.safetensors")}
            for name in sorted(names - committed):
                problems.append(f"golden/{module.CHAPTER}/{name}: not committed (run make golden)")
            for name in sorted(committed - names):
                problems.append(f"golden/{module.CHAPTER}/{name}: no longer made by the reference")
            for name in sorted(names & committed):
                total += 1
                for d in differences(Path(tmp) / module.CHAPTER / f"{name}.safetensors",
                                     GOLDEN / module.CHAPTER / f"{name}.safetensors"):
                    problems.append(f"golden/{module.CHAPTER}/{name}: {d}")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"golden check: {total} committed cases regenerated, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
