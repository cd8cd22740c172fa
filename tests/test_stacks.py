"""The one wrapper registry and StackSpec (issue 28): every consumer lists and builds from it, a
stack round-trips through JSON, and an episode is a stack plus its instance, seed and trial (issue 41)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from ace_gym import stacks
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError
from ace_gym.eval import cli as eval_cli
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.planning.settings import PLANNING_WRAPPERS, SETTINGS, check_settings
from ace_gym.stacks import StackSpec
from ace_gym.wrapper_entry import WrapperEntry
from ace_gym.wrappers import ChatAdapter, StepBudget, ToolFailureInjection

ROOT = Path(__file__).resolve().parents[1]

# -- one registry, read by every consumer --------------------------------------------------------


def test_eval_wrappers_server_planning_and_registration__list_the_one_registry() -> None:
    settings = stacks.wrapper_names(settings=True)
    assert settings == tuple(e.name for e in sorted(PLANNING_WRAPPERS, key=lambda e: e.order) if e.setting)
    assert eval_cli.WRAPPER_CHOICES == settings  # ace-gym eval --wrappers
    assert tuple(SETTINGS) == settings and all(SETTINGS[name] is stacks.WRAPPERS[name] for name in settings)
    assert check_settings(reversed(settings)) == settings  # the registry's stacking order
    assert stacks.setting_names(reversed(settings)) == settings
    with pytest.raises(ConfigError, match="did you mean 'broken'") as caught:
        stacks.setting_names(["brokne"], "wrappers")
    assert caught.value.field == "wrappers"
    pytest.importorskip("pydantic")
    from ace_gym.server import factory

    assert tuple(factory.WRAPPERS) == stacks.accepted_names()  # ace-gym serve
    for name in stacks.WRAPPERS:
        assert factory.WRAPPERS[name] is factory.WRAPPERS[stacks.WRAPPERS[name].class_name]
    for benchmark in stacks.BENCHMARKS:  # the registered ids with wrappers (the setting variants)
        for declared in benchmark.envs:
            for env_id in declared.ids(DOMAIN_NAMES):
                registered = [(w.name, w.entry_point, w.kwargs) for w in gym.spec(env_id).additional_wrappers]
                assert all(stacks.WRAPPERS[entry.name] is entry for entry in declared.wrappers)
                assert registered == [(e.class_name, e.entry_point, dict(e.defaults)) for e in declared.wrappers]
    assert gym.spec("ACE-course-distractors-v0").additional_wrappers[0].name == "ExtraneousTools"


def test_registry__holds_each_name_class_and_order_once_in_stacking_order() -> None:
    entries = list(stacks.WRAPPERS.values())
    assert [e.order for e in entries] == sorted(e.order for e in entries)
    assert len({e.class_name for e in entries}) == len(entries)
    assert stacks.wrapper_entry("ChatAdapter") is stacks.WRAPPERS["chat_adapter"]  # class names are read too
    with pytest.raises(ConfigError, match="order"):
        stacks._check_registry([*entries, WrapperEntry("other", "m:Other", entries[0].order)])


class _Marker(gym.Wrapper):
    """A wrapper a test registers: it adds ``info["marker"]``."""

    def __init__(self, env: gym.Env, label: str = "x") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, label=label)
        gym.Wrapper.__init__(self, env)
        self.label = label

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return observation, {**info, "marker": self.label}


def test_adding_a_wrapper__is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = WrapperEntry("marker", f"{__name__}:_Marker", 350, {"label": "default"}, "marker")
    monkeypatch.setitem(stacks.WRAPPERS, "marker", entry)
    stack = StackSpec.of("ACE-course-v0", {"dataset": "5x5"}, ["step_budget", "marker", "chat_adapter"])
    assert [name for name, _ in stack.wrappers] == ["chat_adapter", "marker", "step_budget"]  # by order
    env = stack.make()
    try:
        assert isinstance(env, StepBudget) and isinstance(env.env, _Marker) and isinstance(env.env.env, ChatAdapter)
        assert env.reset(seed=0)[1]["marker"] == "default"
    finally:
        env.close()
    pytest.importorskip("pydantic")
    from ace_gym.server.factory import EnvFactory
    from ace_gym.server.protocol import MakeRequest

    served = EnvFactory(["ACE-course-v0"]).make("ACE-course-v0", MakeRequest.model_validate(stack.to_dict()))
    try:
        assert served.reset(seed=0)[1]["marker"] == "default"
    finally:
        served.close()


# -- StackSpec -----------------------------------------------------------------------------------


def test_stack_spec__round_trips_through_plain_json_and_keys_ignore_argument_order() -> None:
    stack = StackSpec.of(
        "ACE-course-v0", {"dataset": "5x5", "extra_query_num": 2}, [("failure_injection", {"rate": 0.5}), "unsolvable"]
    )
    data = json.loads(stack.to_json())
    assert data == {
        "env_id": "ACE-course-v0",
        "env_kwargs": {"dataset": "5x5", "extra_query_num": 2},
        "wrappers": [
            {"name": "failure_injection", "kwargs": {"rate": 0.5}},
            {"name": "unsolvable", "kwargs": {"p_unsolvable": 0.5}},
        ],
    }
    assert StackSpec.from_json(stack.to_json()) == stack
    reordered = StackSpec("ACE-course-v0", {"extra_query_num": 2, "dataset": "5x5"}, stack.wrappers)
    assert reordered.key() == stack.key()
    assert StackSpec("ACE-course-v0", {}, (("ToolFailureInjection", {"rate": 0.5}),)).wrappers == (
        ("failure_injection", {"rate": 0.5}),
    )


def test_stack_spec__make_names_the_stack_in_env_spec_which_gym_make_rebuilds() -> None:
    stack = StackSpec.of("ACE-course-v0", {"dataset": "5x5"}, [("failure_injection", {"rate": 0.5}), "chat_adapter"])
    env = stack.make()
    rebuilt = gym.make(env.spec, disable_env_checker=True)
    try:
        assert isinstance(env, ChatAdapter) and isinstance(env.env, ToolFailureInjection)
        assert [w.name for w in env.spec.additional_wrappers] == ["ToolFailureInjection", "ChatAdapter"]
        assert dataclasses.replace(rebuilt.spec, disable_env_checker=False).to_json() == env.spec.to_json()
    finally:
        env.close()
        rebuilt.close()


@pytest.mark.parametrize(
    ("build", "field", "message"),
    [
        (lambda: StackSpec("ACE-course-v0", {}, (("unsolvble", {}),)), "wrappers[0].name", "did you mean 'unsolvable'"),
        (lambda: StackSpec.of("ACE-course-v0", {}, ["chat_adaptr"]), "wrappers[0]", "did you mean 'chat_adapter'"),
        (lambda: StackSpec("", {}), "env_id", "registered env id"),
        (lambda: StackSpec("ACE-course-v0", {"rng": object()}), "env_kwargs", "JSON values"),
        (lambda: StackSpec("ACE-course-v0", {}, (("cost", {1: 2}),)), "wrappers[0].kwargs", "string keys"),
        (lambda: StackSpec("ACE-course-v0", {}, ("cost",)), "wrappers[0]", "pair"),
        (lambda: StackSpec.from_json('{"env_id": "ACE-course-v0", "extra": 1}'), "stack", "unknown fields"),
        (lambda: StackSpec.from_json("{"), "stack", "not JSON"),
        (lambda: StackSpec("ACE-corse-v0").make(), "env_id", "did you mean 'ACE-course-v0'"),
        (lambda: StackSpec("ACE-course-v0", {}, (("cost", {"nope": 1}),)).make(), "wrappers[0].kwargs", "nope"),
        (
            lambda: StackSpec("ACE-course-scenario-v0", {"bogus": 1}).make(),
            "env_kwargs",
            "ACE-course-scenario-v0: .*bogus",
        ),
    ],
)
def test_stack_spec__refuses_bad_stacks_with_a_config_error_naming_the_field(
    build: Any, field: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        build()
    assert caught.value.field == field


def test_stack_spec__is_a_hashable_read_only_value_that_round_trips_through_json() -> None:
    kwargs = {"rate": 0.2, "failure_modes": ("failed", "timeout"), "tool_rates": {"slot_id": 0.5}}
    spec = StackSpec("ACE-course-v0", {"domain": "course"}, (("failure_injection", kwargs), ("chat_adapter", {})))
    assert StackSpec.from_json(spec.to_json()) == spec  # the tuple is kept as the list JSON reads back
    assert hash(StackSpec.from_json(spec.to_json())) == hash(spec) and {spec: 1}[StackSpec.from_json(spec.to_json())]
    key = spec.key()
    layer = spec.wrappers[0][1]
    for change in (
        lambda: layer.__setitem__("rate", 0.9),
        lambda: layer["failure_modes"].append("empty"),
        lambda: layer["tool_rates"].update(set_slot=1.0),
        lambda: spec.env_kwargs.pop("domain"),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert spec.key() == key and kwargs["failure_modes"] == ("failed", "timeout")  # the caller's copy untouched
    assert json.loads(spec.to_json())["wrappers"][0]["kwargs"]["failure_modes"] == ["failed", "timeout"]
    env = spec.make()
    try:
        assert env.spec is not None and gym.make(env.spec).spec.to_json() == env.spec.to_json()
    finally:
        env.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_stack_spec__refuses_nan_and_infinities_naming_the_field(bad: float) -> None:
    with pytest.raises(ConfigError, match="finite JSON") as caught:
        StackSpec("ACE-course-v0", {"domain": "course"}, (("failure_injection", {"rate": bad}),))
    assert caught.value.field == "wrappers[0].kwargs"
    with pytest.raises(ConfigError, match="finite JSON") as caught:
        StackSpec("ACE-course-v0", {"domain": "course", "global_check_alpha": [bad]})
    assert caught.value.field == "env_kwargs"


# -- EpisodeSpec is a stack plus the instance, seed and trial --------------------------------------

MAIN_FIELDS = dict(
    domain="workforce",
    feedback_rounds={"max_attempts": 2, "threshold": 0.6},
    settings=("unsolvable",),
    tool_failure_rate=0.1,
)
"""The former EpisodeSpec fields (before issue 41) of a spec with failure injection, a planning
setting and feedback rounds: :meth:`EpisodeSpec.of` takes them and builds the stack main built."""

MAIN_ENV_SPEC = (
    '{"id": "ACE-workforce-v0", "entry_point": "ace_gym.envs.ace_env:AceEnv", "reward_threshold": null, '
    '"nondeterministic": false, "max_episode_steps": null, "order_enforce": true, "disable_env_checker": false, '
    '"kwargs": {"domain": "workforce", "dataset": "5x5"}, "additional_wrappers": [{"name": "ToolFailureInjection", '
    '"entry_point": "ace_gym.wrappers.failure_injection:ToolFailureInjection", "kwargs": {"rate": 0.1, '
    '"failure_modes": ["failed"], "rng": "numpy", "tool_rates": null, "draws": "episode"}}, {"name": "UnsolvableMix", '
    '"entry_point": '
    '"ace_gym.planning.unsolvable_mix:UnsolvableMix", "kwargs": {"p_unsolvable": 0.5, "kinds": '
    '["conflicting_constraints", "tool_outage", "missing_tool", "missing_information", "missing_attachment"], '
    '"rewards": null, "marker_rate": 0.5}}, {"name": "ChatAdapter", "entry_point": "ace_gym.wrappers.chat_adapter:ChatAdapter", '
    '"kwargs": {"tool_format": "auto", "max_turns": null, "notice": false}}, {"name": "StepBudget", "entry_point": '
    '"ace_gym.wrappers.step_budget:StepBudget", "kwargs": {"max_turns": 1000, "notice": false}}, {"name": '
    '"FeedbackRounds", "entry_point": "ace_gym.feedback.feedback_rounds:FeedbackRounds", "kwargs": {"max_attempts": '
    '2, "threshold": 0.6, "feedback": "diagnostic", "final_reward": "pass_discount", "gamma": 0.9}}], '
    '"vector_entry_point": null}'
)
"""``make_env().spec`` on main of :data:`MAIN_FIELDS` (a record's ``replay.env_spec`` before issue
41), with the failure draws named since issue 40 (a record without them replays with the old draws)
and UnsolvableMix's ``marker_rate`` and the default ``final_reward`` since issue 38."""


