"""The PyTorch reference: one module per chapter (chNN_name.py).

Each chapter module defines
    CHAPTER      the chapter folder name, e.g. "02_sdpa"
    PROGRAM      the chapter program that evaluates its case files
    golden_cases()         the fixed cases committed under golden/CHAPTER/
    VERIFY_OPS             the ops `make verify` draws fresh cases for
    random_case(op, seed)  one fresh case of an op
golden.py writes and checks golden/, verify.py drives `make verify`.
"""

import importlib
import pkgutil
import re

# Every chNN_*.py beside this file, in chapter order.
CHAPTER_MODULES = [
    importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if re.fullmatch(r"ch\d\d_\w+", info.name)
]


def chapter_modules(chapter=None):
    """Every chapter module, or only the one whose CHAPTER is `chapter`."""
    if chapter is None:
        return CHAPTER_MODULES
    found = [m for m in CHAPTER_MODULES if m.CHAPTER == chapter]
    if not found:
        known = ", ".join(m.CHAPTER for m in CHAPTER_MODULES)
        raise SystemExit(f"--chapter: no chapter '{chapter}' (known: {known})")
    return found
