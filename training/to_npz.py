"""A GGUF LoRA adapter (export.py's output) as the NumPy arrays the repository commits
(models/*-lora.npz: each tensor as it is stored, f16, and `alpha`); `merge_lora` reads
either form and merges them into the same weights.

    .venv/bin/python training/to_npz.py training/out/all/judge-lora.gguf models/gemma-3-270m-judge-lora.npz
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import gguf
import numpy as np


def main(argv: list[str]) -> int:
    source, target = Path(argv[0]), Path(argv[1])
    reader = gguf.GGUFReader(source)
    arrays = {t.name: np.array(t.data) for t in reader.tensors}
    arrays["alpha"] = np.array(float(reader.fields["adapter.lora.alpha"].contents()))
    np.savez_compressed(target, **arrays)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    print(f"{target}: {len(arrays) - 1} tensors, {target.stat().st_size} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
