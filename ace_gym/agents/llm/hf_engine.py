"""Chat engine on a local Hugging Face ``transformers`` model: batched, left-padded ``generate``."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from ace_gym.agents.base import Completion
from ace_gym.agents.llm.loading import loaded
from ace_gym.agents.llm.messages import completion_without_generation, render_prompts
from ace_gym.errors import ConfigError, integer, number, probability


class HFChatEngine:
    """A :class:`~ace_gym.agents.base.ChatEngine` that calls ``model.generate`` on a local model.

    ``model`` is a path or hub-style name (loaded with ``AutoModelForCausalLM.from_pretrained``)
    or a live ``PreTrainedModel`` (used as is, e.g. the model a Trainer is training; it is put in
    eval mode while generating and its mode restored after). ``tokenizer`` defaults to the one
    saved with the model; it needs a chat template. Conversations are rendered with
    ``apply_chat_template(..., tools=...)``, grouped into batches of ``batch_size``, left-padded
    and generated together.

    Sampling: ``temperature`` 0 means greedy decoding; otherwise each ``generate`` call samples
    under a torch seed drawn from ``numpy.random.default_rng(seed)`` inside a forked RNG, so
    outputs are reproducible for a given seed and call sequence and the caller's global torch
    RNG is untouched. The distribution is exactly what the engine is given: ``top_p``, ``top_k``
    (0 = no top-k), ``min_p`` (None = none) and ``repetition_penalty`` (1.0 = none), and nothing
    else: the model's own ``generation_config`` contributes only its end, pad and start ids (its
    sampling defaults, and transformers' fallback top-k of 50, never apply).
    ``generation_kwargs`` go to ``model.generate`` unchanged, beside all of these
    (:func:`checked_generation_kwargs` refuses, in one line, an entry that is one of the
    engine's own settings, would change how many sequences or which search it runs, or is no
    ``generate`` setting).

    Usage: ``prompt_tokens`` / ``completion_tokens`` are token counts; ``completion_token_ids``
    include the end-of-turn token when one was generated (``finish_reason`` "stop", else
    "length"). ``logprobs`` (with ``logprobs=True``, the default) are the log-probabilities of the
    generated ids under the model's distribution at the sampling temperature (softmax of
    ``logits / temperature``, before top-p truncation; of the raw logits when greedy), the
    convention trainers such as TRL use; the step logits are kept until the batch ends
    (batch x vocabulary x new tokens floats), so turn it off for long generations with large
    vocabularies. ``generate_ids`` generates from prompt token ids (see
    :class:`~ace_gym.agents.base.TokenChatEngine`). A conversation the chat template refuses
    (templates raise on shapes they do not support) returns the error as text with
    ``finish_reason="error"``.

    Context: ``max_context`` defaults to the model's ``max_position_embeddings``. A
    ``max_new_tokens`` that leaves no room for a prompt in it raises
    :class:`~ace_gym.errors.ConfigError` at construction, and a prompt that leaves less than
    ``max_new_tokens`` raises it from ``generate`` before anything is generated (naming
    ``max_new_tokens``, its value, the prompt's length, the context and the model): an episode the
    model cannot be given its turn in is a configuration to fix, never an empty turn that scores
    0; the rollouts let it propagate and store no record for the episodes in flight.
    A model or tokenizer path that does not load (missing, not a model, unreadable) raises
    :class:`~ace_gym.errors.EngineUnavailableError` naming the path; a ``dtype`` that is neither
    ``"auto"`` nor a floating-point torch dtype raises :class:`~ace_gym.errors.ConfigError`, and
    any other error the loader raises propagates as it is.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float | None = None,
        repetition_penalty: float = 1.0,
        batch_size: int = 8,
        seed: int = 0,
        max_context: int | None = None,
        logprobs: bool = True,
        dtype: Any = "auto",
        chat_template_kwargs: Mapping[str, Any] | None = None,
        generation_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        max_new_tokens = integer("max_new_tokens", max_new_tokens, minimum=1)
        batch_size = integer("batch_size", batch_size, minimum=1)
        temperature = number("temperature", temperature, minimum=0, note="(0 = greedy)")
        top_p = probability("top_p", top_p)
        top_k = integer("top_k", top_k, minimum=0)
        min_p = None if min_p is None else probability("min_p", min_p)
        repetition_penalty = number("repetition_penalty", repetition_penalty, above=0, note="(1.0 = none)")
        generation_kwargs = checked_generation_kwargs(generation_kwargs)
        model_path = str(model) if isinstance(model, (str, os.PathLike)) else None
        if isinstance(model, (str, os.PathLike)):
            dtype = _model_dtype(dtype)
            if tokenizer is None:
                tokenizer = model
            model = loaded("model", model, partial(AutoModelForCausalLM.from_pretrained, model, dtype=dtype))
        if tokenizer is None:
            raise ConfigError("tokenizer", None, "required when model is a live model object")
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = loaded("tokenizer", tokenizer, partial(AutoTokenizer.from_pretrained, tokenizer))
        if tokenizer.chat_template is None:
            raise ConfigError("tokenizer", getattr(tokenizer, "name_or_path", tokenizer), "has no chat template")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.repetition_penalty = repetition_penalty
        self.batch_size = batch_size
        self.max_context = max_context or getattr(model.config, "max_position_embeddings", None)
        self.model_path = model_path or str(getattr(model, "name_or_path", "") or type(model).__name__)
        if self.max_context is not None and max_new_tokens >= self.max_context:
            raise ConfigError(
                "max_new_tokens",
                max_new_tokens,
                f"leaves no room for a prompt in the model's context of {self.max_context} tokens "
                f"(model {self.model_path}); it must be below it",
            )
        self.logprobs = logprobs
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.generation_kwargs = dict(generation_kwargs or {})
        self._rng = np.random.default_rng(seed)
        eos = (
            model.generation_config.eos_token_id
            if model.generation_config.eos_token_id is not None
            else tokenizer.eos_token_id
        )
        self._stop_ids = set(eos if isinstance(eos, list) else [eos])
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(self._stop_ids))
        self._pad_id = int(pad)

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        """One completion per conversation, in order (see the class docstring for the contract)."""
        return self._complete(render_prompts(self.tokenizer, conversations, tools, self.chat_template_kwargs))

    def generate_ids(self, prompts: Sequence[list[int]]) -> list[Completion]:
        """One completion per prompt given as token ids, in order (same contract as :meth:`generate`)."""
        return self._complete([list(prompt) for prompt in prompts])

    def _complete(self, prompts: Sequence[list[int] | str]) -> list[Completion]:
        if self.max_context is not None:
            longest = max((len(prompt) for prompt in prompts if isinstance(prompt, list)), default=0)
            if longest + self.max_new_tokens > self.max_context:
                raise ConfigError(
                    "max_new_tokens",
                    self.max_new_tokens,
                    f"a prompt of {longest} tokens leaves {max(self.max_context - longest, 0)} of the model's "
                    f"context of {self.max_context} tokens (model {self.model_path}); lower max_new_tokens or "
                    "keep the episodes shorter (max_turns, a context policy: docs/training.md)",
                )
        completions = [completion_without_generation(prompt) for prompt in prompts]
        runnable = [i for i, completion in enumerate(completions) if completion is None]
        for start in range(0, len(runnable), self.batch_size):
            batch = runnable[start : start + self.batch_size]
            batch_prompts = [prompt for i in batch if isinstance(prompt := prompts[i], list)]
            for i, completion in zip(batch, self._generate_batch(batch_prompts), strict=True):
                completions[i] = completion
        return [completion for completion in completions if completion is not None]

    def _generate_batch(self, prompts: list[list[int]]) -> list[Completion]:
        import torch

        width = max(len(ids) for ids in prompts)
        input_ids = torch.full((len(prompts), width), self._pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        device = self.model.device
        sampling: dict[str, Any] = {"repetition_penalty": self.repetition_penalty}
        if self.temperature > 0:
            sampling.update(do_sample=True, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
            sampling.update({} if self.min_p is None else {"min_p": self.min_p})
        else:
            sampling.update(do_sample=False)
        torch_seed = int(self._rng.integers(2**63 - 1))
        was_training = self.model.training
        model_defaults = self.model.generation_config
        self.model.generation_config = _ids_only(model_defaults)
        self.model.eval()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
                torch.manual_seed(torch_seed)
                output = self.model.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention_mask.to(device),
                    max_new_tokens=self.max_new_tokens,
                    pad_token_id=self._pad_id,
                    eos_token_id=sorted(self._stop_ids),
                    use_cache=True,
                    return_dict_in_generate=True,
                    output_logits=self.logprobs,
                    **sampling,
                    **self.generation_kwargs,
                )
        finally:
            self.model.generation_config = model_defaults
            self.model.train(was_training)
        new_tokens = output.sequences[:, width:]
        token_logprobs = self._token_logprobs(output.logits, new_tokens) if self.logprobs else None
        completions = []
        for row, ids in enumerate(prompts):
            new_ids = new_tokens[row].tolist()
            stop = next((k for k, token in enumerate(new_ids) if token in self._stop_ids), None)
            generated = new_ids if stop is None else new_ids[: stop + 1]
            text_ids = generated if stop is None else generated[:-1]
            completions.append(
                Completion(
                    text=self.tokenizer.decode(text_ids, skip_special_tokens=True),
                    prompt_tokens=len(ids),
                    completion_tokens=len(generated),
                    prompt_token_ids=ids,
                    completion_token_ids=generated,
                    finish_reason="length" if stop is None else "stop",
                    logprobs=None if token_logprobs is None else token_logprobs[row][: len(generated)],
                )
            )
        return completions

    def _token_logprobs(self, step_logits: Sequence[Any], new_tokens: Any) -> list[list[float]]:
        """Per row, the log-probability of each generated token (``step_logits[k]`` scores step k)."""
        import torch

        scale = self.temperature if self.temperature > 0 else 1.0
        columns = [
            torch.log_softmax(logits.float() / scale, dim=-1).gather(1, new_tokens[:, k : k + 1]).squeeze(1)
            for k, logits in enumerate(step_logits)
        ]
        return torch.stack(columns, dim=1).tolist()


ENGINE_SETTINGS = frozenset(
    {
        "max_new_tokens",
        "max_length",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "do_sample",
        "eos_token_id",
        "pad_token_id",
        "use_cache",
        "return_dict_in_generate",
        "output_logits",
        "output_scores",
        "generation_config",
        "inputs",
        "input_ids",
        "attention_mask",
    }
)
"""``model.generate`` arguments :class:`HFChatEngine` sets from its own (the sampling settings,
the length, the end ids, the output shape): a ``generation_kwargs`` entry among them is refused
rather than passed twice or silently ignored."""
ONE_SEQUENCE_SETTINGS = frozenset(
    {
        "num_return_sequences",
        "num_beams",
        "num_beam_groups",
        "penalty_alpha",
        "dola_layers",
        "custom_generate",
        "token_healing",
        "stop_strings",
        "stopping_criteria",
        "max_time",
    }
)
"""``model.generate`` settings :class:`HFChatEngine` refuses because its completions are one
sequence per prompt, sampled (or greedy) from the model's distribution after the prompt's own ids,
ending at an end id or at ``max_new_tokens``: more sequences, a search or another decoding loop,
a rewritten prompt, or other stops (strings, criteria, a clock) would break that contract."""


def checked_generation_kwargs(generation_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``generation_kwargs`` as a dict, every entry a ``transformers`` ``generate`` setting that
    :class:`HFChatEngine` passes on unchanged; ConfigError (one line, naming the entry) for one of
    :data:`ENGINE_SETTINGS`, :data:`ONE_SEQUENCE_SETTINGS`, or a name ``generate`` does not take
    (vLLM's ``stop``, ``max_tokens`` or ``n``, a typo)."""
    from transformers import GenerationConfig, GenerationMixin

    kwargs = dict(generation_kwargs or {})
    named = inspect.signature(GenerationMixin.generate).parameters.values()
    # generate's catch-all **kwargs and the config's version stamp are no settings: passed, they are ignored
    known = (set(GenerationConfig().to_dict()) - {"transformers_version"}) | {
        p.name for p in named if p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    for name, value in kwargs.items():
        if name in ENGINE_SETTINGS:
            problem = "is one of the engine's own settings: give it as the engine's argument"
        elif name in ONE_SEQUENCE_SETTINGS:
            problem = "the engine samples one sequence per prompt, ending at the model's end ids or max_new_tokens"
        elif name not in known or name.startswith("_") or name == "self":
            problem = "is no transformers generate() setting"
        else:
            continue
        raise ConfigError(f"generation_kwargs[{name!r}]", value, problem)
    return kwargs


ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
"""What a model's ``generation_config`` may contribute to the engine's generation."""


def _ids_only(config: Any) -> Any:
    """A ``GenerationConfig`` holding only ``config``'s :data:`ID_FIELDS`: what the engine puts in
    the model's place while it generates, so that no sampling default of the model's applies."""
    from transformers import GenerationConfig

    return GenerationConfig(**{name: getattr(config, name, None) for name in ID_FIELDS})


def _model_dtype(dtype: Any) -> Any:
    """``dtype`` if it is ``"auto"``, a floating-point ``torch.dtype`` or the name of one (``"bfloat16"``);
    ConfigError naming ``dtype`` otherwise."""
    import torch

    resolved = getattr(torch, dtype, None) if isinstance(dtype, str) and dtype != "auto" else dtype
    if dtype == "auto" or (isinstance(resolved, torch.dtype) and resolved.is_floating_point):
        return dtype
    raise ConfigError("dtype", dtype, "must be 'auto' or a floating-point torch dtype (float32, bfloat16, float16)")
