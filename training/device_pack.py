"""Pack training runs for a GPU machine reached only through a small upload (64 MiB a call
where RESULTS.md's "Seven times the data" was trained): the base GGUF with the embedding
rows that no example holds set to zero, and the folds' token files, xz-compressed and cut
into parts that each fit one upload.

    .venv/bin/python training/device_pack.py --data training/data-Mx training/data-Nx \
        --out .devpack --part-mb 44

On the machine, with the parts put together in order:

    cat part.* | xz -d | tar -x -C WORK
    python3 training/train.py --data WORK/data-Mx --model-dir WORK/model --device cuda ...

The zeroed rows change nothing that training computes: the inputs hold only the examples'
tokens, and the head is read only at each example's verdict tokens, which are kept too.
Runs in localjudge's own virtual environment (it needs `gguf`, which localjudge depends on).
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import gguf
import numpy as np

EMBEDDING = "token_embd.weight"


def used_tokens(folds: list[Path]) -> set[int]:
    """Every token id the folds' examples hold, their verdict tokens included."""
    used: set[int] = set()
    for fold in folds:
        for name in ("train.tokens.jsonl", "heldout.tokens.jsonl"):
            with (fold / name).open(encoding="utf-8") as f:
                for line in f:
                    example = json.loads(line)
                    used.update(example["ids"], example["yes"], example["no"])
    return used


def zero_unused_rows(source: Path, target: Path, used: set[int]) -> tuple[int, int]:
    """Copy the GGUF with the embedding rows of tokens not in `used` set to zero bytes, every
    other byte as it was; (rows zeroed, rows in all). A row of a quantized type is its
    blocks, so a zeroed row dequantizes to zeros."""
    shutil.copyfile(source, target)
    reader = gguf.GGUFReader(target, "r+")
    (tensor,) = [t for t in reader.tensors if t.name == EMBEDDING]
    rows = tensor.data  # one row per token: raw blocks, or values for an unquantized type
    if max(used, default=-1) >= rows.shape[0]:
        raise ValueError(f"token {max(used)} is past the embedding's {rows.shape[0]} rows")
    unused = np.ones(rows.shape[0], dtype=bool)
    unused[sorted(used)] = False
    rows[unused] = 0
    reader.data.flush()
    return int(unused.sum()), int(rows.shape[0])


class Parts(io.RawIOBase):
    """A write-only stream cut into files of at most `part_bytes`: out/part.00, part.01, ...
    (only what is written, so an archive is never held whole in memory)."""

    def __init__(self, out: Path, part_bytes: int):
        super().__init__()
        self.out, self.part_bytes = out, part_bytes
        self.paths: list[Path] = []
        self.file = None
        self.room = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        written = len(view)
        while view:
            if not self.room:
                self.next_part()
            take = min(self.room, len(view))
            self.file.write(view[:take])
            view, self.room = view[take:], self.room - take
        return written

    def next_part(self) -> None:
        if self.file:
            self.file.close()
        self.paths.append(self.out / f"part.{len(self.paths):02d}")
        self.file = self.paths[-1].open("wb")
        self.room = self.part_bytes

    def close(self) -> None:
        if self.file:
            self.file.close()
        super().close()


def write_parts(members: dict[str, Path], out: Path, part_bytes: int) -> list[Path]:
    """A tar of `members` (name in the archive -> path), xz-compressed, cut into files of at
    most `part_bytes`: out/part.00, part.01, ..."""
    with (
        Parts(out, part_bytes) as parts,
        lzma.open(parts, "wb", preset=6) as xz,
        tarfile.open(fileobj=xz, mode="w") as tar,
    ):
        for name, path in members.items():
            tar.add(path, arcname=name)
    return parts.paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True, help="make_data folds")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="gemma-3-270m", help="registry name or .gguf path")
    parser.add_argument("--part-mb", type=float, default=44.0, help="largest part, in MB")
    args = parser.parse_args(argv)

    from localjudge.model_registry import resolve

    source = resolve(args.model).path
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / source.name
        zeroed, total = zero_unused_rows(source, model, used_tokens(args.data))
        print(f"{source.name}: {zeroed} of {total} embedding rows zeroed")
        members = {f"model/{source.name}": model}
        for fold in args.data:
            for name in ("train.tokens.jsonl", "heldout.tokens.jsonl"):
                members[f"{fold.name}/{name}"] = fold / name
        parts = write_parts(members, args.out, int(args.part_mb * 1e6))
    for part in parts:
        print(f"{part}: {part.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
