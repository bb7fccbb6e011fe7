"""Tiny synthetic GGUF files for header and registry tests."""

from __future__ import annotations

import struct
from pathlib import Path


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(path: Path, *, num_tensors: int = 1, chat_template: str | None = None) -> Path:
    kv = [("general.architecture", "llama"), ("llama.context_length", 2048)]
    if chat_template is not None:
        kv.append(("tokenizer.chat_template", chat_template))
    body = (
        b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", num_tensors) + struct.pack("<Q", len(kv))
    )
    for key, value in kv:
        body += _string(key)
        if isinstance(value, int):
            body += struct.pack("<I", 4) + struct.pack("<I", value)
        else:
            body += struct.pack("<I", 8) + _string(value)
    path.write_bytes(body + b"\0" * 64)
    return path


# -- a tiny loadable model and a LoRA adapter for it (the `gguf` package, a dev dependency) --

TINY = {"n_embd": 32, "n_ff": 64, "n_head": 4, "n_layer": 1}


def _tiny_vocabulary() -> tuple[list[bytes], list[float], list[int]]:
    """SentencePiece-style: unknown, BOS, EOS, the 256 byte tokens, then a few pieces."""
    import gguf

    tokens = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>".encode() for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces = ["\u2581", *"abcdefghijklmnopqrstuvwxyz", '{"', '"}', '":"', "yes", "no", "\u2581the"]
    tokens += [p.encode() for p in pieces]
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(len(pieces))]
    return tokens, scores, [int(t) for t in types]


def write_tiny_model(path: Path, seed: int = 0) -> Path:
    """A one-layer llama GGUF that llama.cpp loads and runs (random F32 weights)."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens, scores, types = _tiny_vocabulary()
    e, ff, layers = TINY["n_embd"], TINY["n_ff"], TINY["n_layer"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(256)
    writer.add_embedding_length(e)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(TINY["n_head"])
    writer.add_head_count_kv(TINY["n_head"])
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(e // TINY["n_head"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)

    def tensor(name: str, *shape: int, scale: float = 0.2) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    n_vocab = len(tokens)
    tensor("token_embd.weight", n_vocab, e)
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(e, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{part}.weight", e, e)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(e, dtype=np.float32))
        tensor(f"blk.{i}.ffn_gate.weight", ff, e)
        tensor(f"blk.{i}.ffn_up.weight", ff, e)
        tensor(f"blk.{i}.ffn_down.weight", e, ff)
    writer.add_tensor("output_norm.weight", np.ones(e, dtype=np.float32))
    tensor("output.weight", n_vocab, e)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_tiny_lora(path: Path, rank: int = 4, seed: int = 1) -> Path:
    """A LoRA adapter GGUF for `write_tiny_model`'s attention and MLP projections."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    e, ff = TINY["n_embd"], TINY["n_ff"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    shapes = {"attn_q": (e, e), "attn_v": (e, e), "ffn_up": (ff, e), "ffn_down": (e, ff)}
    for part, (rows, cols) in shapes.items():  # a: (rank, in), b: (out, rank)
        a = rng.standard_normal((rank, cols)).astype(np.float32)
        b = rng.standard_normal((rows, rank)).astype(np.float32)
        writer.add_tensor(f"blk.0.{part}.weight.lora_a", a)
        writer.add_tensor(f"blk.0.{part}.weight.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
