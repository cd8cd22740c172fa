"""What the pretrained track's model costs on the device at hand: transformers' generation (one
prefill of a batch of long prompts, then each further token, with the KV cache) and one SFT step
(forward, backward and AdamW, gradient checkpointing), for a Llama of SmolLM2-135M-Instruct's
shape with random weights (the time does not depend on them), in float32 (TF32 matmuls on CUDA)
and in bfloat16. The numbers size ``bench_learning.py --track pretrained`` runs and
``learning_on_gpu.sh`` (docs/benchmarks.md, "The pretrained track on an accelerator").

    python benchmarks/bench_model_costs.py                       # CUDA when torch sees it, else CPU
    python benchmarks/bench_model_costs.py --batch 8 --prompt 2400 --new-tokens 16 --device cpu
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ace_gym.errors import ConfigError, integer

SMOLLM2_135M = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "tie_word_embeddings": True,
}
"""SmolLM2-135M-Instruct's shape (its GGUF file's, as converted by ``ace_gym.agents.llm.loading``)."""
TINY = {**SMOLLM2_135M, "vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
TINY.update(num_attention_heads=4, num_key_value_heads=2)
"""``--tiny``: a two-layer model of the same kind (a test runs the script with it)."""


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")  # TF32 matmuls on CUDA, as bench_learning.py sets there
    shape = TINY if args.tiny else SMOLLM2_135M
    rows = [
        *(
            generation(shape, args, name, dtype)
            for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16))
        ),
        *(
            sft_step(shape, args, name, autocast)
            for name, autocast in (("float32", False), ("bfloat16 autocast", True))
        ),
    ]
    print(f"device {device_name(args.device)}, torch {torch.__version__}")
    print("| what | precision | seconds | peak GiB |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['what']} | {row['precision']} | {row['seconds']} | {row['peak_gib']} |")
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=64, help="prompts generated together")
    parser.add_argument("--prompt", type=int, default=2400, help="prompt tokens (each within 100 of it, left-padded)")
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens generated after the prefill")
    parser.add_argument("--sft-batch", type=int, default=4)
    parser.add_argument("--sft-tokens", type=int, default=2900, help="tokens of each SFT sequence")
    parser.add_argument("--repeats", type=int, default=3, help="timed SFT steps after one warm-up step")
    parser.add_argument("--tiny", action="store_true", help="a two-layer model (a test of the script)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", args.device, "torch sees no CUDA device here")
    for name in ("batch", "new_tokens", "sft_batch", "repeats"):
        integer(name, getattr(args, name), minimum=1)
    for name in ("prompt", "sft_tokens"):
        integer(name, getattr(args, name), minimum=101, note="(prompts vary by 100 tokens)")
    return args


def generation(shape: dict[str, Any], args: argparse.Namespace, precision: str, dtype: Any) -> dict[str, Any]:
    """Seconds of the prefill (to the first token) and per further token for ``args.batch``
    prompts, read off one ``generate`` call by a logits processor that notes the time of each
    token (differences of two calls were noise where the prefill dominates, as on CPU)."""
    import torch
    from transformers import LogitsProcessorList

    model = build(shape, args.device, dtype).eval()
    generator = torch.Generator().manual_seed(1)
    lengths = torch.randint(args.prompt - 100, args.prompt + 100, (args.batch,), generator=generator)
    width = int(lengths.max())
    ids = torch.zeros((args.batch, width), dtype=torch.long)
    mask = torch.zeros((args.batch, width), dtype=torch.long)
    for row, length in enumerate(lengths.tolist()):
        ids[row, width - length :] = torch.randint(3, shape["vocab_size"], (length,), generator=generator)
        mask[row, width - length :] = 1
    ids, mask = ids.to(args.device), mask.to(args.device)
    clock = Clock(args.device)

    def generate(rows: slice, tokens: int) -> None:
        with torch.no_grad():
            model.generate(
                input_ids=ids[rows],
                attention_mask=mask[rows],
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=False,
                use_cache=True,
                pad_token_id=0,
                logits_processor=LogitsProcessorList([clock]),
            )

    generate(slice(0, 1), 2)  # warm-up
    reset_peak(args.device)
    began = finished(args.device)
    clock.stamps.clear()
    generate(slice(None), args.new_tokens + 1)
    stamps = clock.stamps
    prefill, per_token = stamps[0] - began, (stamps[-1] - stamps[0]) / args.new_tokens
    what = f"generate {args.batch} x ~{args.prompt} tokens: prefill to the first token / each further token"
    return {
        "what": what,
        "precision": precision,
        "seconds": f"{prefill:.2f} / {per_token:.4f}",
        "peak_gib": peak_gib(args.device),
    }


def sft_step(shape: dict[str, Any], args: argparse.Namespace, precision: str, autocast: bool) -> dict[str, Any]:
    """Median seconds of an SFT step on ``args.sft_batch`` sequences of ``args.sft_tokens`` tokens."""
    import torch

    model = build(shape, args.device, torch.float32).train()
    model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(3, shape["vocab_size"], (args.sft_batch, args.sft_tokens), device=args.device)

    def step() -> None:
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # warm-up
    reset_peak(args.device)
    seconds = sorted(timed(step, args.device) for _ in range(args.repeats))
    return {
        "what": f"SFT step, {args.sft_batch} x {args.sft_tokens} tokens, gradient checkpointing (median)",
        "precision": precision,
        "seconds": f"{seconds[len(seconds) // 2]:.3f}",
        "peak_gib": peak_gib(args.device),
    }


class Clock:
    """A logits processor that notes the time each token's scores are ready (after the device
    has finished them) and leaves the scores as they are."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.stamps: list[float] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.stamps.append(finished(self.device))
        return scores


def build(shape: dict[str, Any], device: str, dtype: Any) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**shape)).to(device, dtype=dtype)


def finished(device: str) -> float:
    """The time once the device has finished the work given it so far."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def timed(work: Callable[[], None], device: str) -> float:
    began = finished(device)
    work()
    return finished(device) - began


def reset_peak(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib(device: str) -> str:
    import torch

    return f"{torch.cuda.max_memory_allocated() / 2**30:.1f}" if device == "cuda" else "-"


def device_name(device: str) -> str:
    import platform

    import torch

    return (
        torch.cuda.get_device_name()
        if device == "cuda"
        else f"CPU ({platform.machine()}, {torch.get_num_threads()} threads)"
    )


if __name__ == "__main__":
    sys.exit(main())
