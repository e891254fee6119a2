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

from dataclasses import dataclass, field

import torch
from safetensors.torch import save_file


@dataclass
class Case:
    name: str
    tensors: dict                      # name -> torch.Tensor
    meta: dict = field(default_factory=dict)
    keep_float64: bool = False         # True: store float64 tensors as F64, not F32


def case_meta(op, seed, atol, rtol, outputs, **options):
    """The metadata every case carries, with options rendered as strings."""
    meta = {"op": op, "seed": seed, "atol": atol, "rtol": rtol, "outputs": ",".join(outputs)}
    meta.update(options)
    return meta


def _as_string(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


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
