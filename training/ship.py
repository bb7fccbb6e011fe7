"""Ship a trained adapter as the default judge: its tensors go to models/ as NumPy arrays
(no GGUF file is committed), and the registry entry gets the adapter's sha256 and that of
the merged judge GGUF, merged here exactly as `make install` merges it on a user's machine.

    .venv/bin/python training/ship.py --adapter training/out/all/judge-lora.gguf

`--unpack OUT` goes the other way: the shipped tensors written back as a GGUF LoRA adapter,
for `evaluate.py --adapter` to judge the shipped adapter at run time beside another one.

Runs in localjudge's own virtual environment. It changes models/ only; the notes of the
registry entry and training/RESULTS.md are written by hand, from the measurements. The
entry's shipped thresholds (`recommended.thresholds`) are removed: they were fitted on the
previous adapter's P(yes) and would decide the new one's verdicts unseen.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


def write_npz(adapter: Path, out: Path) -> None:
    """The GGUF adapter's tensors, as they are, and its alpha."""
    from localjudge.merge import lora_tensors

    alpha, tensors = lora_tensors(adapter)
    arrays = {name: np.array(data) for name, data in tensors}
    arrays["alpha"] = np.array(alpha)
    with out.open("wb") as f:
        np.savez(f, **arrays)


def write_gguf(npz: Path, out: Path, architecture: str) -> None:
    """`write_npz` undone: the committed tensors, as they are, and alpha in a GGUF LoRA adapter
    of the base model's architecture, which llama.cpp loads."""
    import gguf

    from localjudge.merge import lora_tensors

    alpha, tensors = lora_tensors(npz)
    writer = gguf.GGUFWriter(out, architecture)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    for name, data in tensors:
        writer.add_tensor(name, np.asarray(data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def forget_thresholds(entry: dict) -> dict:
    """Remove the entry's shipped thresholds (fitted on another adapter); return them."""
    return entry.get("recommended", {}).pop("thresholds", None) or {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    way = parser.add_mutually_exclusive_group(required=True)
    way.add_argument("--adapter", type=Path, help="GGUF LoRA from export.py")
    way.add_argument("--unpack", type=Path, metavar="OUT", help="write the shipped one to OUT")
    parser.add_argument("--entry", default="gemma-3-270m-judge")
    parser.add_argument("--models", type=Path, default=MODELS, help="the registry's folder")
    args = parser.parse_args(argv)

    from localjudge.merge import merge_lora
    from localjudge.model_registry import resolve, sha256_file

    registry_path = args.models / "registry.json"
    document = json.loads(registry_path.read_text(encoding="utf-8"))
    entry = next((e for e in document["models"] if e["name"] == args.entry), None)
    if entry is None or "merge" not in entry.get("source", {}):
        print(f"ship: {args.entry} is not a merged entry of models/registry.json", file=sys.stderr)
        return 2
    merge = entry["source"]["merge"]
    npz = args.models / merge["adapter"]
    base = resolve(merge["base"]).path
    if args.unpack:
        from localjudge.engine.gguf import read_gguf_header

        architecture = read_gguf_header(base).architecture
        write_gguf(npz, args.unpack, architecture)
        print(f"{args.unpack}: {npz.name}'s tensors as a GGUF LoRA adapter ({architecture})")
        return 0
    write_npz(args.adapter, npz)
    with tempfile.TemporaryDirectory() as tmp:
        merged = Path(tmp) / entry["file"]
        merge_lora(base, npz, merged)
        entry["sha256"] = sha256_file(merged)
    merge["adapter_sha256"] = sha256_file(npz)
    if dropped := forget_thresholds(entry):
        print(f"ship: removed recommended.thresholds {dropped}: fit them again for this adapter")
    registry_path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(
        f"{npz.name}: sha256 {merge['adapter_sha256']}; {entry['file']}: sha256 {entry['sha256']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
