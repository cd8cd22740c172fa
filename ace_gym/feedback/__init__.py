"""AgencyBench's protocol on ACE, made exact: rubric, feedback texts, user simulators, scenario stages.

Data flows one way: a grid and its compiled instance are graded into a :class:`Rubric`
(:mod:`.rubric`, through the constraint code); a failed submission becomes feedback text
(:mod:`.texts`, or an LLM through :mod:`.simulator`); :mod:`.rounds` runs one task's attempts;
:mod:`.stages` cuts an instance into a scenario's ascending stages. The wrapper and the scenario env that use them,
:class:`FeedbackRounds` and :class:`ScenarioEnv` (``ACE-Scenario-v0``), and AgencyBench's metrics
(:mod:`.metrics`) and evaluation flags (:mod:`.evaluation`) live here too; docs/feedback_rounds.md.
"""

from typing import TYPE_CHECKING

from ace_gym.lazy_exports import lazy_homes

if TYPE_CHECKING:
    from ace_gym.feedback.feedback_rounds import FeedbackRounds
    from ace_gym.feedback.rounds import ACE_THRESHOLD, AGENCYBENCH_THRESHOLD, FINAL_REWARDS, Rounds, Verdict
    from ace_gym.feedback.rubric import GlobalItem, Rubric, SlotItem, SlotState, cells_of, grade, item_names
    from ace_gym.feedback.scenario import ScenarioEnv
    from ace_gym.feedback.simulator import EngineUserSimulator, TemplateFeedback, UserSimulator
    from ace_gym.feedback.stages import Stage, grade_stage, split_stages, stage_sizes
    from ace_gym.feedback.texts import FEEDBACK_STYLES, FeedbackStyle, Submission, feedback_text, mentions_a_cell

__all__ = [
    "ACE_THRESHOLD",
    "AGENCYBENCH_THRESHOLD",
    "FEEDBACK_STYLES",
    "FINAL_REWARDS",
    "EngineUserSimulator",
    "FeedbackRounds",
    "FeedbackStyle",
    "GlobalItem",
    "Rounds",
    "Rubric",
    "ScenarioEnv",
    "SlotItem",
    "SlotState",
    "Stage",
    "Submission",
    "TemplateFeedback",
    "UserSimulator",
    "Verdict",
    "cells_of",
    "feedback_text",
    "grade",
    "grade_stage",
    "item_names",
    "mentions_a_cell",
    "split_stages",
    "stage_sizes",
]
# Imported on first access: the wrapper registry (``import ace_gym`` registers the env ids from
# it) reads :mod:`ace_gym.feedback.benchmark`, which must not load the rubric, the simulators and the wrapper.
_HOMES = {  # name -> its module
    "FeedbackRounds": "feedback_rounds",
    "FINAL_REWARDS": "rounds",
    "ACE_THRESHOLD": "rounds",
    "AGENCYBENCH_THRESHOLD": "rounds",
    "Rounds": "rounds",
    "Verdict": "rounds",
    "GlobalItem": "rubric",
    "Rubric": "rubric",
    "SlotItem": "rubric",
    "SlotState": "rubric",
    "cells_of": "rubric",
    "grade": "rubric",
    "item_names": "rubric",
    "ScenarioEnv": "scenario",
    "EngineUserSimulator": "simulator",
    "TemplateFeedback": "simulator",
    "UserSimulator": "simulator",
    "Stage": "stages",
    "grade_stage": "stages",
    "split_stages": "stages",
    "stage_sizes": "stages",
    "FEEDBACK_STYLES": "texts",
    "FeedbackStyle": "texts",
    "Submission": "texts",
    "feedback_text": "texts",
    "mentions_a_cell": "texts",
}
__getattr__, __dir__ = lazy_homes(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()})
