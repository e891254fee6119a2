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


def differences(fresh, committed):
    """The ways two case files differ, as short strings (empty when identical)."""
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
        elif not torch.equal(a.view(torch.uint8) if a.dtype == torch.bool else a,
                             b.view(torch.uint8) if b.dtype == torch.bool else b):
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
