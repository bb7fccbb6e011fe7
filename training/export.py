"""Convert a trained PEFT adapter to a GGUF LoRA that llama.cpp (and localjudge) loads.

    training/.venv/bin/python training/export.py --adapter training/out/adapter \
        --model-dir DIR --llama-cpp LLAMA_CPP_DIR --outfile models/ADAPTER.gguf

Uses llama.cpp's own `convert_lora_to_gguf.py` from the llama.cpp that the pinned
llama-cpp-python sdist vendors (so the GGUF matches the loader that reads it). The converter
needs the base model's `config.json`; it is written from the embedded GGUF's metadata.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from transformers import AutoConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", type=Path, required=True, help="PEFT adapter folder")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--gguf", default="gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp source folder")
    parser.add_argument("--outfile", type=Path, required=True)
    parser.add_argument("--outtype", default="f16", choices=["f16", "f32", "q8_0"])
    args = parser.parse_args(argv)
    converter = args.llama_cpp / "convert_lora_to_gguf.py"
    if not converter.is_file():
        parser.error(f"{converter} not found")
    config = AutoConfig.from_pretrained(args.model_dir, gguf_file=args.gguf).to_dict()
    config.pop("quantization_config", None)
    config["architectures"] = config.get("architectures") or ["Gemma3ForCausalLM"]  # not in GGUF
    with tempfile.TemporaryDirectory() as base:
        (Path(base) / "config.json").write_text(json.dumps(config, indent=2))
        args.outfile.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, str(converter), "--base", base, "--outfile", str(args.outfile),
            "--outtype", args.outtype, str(args.adapter),
        ]  # fmt: skip
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            print(f"export: the converter failed ({done.returncode})", file=sys.stderr)
            return done.returncode
    digest = hashlib.sha256(args.outfile.read_bytes()).hexdigest()
    print(f"{args.outfile}: {args.outfile.stat().st_size} bytes, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
