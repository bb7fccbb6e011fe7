"""Merge a GGUF LoRA adapter into the weights of its base GGUF, offline.

llama.cpp applies an adapter at run time as two extra matrix products on every adapted
projection of every layer; in prefill that costs up to a quarter of the time on a CPU
(training/RESULTS.md). Merged, the judge runs at its base model's speed. Each adapted
tensor is dequantised, `W + scale * alpha / rank * B @ A` is added in float64 (rank-one
terms summed in a fixed order, so the file is the same on every machine), and the result
is stored as Q8_0, fine enough to keep the update; every other tensor is copied as it is.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from localjudge.errors import ModelError


def lora_tensors(adapter: Path) -> tuple[float, list[tuple[str, np.ndarray]]]:
    """(alpha, [(tensor name, data as stored)]) of a LoRA adapter: a GGUF adapter (llama.cpp's
    converter writes one), or the same tensors in a NumPy `.npz` with an `alpha` entry (how
    the shipped adapter is committed: no GGUF file in the repository)."""
    import gguf

    if adapter.suffix == ".npz":
        with np.load(adapter) as arrays:
            if "alpha" not in arrays.files:
                raise ModelError(f"{adapter}: not a LoRA adapter (no alpha)")
            return float(arrays["alpha"]), [(n, arrays[n]) for n in arrays.files if n != "alpha"]
    reader = gguf.GGUFReader(adapter)
    try:
        alpha = float(reader.fields["adapter.lora.alpha"].contents())
    except KeyError:
        raise ModelError(f"{adapter}: not a GGUF LoRA adapter (no adapter.lora.alpha)") from None
    return alpha, [(t.name, t.data) for t in reader.tensors]


def read_lora(adapter: Path) -> tuple[float, dict[str, dict[str, np.ndarray]]]:
    """(alpha, {base tensor name: {"lora_a": A, "lora_b": B}}) of a LoRA adapter, GGUF or
    `.npz` (`lora_tensors`)."""
    alpha, tensors = lora_tensors(adapter)
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for full_name, data in tensors:
        name, _, kind = full_name.rpartition(".")
        pairs.setdefault(name, {})[kind] = np.asarray(data, dtype=np.float64)
    return alpha, pairs


def merge_lora(base: Path, adapter: Path, out: Path, *, scale: float = 1.0) -> None:
    """Write `base` with `adapter` (GGUF or `.npz`) merged into it to `out` (atomically)."""
    import gguf
    from gguf import GGMLQuantizationType, GGUFValueType

    base_reader = gguf.GGUFReader(base)
    alpha, pairs = read_lora(adapter)
    names = {t.name for t in base_reader.tensors}
    if not pairs or any(set(p) != {"lora_a", "lora_b"} or n not in names for n, p in pairs.items()):
        raise ModelError(f"{adapter}: its tensors do not match the base model {base.name}")

    architecture = base_reader.fields["general.architecture"].contents()
    handle, partial = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".partial")
    os.close(handle)
    try:
        writer = gguf.GGUFWriter(partial, architecture)
        for field in base_reader.fields.values():
            if field.name.startswith("GGUF.") or field.name in (
                "general.architecture",
                "general.alignment",
            ):
                continue
            kind = field.types[0]
            sub_type = field.types[-1] if kind == GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), kind, sub_type=sub_type)
        for tensor in base_reader.tensors:
            pair = pairs.get(tensor.name)
            if pair is None:
                writer.add_tensor(
                    tensor.name,
                    tensor.data,
                    raw_shape=tensor.data.shape,
                    raw_dtype=tensor.tensor_type,
                )
                continue
            a, b = pair["lora_a"], pair["lora_b"]  # (rank, n_in), (n_out, rank)
            weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float64)
            update = np.zeros_like(weights)
            for k in range(a.shape[0]):
                update += np.outer(b[:, k], a[k, :])
            merged = (weights + update * (scale * alpha / a.shape[0])).astype(np.float32)
            data = gguf.quants.quantize(merged, GGMLQuantizationType.Q8_0)
            writer.add_tensor(
                tensor.name, data, raw_shape=data.shape, raw_dtype=GGMLQuantizationType.Q8_0
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, out)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
