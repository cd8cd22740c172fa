"""Planning probes on ACE, after the Agent Planning Benchmark, graded exactly from the instance.

* :func:`detect_errors` / :class:`ErrorTracker`: the E1-E6 error taxonomy on ACE actions, judged
  from the task's facts and what the agent has observed (:mod:`~ace_gym.planning.taxonomy` lists
  the causes; :func:`grade` is APB's rubric);
* :func:`make_variant`: certified-unsolvable variants of an instance (:mod:`~ace_gym.planning.unsolvable`);
* :func:`grade_plan`: the structural grade of a holistic plan; :func:`plan_adherence`;
* the envs ``ACE-StepWise-v0`` (:mod:`~ace_gym.planning.stepwise`) and ``ACE-Holistic-v0``
  (:mod:`~ace_gym.planning.holistic`), and the registry of robustness settings for evaluations
  (:mod:`~ace_gym.planning.settings`), are imported where they are used.

The settings' wrappers (:class:`CostAnnotatedTools`, :class:`ExtraneousTools`, :class:`UnsolvableMix`,
:class:`BrokenTool`, :class:`Refine`) and the scripted probes (:mod:`~ace_gym.planning.probes`,
:class:`~ace_gym.planning.cost_solver.CostAwareSolver`) live here too. The definitions that are ours are in docs/planning.md.
"""

from typing import TYPE_CHECKING

from ace_gym.lazy_exports import lazy_homes

if TYPE_CHECKING:
    from ace_gym.planning.broken_tool import BrokenTool
    from ace_gym.planning.cost_annotated_tools import CostAnnotatedTools
    from ace_gym.planning.detector import ErrorTracker, detect_errors
    from ace_gym.planning.extraneous_tools import ExtraneousTools
    from ace_gym.planning.knowledge import Knowledge, TaskFacts, facts_from_reset
    from ace_gym.planning.plans import PlanGrade, grade_plan, plan_adherence
    from ace_gym.planning.refine import Refine
    from ace_gym.planning.taxonomy import CAUSES, CODES, UNSOLVABLE_KINDS, Flag, grade
    from ace_gym.planning.unsolvable import UnsolvableVariant, check_certificate, make_variant
    from ace_gym.planning.unsolvable_mix import UnsolvableMix

__all__ = [
    "CAUSES",
    "CODES",
    "UNSOLVABLE_KINDS",
    "BrokenTool",
    "CostAnnotatedTools",
    "ErrorTracker",
    "ExtraneousTools",
    "Flag",
    "Knowledge",
    "PlanGrade",
    "Refine",
    "TaskFacts",
    "UnsolvableMix",
    "UnsolvableVariant",
    "check_certificate",
    "detect_errors",
    "facts_from_reset",
    "grade",
    "grade_plan",
    "make_variant",
    "plan_adherence",
]
# Imported on first access: registering the env ids (``import ace_gym``) reads the settings
# registry, which must not load the detector, the plan grader and the variant builder.
_HOMES = {
    "BrokenTool": "broken_tool",
    "CostAnnotatedTools": "cost_annotated_tools",
    "ExtraneousTools": "extraneous_tools",
    "Refine": "refine",
    "UnsolvableMix": "unsolvable_mix",
    "ErrorTracker": "detector",
    "detect_errors": "detector",
    "Knowledge": "knowledge",
    "TaskFacts": "knowledge",
    "facts_from_reset": "knowledge",
    "PlanGrade": "plans",
    "grade_plan": "plans",
    "plan_adherence": "plans",
    "CAUSES": "taxonomy",
    "CODES": "taxonomy",
    "UNSOLVABLE_KINDS": "taxonomy",
    "Flag": "taxonomy",
    "grade": "taxonomy",
    "UnsolvableVariant": "unsolvable",
    "check_certificate": "unsolvable",
    "make_variant": "unsolvable",
}

__getattr__, __dir__ = lazy_homes(__name__, {name: f"{__name__}.{home}" for name, home in _HOMES.items()})