def test_episode_spec_of__builds_the_stack_main_built() -> None:
    spec = EpisodeSpec.of(**MAIN_FIELDS)
    env = spec.make_env()
    try:
        assert env.spec.to_json() == MAIN_ENV_SPEC
    finally:
        env.close()
    assert [name for name, _ in spec.stack.wrappers] == [
        "failure_injection",
        "unsolvable",
        "chat_adapter",
        "step_budget",
        "feedback_rounds",
    ]


def test_episode_spec__key_is_the_policy_instance_seed_trial_and_the_stack() -> None:
    spec = EpisodeSpec.of("course", instance_index=3, seed=7, trial=1, tool_failure_rate=0.2, max_turns=12)
    assert spec.key("p") == f"p|#3|seed=7|trial=1|{spec.stack.key()}"
    assert EpisodeSpec.of("meal", instance_id="x1").key("p").startswith("p|x1|seed=0|trial=0|{")


def test_episode_spec__plays_any_registered_wrapper_and_its_key_names_every_argument() -> None:
    """Issue 41: a wrapper played by an episode needed a field of EpisodeSpec (and its key, JSON,
    translation to and from the stack); now any registry entry with any arguments is played."""
    from ace_gym.eval import run_episodes
    from ace_gym.eval.replay import replay_record
    from ace_gym.policies import make_policy

    def spec(n: int) -> EpisodeSpec:
        stack = StackSpec.of(
            "ACE-course-v0",
            {"domain": "course", "dataset": "5x5"},
            ["chat_adapter", ("step_budget", {"max_turns": 60}), ("extraneous", {"n": n, "style": "unrelated"})],
        )
        return EpisodeSpec(stack, instance_index=0)

    two, three = spec(2), spec(3)
    assert two.key("p") != three.key("p") and two.key("p") == spec(2).key("p")
    records = [json.loads(json.dumps(r)) for r in run_episodes([two, three], make_policy("solver"))]
    assert [len(r["tools"]) - len(records[0]["tools"]) for r in records] == [0, 1]  # one more distractor
    assert [replay_record(record) for record in records] == [None, None]


