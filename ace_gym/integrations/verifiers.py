"""Prime Intellect's verifiers (``pip install ".[verifiers]"``): ACE episodes as a ``verifiers.v1``
taskset, environment and harness.

verifiers finds plugins by importing the id's module and reading its ``__all__``: the plugin
package :mod:`ace_gym_verifiers` (installed with ace-gym) exports the classes below, so
``vf-eval ace-gym-verifiers`` (or ``EnvConfig(taskset={"id": "ace-gym-verifiers"})`` with
:func:`verifiers.v1.load_environment`) builds :class:`AceVerifiersEnv` over :class:`AceTaskset`, and
the player's default harness is :class:`AceChatHarness`.

One task is one :class:`~ace_gym.eval.EpisodeSpec` (every instance of every domain in
:class:`AceTasksetConfig`; choose with verifiers' own ``--select`` views). The env plays it
host-side through ace-gym's adapter stack (``StepBudget(ChatAdapter(...))``, the stack every
trainer integration uses): each model turn (its text and native ``tool_calls``, several calls a
turn allowed) is one ``step``; the adapter's tool replies and corrective message go back as the
next turn's messages. A malformed reply is such an observation, never an exception. The reward
``ace_score`` is ACE's own score of the episode (the truncated grid when the turn budget runs
out, or verifiers' own turn limit ends the exchange first); a run whose model calls failed records no
score (the trace carries the error).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterator
from typing import Any, cast

import certifi
import verifiers.v1 as vf
from openai import APIConnectionError, APIError, AsyncOpenAI, DefaultAsyncHttpxClient
from pydantic import Field
from verifiers.v1.dialects import parse_message
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.errors import MODEL_TRANSPORT_ERROR_EXIT_CODE

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.fit import FIT, TRAINING_DATASET
from ace_gym.instance.loading import resolve_dataset

PLUGIN_ID = "ace-gym-verifiers"
"""The id verifiers resolves to the :mod:`ace_gym_verifiers` package (``--env.taskset.id``)."""
REWARD = "ace_score"


class AceTasksetConfig(vf.TasksetConfig):
    """Which episodes the taskset yields: every instance of ``dataset`` (default the bundled 5x7
    set, for training: the published 5x5 names give the truth away; ``"5x5"`` to evaluate on the
    published data) for each of ``domains``,
    played with these :meth:`~ace_gym.eval.EpisodeSpec.of` arguments (planning ``settings``,
    AgencyBench ``scenario`` / ``feedback_rounds``, the context policy ``context``). ``env_kwargs``
    defaults to the recommended training settings' (:data:`~ace_gym.eval.fit.FIT`: compact
    observations, several calls a turn); ``{}`` plays the published replies."""

    domains: list[str] = Field(default_factory=lambda: list(DOMAIN_NAMES))
    dataset: str = TRAINING_DATASET
    seed: int = 0
    max_turns: int = 30
    tool_failure_rate: float = 0.0
    env_kwargs: dict[str, Any] = Field(default_factory=lambda: dict(FIT["env_kwargs"]))
    settings: list[str] = Field(default_factory=list)
    scenario: dict[str, Any] | None = None
    feedback_rounds: dict[str, Any] | None = None
    context: dict[str, Any] | None = None


class AceTaskData(vf.TaskData):
    episode: str
    """The episode's :class:`~ace_gym.eval.EpisodeSpec` JSON."""
    tools: list[dict[str, Any]]
    """The episode's tool schemas, OpenAI function-calling form (sent as ``tools=``)."""


class AceTask(vf.Task[AceTaskData, vf.State, vf.TaskConfig]):
    pass


class AceTaskset(vf.Taskset[AceTask, AceTasksetConfig]):
    """The ACE episodes of the config, in order: domain by domain, instance by instance. Each
    task's system prompt and prompt are the episode's opening messages."""

    def specs(self) -> Iterator[EpisodeSpec]:
        config = self.config
        for domain in config.domains:
            for index in range(len(resolve_dataset(config.dataset, domain))):
                yield EpisodeSpec.of(
                    domain,
                    config.dataset,
                    instance_index=index,
                    seed=config.seed,
                    tool_failure_rate=config.tool_failure_rate,
                    env_kwargs=dict(config.env_kwargs),
                    max_turns=config.max_turns,
                    settings=tuple(config.settings),
                    scenario=config.scenario,
                    feedback_rounds=config.feedback_rounds,
                    context=config.context,
                )

    def load(self) -> Iterator[AceTask]:
        for spec in self.specs():
            yield AceTask(task_data(spec), self.config.task)


