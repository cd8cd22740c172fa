"""Staff rota: work days x shifts, filled with workers."""

from ace_gym.domains.spec import CategoricalAttribute, Domain, GlobalRule, NumericAttribute, SlotRule

DOMAIN = Domain(
    name="workforce",
    id_key="worker_id",
    id_prefix="W",
    item_label="worker",
    item_plural="workers",
    tool_title="workforce item",
    task_title="workforce scheduling",
    intro="workforce scheduling",
    grid_text=(
        "This workforce scheduling plan has {rows} work days as rows and {cols} shift slots to "
        "staff per day as columns."
    ),
    attributes=(
        NumericAttribute("skill", 1, 5),
        NumericAttribute("hourly_cost", 20, 100),
        NumericAttribute("experience", 1, 20),
        CategoricalAttribute("department", ("support", "sales", "operations", "security", "logistics", "maintenance")),
        NumericAttribute("reliability", 1, 5),
        NumericAttribute("overtime_capacity", 0, 10),
    ),
    prompt_attributes=(
        "name",
        "hourly_cost",
        "skill",
        "experience",
        "department",
        "reliability",
        "overtime_capacity",
    ),
    slot_rules=(
        SlotRule("min_skill", "skill", "min", (1, 2, 3, 4)),
        SlotRule("max_cost", "hourly_cost", "max", (45, 60, 75, 90, 100)),
        SlotRule("min_experience", "experience", "min", (1, 4, 8, 12)),
    ),
    global_rules=(
        GlobalRule("total_cost_max", "sum_max", "hourly_cost", slack=160, cap=100),
        GlobalRule("total_skill_min", "sum_min", "skill", slack=15, floor=0),
        GlobalRule("senior_shift_min", "count_min_threshold", "experience", slack=2, threshold=12),
        GlobalRule("same_department_week_max", "repeat_max", "department"),
        GlobalRule("total_reliability_min", "sum_min", "reliability", slack=18, floor=1),
        GlobalRule("total_overtime_min", "sum_min", "overtime_capacity", slack=40, floor=0),
    ),
    name_attribute=None,
    name_phrases={},
)
