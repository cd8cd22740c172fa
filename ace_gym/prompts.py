"""The texts a model sees: task instruction, system prompt and user message (docs/compatibility.md §1.7, §4.1)."""

from __future__ import annotations

from ace_gym.constraints import global_rule_text, slot_rule_text
from ace_gym.domains import Domain
from ace_gym.domains.tool_names import tool_names


def render_task_instruction(
    domain: Domain,
    rows: int,
    cols: int,
    global_bounds: dict[str, int],
    slot_rules: list[tuple[int, int, list[tuple[str, str, int]]]],
) -> str:
    """The instance's policy text. ``slot_rules``: per hidden slot (row-major) its
    ``(attribute, kind, bound)`` rules in the domain's slot-rule order."""
    lines = [
        f"You are solving a {domain.task_title} task. Fill the {rows}x{cols} grid with {domain.item_label} ids.",
        domain.grid_text.format(rows=rows, cols=cols),
        "Only the empty (`null`) slots need to be filled. All other non-empty slots are already "
        "fixed and must not be changed.",
        "Each cell must use exactly one candidate id from that slot.",
        "",
        "Across the whole grid, the plan must satisfy these global constraints:",
    ]
    for k, rule in enumerate(domain.global_rules, start=1):
        lines.append(f"({k}) {global_rule_text(rule, global_bounds[rule.name], domain)}.")
    lines += ["", "For the hidden-slot constraints:"]
    blocks = []
    for row, col, rules in slot_rules:
        block = [f"For slot ({row}, {col}):"]
        block += [
            f"({k}) {slot_rule_text(domain, row, col, attribute, kind, bound)}."
            for k, (attribute, kind, bound) in enumerate(rules, start=1)
        ]
        blocks.append("\n".join(block))
    lines.append("\n\n".join(blocks))
    lines += ["", f"Return only a {rows}x{cols} list of {domain.item_label} ids."]
    return "\n".join(lines)


def _budget_line(queries_limited: bool, checks_limited: bool) -> str:
    if queries_limited and checks_limited:
        return (
            "Both attribute queries (per hidden slot) and global check have limited call "
            "counts\u2014plan your usage carefully."
        )
    if not queries_limited and not checks_limited:
        return "Attribute queries per hidden slot and global check have no call-count limits in this task."
    if queries_limited:
        return (
            "Attribute queries per hidden slot have a limited call count\u2014plan your usage "
            "carefully; global check has no call-count limit."
        )
    return (
        "Attribute queries per hidden slot have no call-count limit; global check has a limited "
        "call count\u2014plan your usage carefully."
    )


def render_system_prompt(
    domain: Domain,
    task_instruction: str,
    *,
    query_budget_limited: bool,
    global_check_budget: int | None,
    max_query_ids: int,
    max_query_fields: int,
) -> str:
    """The system message (docs/compatibility.md §4.1); ``global_check_budget`` None means unlimited."""
    head = _system_prompt_head(domain, query_budget_limited, global_check_budget, max_query_ids, max_query_fields)
    return head + task_instruction + _SYSTEM_PROMPT_TAIL


_SYSTEM_PROMPT_TAIL = (
    "\n</task_policy>\n<task_goal>\nComplete the partially filled solution grid. Keep existing non-null "
    "entries unchanged and fill every null slot.\n</task_goal>"
)


def _system_prompt_head(
    domain: Domain,
    query_budget_limited: bool,
    global_check_budget: int | None,
    max_query_ids: int,
    max_query_fields: int,
) -> str:
    """The system message up to its task instruction (the domain's texts, its tool names and the
    budget settings)."""
    names = tool_names(domain)
    check_tool = names["global_check"]
    if global_check_budget is None:
        check_line = f"`{check_tool}` has no call-count limit in this task."
    elif global_check_budget == 0:
        check_line = f"`{check_tool}` is disabled in this task, so do not call it."
    else:
        check_line = (
            f"`{check_tool}` may be called at most {global_check_budget} time(s) in this "
            f"task. Use `{names['global_check_budget']}` to query the remaining global-check count."
        )
    usage = [
        "Use the available tools instead of pretending to know hidden slot values.",
        "You may inspect and fill hidden slots in any order.",
        f"Use `{names['set_slot']}` to fill or clear any hidden slot directly by row and col.",
        "Each hidden slot has multiple options. Your choice for each slot must satisfy the "
        "corresponding slot constraints, and the completed grid must satisfy the global "
        f"constraints. Use `{names['slot_check']}` when needed for any filled hidden slot, "
        f"and use `{check_tool}` only after all slots are filled.",
        f"Use `{names['query']}` when you want to filter one hidden slot's "
        "candidates by one attribute condition. Item info tools (single-item info and "
        f"`{names['item_attributes']}`) can only query non-hidden item ids\u2014i.e., ids that are "
        "already visible in pre-filled slots. Use the single-item info tool for one such id; use "
        f"`{names['item_attributes']}` for up to {max_query_fields} selected attributes for up to "
        f"{max_query_ids} such ids at once.",
    ]
    if query_budget_limited:
        usage.append(
            f"Use `{names['slot_query_budget']}` with row and col to query the remaining "
            "attribute-query count for a specific hidden slot (e.g. before deciding whether to make "
            "more attribute queries for that slot)."
        )
    usage += [
        f"When the grid is complete and you are satisfied with the result, call `{names['done']}`.",
        f"Your final action must be a single call to `{names['done']}` with no other tool calls in that message.",
        check_line,
    ]
    instructions = [
        f"You are solving a {domain.intro} task.",
        "Follow the task policy exactly.",
        f"Each item in this domain has attributes such as: {', '.join(domain.prompt_attributes)}.",
        "Use tools to inspect the current grid, reason about candidate ids, and update slots.",
        _budget_line(query_budget_limited, global_check_budget is not None),
        "You may inspect and fill hidden slots in any order.",
        "Assume all pre-filled non-null slots are already correct, valid, and fixed.",
        "You must make sure the final solution satisfies every hidden-slot constraint and the global constraints.",
        "Never change pre-filled non-null slots unless a tool result or task policy clearly requires it.",
        "Your goal is to produce a fully filled grid that satisfies all constraints.",
    ]
    return (
        "<instructions>\n" + "\n".join(instructions) + "\n</instructions>\n"
        "<tool_usage>\n" + "\n".join(usage) + "\n</tool_usage>\n"
        "<task_policy>\n"
    )


def render_user_message(domain: Domain, grid_json: str) -> str:
    """The first user message (docs/compatibility.md §4.1) around ``grid_json``, the partial
    grid of ids as ``json.dumps(grid, ensure_ascii=False)`` writes it."""
    tail = _USER_MESSAGE_TAILS.get(domain.tool_noun)
    if tail is None:
        names = tool_names(domain)
        tail = _USER_MESSAGE_TAILS[domain.tool_noun] = (
            f"\n\nYou may work on any hidden slot directly.\nUse `{names['query']}` to filter a hidden "
            f"slot's candidates by one attribute condition. Use `{names['set_slot']}` to fill or clear any "
            "hidden slot."
        )
    return _USER_MESSAGE_HEAD + grid_json + tail


_USER_MESSAGE_HEAD = (
    "Here is the current partial solution grid.\nEach `null` value is a missing slot that still "
    "needs a valid item id.\n\n"
)

_USER_MESSAGE_TAILS: dict[str, str] = {}
"""The user message after the grid, by the tool noun its tool names carry."""