ROUND_TRIP_FIELDS = [
    MAIN_FIELDS,
    dict(domain="course", max_turns=1000),  # the default limit, named: not the same key as None
    dict(domain="course", failure_injection={}),  # the wrapper at rate 0, for nothing but its place
    dict(domain="course", tool_failure_rate=0.3, failure_injection={"rng": "python"}, max_turns=4, trial=2),
    dict(domain="meal", dataset="7x7", env_kwargs={"global_check_alpha": 0.5}, feedback_rounds={"max_attempts": 3}),
    dict(domain="course", scenario={"stages": 2, "max_attempts": 2}, settings=("refine",), instance_id="z"),
    dict(domain="course", instance_index=4, seed=9, context={"last_turns": 3}),
]


@pytest.mark.parametrize("fields", ROUND_TRIP_FIELDS)
def test_episode_spec__round_trips_through_json(fields: dict[str, Any]) -> None:
    spec = EpisodeSpec.of(**fields)
    again = EpisodeSpec.from_json(spec.to_json())
    assert again == spec and again.key("p") == spec.key("p") and again.to_json() == spec.to_json()
    assert len({EpisodeSpec.of(**f).key("p") for f in ROUND_TRIP_FIELDS}) == len(ROUND_TRIP_FIELDS)


def test_episode_spec__refuses_what_no_episode_plays_naming_the_field() -> None:
    base = EpisodeSpec.of("course").stack
    with pytest.raises(ConfigError, match="step_budget") as caught:
        EpisodeSpec(base.below("step_budget"))
    assert caught.value.field == "stack.wrappers"
    with pytest.raises(ConfigError) as caught:
        EpisodeSpec(StackSpec("ACE-course-v0", {"dataset": "5x5"}, base.wrappers))
    assert caught.value.field == "stack.env_kwargs.domain"
    with pytest.raises(ConfigError) as caught:
        EpisodeSpec({"env_id": "ACE-course-v0"})  # type: ignore[arg-type]
    assert caught.value.field == "stack"
    for text in ("[1]", "{", json.dumps({"stack": base.to_dict(), "tool_failure_rate": 0.5})):
        with pytest.raises(ConfigError) as caught:
            EpisodeSpec.from_json(text)
        assert caught.value.field == "episode"


