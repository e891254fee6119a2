"""`make verify`: fresh random cases from PyTorch, evaluated by the C programs.

For every op a chapter lists in VERIFY_OPS, draws --cases new cases (random
shapes and options) from a seed that is new each run unless --seed is given,
runs `PROGRAM --case in.safetensors --out out.safetensors`, and compares each
tensor named in the case's "outputs" metadata with the expected one, using the
case's own atol/rtol (torch.allclose's rule). Prints one row per op:

    op, cases, max abs error, max rel error, pass/fail

where rel error is max|C - torch| / max(max|torch|, atol) over a tensor
(normwise: elementwise ratios explode where the expected value is near 0), and
exits non-zero if any case fails. A failing case is kept under
build/verify/failed/ so it can be replayed by hand.
"""

import argparse
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from reference import chapter_modules
from reference.common import write_case

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "verify"


def compare(expected, actual, atol, rtol):
    """(max abs error, normwise rel error, ok) of one output tensor."""
    if expected.dtype.is_floating_point:
        e, a = expected.double(), actual.double()
        diff = (a - e).abs()
        max_abs = diff.max().item() if diff.numel() else 0.0
        scale = max(e.abs().max().item() if e.numel() else 0.0, atol)
        ok = bool(torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=False))
        return max_abs, (max_abs / scale if scale > 0 else max_abs), ok
    ok = expected.shape == actual.shape and torch.equal(expected, actual)
    return (0.0 if ok else float("inf")), (0.0 if ok else float("inf")), ok


def run_case(program, case, index):
    """Evaluates one case; returns (max abs, max rel, ok, message)."""
    case_in, case_out = WORK / f"case{index}.safetensors", WORK / f"out{index}.safetensors"
    write_case(case_in, case)
    proc = subprocess.run([str(ROOT / program), "--case", str(case_in), "--out", str(case_out)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return float("inf"), float("inf"), False, proc.stderr.strip()
    expected, actual = load_file(str(case_in)), load_file(str(case_out))
    atol, rtol = float(case.meta["atol"]), float(case.meta["rtol"])
    worst_abs = worst_rel = 0.0
    ok, message = True, ""
    for name in case.meta["outputs"].split(","):
        if name not in actual:
            return float("inf"), float("inf"), False, f"output '{name}' missing"
        if actual[name].shape != expected[name].shape:
            return float("inf"), float("inf"), False, (
                f"{name}: shape {list(actual[name].shape)}, expected {list(expected[name].shape)}")
        a, r, good = compare(expected[name], actual[name], atol, rtol)
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        if not good and ok:
            ok, message = False, f"{name}: max abs err {a:.3g} (atol {atol}, rtol {rtol})"
    if ok:
        case_in.unlink()
        case_out.unlink()
    return worst_abs, worst_rel, ok, message


def main():
    parser = argparse.ArgumentParser(description="compare the C programs with PyTorch")
    parser.add_argument("--seed", type=int, help="seed of this run (default: a new one)")
    parser.add_argument("--cases", type=int, default=100, help="cases per op (default 100)")
    parser.add_argument("--chapter", help="only this chapter, e.g. 07_model")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    torch.set_num_threads(1)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    failed_dir = WORK / "failed"

    print(f"make verify: seed {seed}, {args.cases} cases per op (replay with make verify SEED={seed})")
    header = f"{'op':<32} {'cases':>6} {'max abs err':>12} {'max rel err':>12}  result"
    print(header)
    print("-" * len(header))
    all_ok = True
    started = time.time()
    draw = random.Random(seed)
    index = 0
    for module in chapter_modules(args.chapter):
        for op in module.VERIFY_OPS:
            worst_abs = worst_rel = 0.0
            failures = []
            for _ in range(args.cases):
                case_seed = draw.randrange(2**31)
                case = module.random_case(op, case_seed)
                a, r, ok, message = run_case(module.PROGRAM, case, index)
                worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
                if not ok:
                    failed_dir.mkdir(exist_ok=True)
                    kept = failed_dir / f"{op}_{case_seed}.safetensors"
                    shutil.move(WORK / f"case{index}.safetensors", kept)
                    failures.append(f"  {kept.relative_to(ROOT)}: {message}")
                index += 1
            result = "pass" if not failures else f"FAIL ({len(failures)})"
            print(f"{op:<32} {args.cases:>6} {worst_abs:>12.3g} {worst_rel:>12.3g}  {result}",
                  flush=True)
            for line in failures[:5]:
                print(line)
            all_ok = all_ok and not failures
    print(f"{'all pass' if all_ok else 'FAILURES'} in {time.time() - started:.1f} s")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