def task_data(spec: EpisodeSpec) -> AceTaskData:
    """The task of ``spec``: its opening ``[system, user]`` messages and tool schemas."""
    env = spec.make_env()
    messages, info = env.reset(seed=spec.seed, options=spec.reset_options())
    env.close()
    return AceTaskData.model_validate(
        {
            "id": spec.key("verifiers"),
            "name": f"{spec.domain}#{spec.instance_index}",
            "system_prompt": messages[0]["content"],
            "prompt": messages[1]["content"],
            "episode": spec.to_json(),
            "tools": [dict(tool) for tool in info["tools"]],
        }
    )


class AceEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The model's seat; its harness runs in-process, so the runtime is the local one."""


class AceVerifiersEnv(vf.Env[AceEnvConfig]):
    """Plays the task's episode through the adapter stack with the ``player`` agent, one model
    turn a step, and records ``ace_score`` on the player's trace."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        spec = EpisodeSpec.from_json(task.data.episode)
        env = spec.make_env()
        env.reset(seed=spec.seed, options=spec.reset_options())
        score: float | None = None
        try:
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the task's prompt opens: the model speaks first
                while not segment.terminated:
                    replies, _, terminated, truncated, info = env.step(last_assistant(segment.messages))
                    if terminated or truncated:
                        score = float(info["score"])
                        break
                    segment = await interaction.turn([parse_message(dict(m)) for m in replies])
            if score is None:  # verifiers' own limits ended the exchange: the grid as it stands
                score = cast(AceEnv, env.unwrapped).score().score
        finally:
            env.close()
        trace = interaction.trace
        if trace.ok:  # a failed run (the model unreachable, a harness error) is never scored
            trace.record_reward(REWARD, score)


def last_assistant(messages: vf.Messages) -> dict[str, Any]:
    """The segment's model turn as the OpenAI message dict the chat adapter reads (an empty
    reply when the segment holds none: the adapter answers it with its corrective message)."""
    for message in reversed(messages):
        if message.role == "assistant":
            return message_to_wire(message)
    return {"role": "assistant", "content": ""}


class AceChatHarnessConfig(vf.HarnessConfig):
    max_retries: int = Field(3, ge=0)
    """Retries of a model call that fails with no answer, a timeout, HTTP 408/409/429 or 5xx (the
    openai client's backoff): a loaded endpoint's transient failure is retried, not a lost run."""


class AceChatHarness(vf.Harness[AceChatHarnessConfig]):
    """One model call a segment, in-process, through the rollout's interception endpoint, with
    the task's tool schemas as ``tools=``; the env executes the calls. A call that fails for a
    reason worth retrying is retried (``max_retries``); a model endpoint that still cannot be
    reached fails the run (verifiers' transport exit code), never a turn."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        system_prompt, prompt = self.resolve_prompt(data)
        messages: list[Any] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(message) for message in prompt or []]
        http_client = DefaultAsyncHttpxClient(verify=tls_context())
        retries = self.config.max_retries
        client = AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=retries, http_client=http_client)
        try:
            tools = cast(AceTaskData, data).tools  # the segment's view of this taskset's task
            await client.chat.completions.create(model=ctx.model, messages=messages, tools=cast(Any, tools))
        except APIConnectionError as error:
            return vf.ProgramResult(MODEL_TRANSPORT_ERROR_EXIT_CODE, "", repr(error))
        except APIError as error:
            return vf.ProgramResult(1, "", repr(error))
        finally:
            await client.close()
        return vf.ProgramResult(0, "", "")


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context (httpx's default CA bundle) for every segment's client: loading the bundle
    costs ~0.2 s, more than the rest of a turn."""
    return ssl.create_default_context(cafile=certifi.where())