def test_trainer_adapters__build_their_stacks_from_the_registry() -> None:
    pytest.importorskip("datasets")
    from ace_gym.integrations import trl

    environment = trl.environment_class("course", tool_failure_rate=0.5)()
    assert type(environment._env) is stacks.WRAPPERS["failure_injection"].wrapper
    with pytest.raises(ConfigError) as caught:
        trl.environment_class("course", tool_failure_rate=2.0)
    assert caught.value.field == "rate"
    spec = EpisodeSpec.of("course", tool_failure_rate=0.5, settings=("cost",))  # verl, SkyRL, OpenRLHF rows
    assert EpisodeSpec.from_json(spec.to_json()) == spec


def test_import_ace_gym__reads_the_registry_without_loading_any_wrapper() -> None:
    code = (
        "import sys, ace_gym\n"
        "assert 'ace_gym.stacks' in sys.modules\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('ace_gym.wrappers', 'ace_gym.feedback.'))"
        " and m != 'ace_gym.feedback.benchmark')\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_feedback_package__exports_each_name_from_its_module_on_first_access() -> None:
    import importlib

    import ace_gym.feedback

    for name in ace_gym.feedback.__all__:
        home = importlib.import_module(f"ace_gym.feedback.{ace_gym.feedback._HOMES[name]}")
        assert getattr(ace_gym.feedback, name) is getattr(home, name) and name in dir(ace_gym.feedback)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        ace_gym.feedback.nothing  # noqa: B018


def test_server_make_request__takes_todays_shape_and_a_stack_and_refuses_a_mismatch() -> None:
    pytest.importorskip("pydantic")
    from ace_gym.server.factory import EnvFactory
    from ace_gym.server.protocol import MakeRequest, ProtocolError

    factory = EnvFactory(["ACE-course-v0"])
    old = MakeRequest.model_validate(
        {"kwargs": {"dataset": "5x5"}, "wrappers": [{"name": "ToolFailureInjection", "kwargs": {"rate": 0.5}}]}
    )
    stack = StackSpec.of("ACE-course-v0", {"dataset": "5x5"}, [("failure_injection", {"rate": 0.5})])
    assert factory.stack("ACE-course-v0", old) == stack
    assert factory.stack("ACE-course-v0", MakeRequest.model_validate(stack.to_dict())) == stack
    for data, message in [
        ({**stack.to_dict(), "env_id": "ACE-meal-v0"}, "not this session's"),
        ({**stack.to_dict(), "kwargs": {"dataset": "5x5"}}, "not both"),
        ({"wrappers": [{"name": "os.system"}]}, "unknown wrapper"),
    ]:
        with pytest.raises(ProtocolError, match=message) as caught:
            factory.make("ACE-course-v0", MakeRequest.model_validate(data))
        assert caught.value.code == "FACTORY_ERROR"


def test_a_remote_episode__plays_its_specs_own_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("websockets")
    from ace_gym.eval import run_episodes
    from ace_gym.eval.remote import RemoteStackFactory
    from ace_gym.policies import make_policy
    from ace_gym.server.client import RemoteEnv

    made: list[tuple[Any, ...]] = []

    def local(cls: type, url: str, stack: StackSpec, **options: Any) -> gym.Env:
        made.append((url, stack, options))
        return stack.make()

    monkeypatch.setattr(RemoteEnv, "from_stack", classmethod(local))
    spec = EpisodeSpec.of("course", instance_index=0, scenario={"stages": 2}, max_turns=40)
    factory = RemoteStackFactory("ws://unused")
    assert pickle.loads(pickle.dumps(factory)) == factory  # what a Ray worker is sent
    (record,) = run_episodes([spec], make_policy("solver"), make_env=factory)
    assert made == [("ws://unused", spec.stack, {"grader": True})]  # the spec's own stack, in the server
    assert record["key"] == spec.key("solver") and record["replay"]["spec"] == json.loads(spec.to_json())
