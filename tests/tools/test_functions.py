"""The 11 tools: order of checks, messages, payloads and budgets of docs/compatibility.md §3.3-§3.5 beyond the traces."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType

import jsonschema
import pytest

from ace_gym.domains import DOMAIN_NAMES, CategoricalAttribute, get_domain
from ace_gym.envs import AceEnv
from ace_gym.tools import STOP, toolset
from tests.conftest import published_file
from tests.core_helpers import (
    H1_INDEX,
    H15_INDEX,
    call,
    failed_with,
    fill_with_truth,
    make_env,
    tool,
    truth_id,
    visible_cell,
)

pytestmark = pytest.mark.parametrize("domain", DOMAIN_NAMES)


def _numeric_field(domain: str) -> str:
    return get_domain(domain).numeric_attributes[0]


def _categorical_field(domain: str) -> str:
    """The domain's first categorical attribute."""
    return next(a.name for a in get_domain(domain).attributes if isinstance(a, CategoricalAttribute))


# -- attribute queries ----------------------------------------------------------------------


def test_query__budget_exhausted_is_reported_before_argument_validation(domain: str) -> None:
    env = make_env(domain, H1_INDEX, extra_query_num=0)
    slot = env.compiled.slots[0]
    budget = slot.rule_count + 1  # active rules + H + 0
    for _ in range(budget):
        ok = call(env, tool(env, "query"), row=slot.row, col=slot.col, field="name", operator="not_in", value=[])
        assert ok["status"] == "success"
    assert ok["data"]["remaining_budget"] == 0
    exhausted = f"Hidden slot query budget exhausted for slot (row={slot.row}, col={slot.col}). Remaining queries: 0."
    bad = call(env, tool(env, "query"), row=slot.row, col=slot.col, field="", operator="??", value=None)
    assert failed_with(bad, exhausted)


def test_query__invalid_queries_are_not_charged(domain: str) -> None:
    env = make_env(domain, H1_INDEX, extra_query_num=2)
    slot = env.compiled.slots[0]
    for field, operator, value in [("nope", ">", 1), (_numeric_field(domain), "in", ["a"]), ("name", ">", 3)]:
        envelope = call(
            env, tool(env, "query"), row=slot.row, col=slot.col, field=field, operator=operator, value=value
        )
        assert envelope["status"] == "failed"
    budget = call(env, "get_hidden_slot_query_budget", row=slot.row, col=slot.col)["data"]
    assert budget["query_calls"] == 0
    assert budget["remaining_queries"] == budget["query_budget"] == slot.rule_count + 1 + 2


def test_query__empty_match_is_still_charged(domain: str) -> None:
    env = make_env(domain, H1_INDEX, extra_query_num=0)
    slot = env.compiled.slots[0]
    empty = call(
        env, tool(env, "query"), row=slot.row, col=slot.col, field=_numeric_field(domain), operator=">", value=10**9
    )
    assert empty["status"] == "success" and empty["data"]["matches"] == []
    assert empty["data"]["remaining_budget"] == slot.rule_count + 1 - 1
    assert call(env, "get_hidden_slot_query_budget", row=slot.row, col=slot.col)["data"]["query_calls"] == 1


def test_query__equals_is_numeric_equality(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled, slot = env.compiled, env.compiled.slots[0]
    field = _numeric_field(domain)
    target = compiled.items[slot.candidate_items[0]][field]
    expected = [
        {"id": i, field: compiled.items[k][field]}
        for i, k in zip(slot.candidate_ids, slot.candidate_items, strict=True)
        if compiled.items[k][field] == target
    ]
    for value in (target, float(target), str(target), f"{target}.0"):
        envelope = call(env, tool(env, "query"), row=slot.row, col=slot.col, field=field, operator="=", value=value)
        assert envelope["data"]["matches"] == expected, value
    assert call(env, tool(env, "query"), row=slot.row, col=slot.col, field=field, operator="=", value="3.5")["data"][
        "value"
    ] == pytest.approx(3.5)


def test_query__name_not_in_empty_list_lists_all_candidates_in_stored_order(domain: str) -> None:
    env = make_env(domain, H15_INDEX)
    compiled = env.compiled
    for slot in compiled.slots[:3]:
        envelope = call(env, tool(env, "query"), row=slot.row, col=slot.col, field="name", operator="not_in", value=[])
        assert [m["id"] for m in envelope["data"]["matches"]] == list(slot.candidate_ids)
        assert [m["name"] for m in envelope["data"]["matches"]] == [
            compiled.items[k]["name"] for k in slot.candidate_items
        ]


def test_query__numeric_operators_filter_like_python(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled, slot = env.compiled, env.compiled.slots[0]
    field = _numeric_field(domain)
    values = [compiled.items[k][field] for k in slot.candidate_items]
    pivot = sorted(values)[len(values) // 2]
    checks = {">": pivot.__lt__, ">=": pivot.__le__, "<": pivot.__gt__, "<=": pivot.__ge__}
    for operator, keep in checks.items():
        envelope = call(
            env, tool(env, "query"), row=slot.row, col=slot.col, field=field, operator=operator, value=pivot
        )
        assert [m[field] for m in envelope["data"]["matches"]] == [v for v in values if keep(v)], operator


def test_query__set_values_accept_json_strings_and_bare_strings(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled, slot = env.compiled, env.compiled.slots[0]
    field = _categorical_field(domain)
    first = compiled.items[slot.candidate_items[0]][field]
    expected = [
        i for i, k in zip(slot.candidate_ids, slot.candidate_items, strict=True) if compiled.items[k][field] == first
    ]
    for value in ([first], json.dumps([first]), first):
        envelope = call(env, tool(env, "query"), row=slot.row, col=slot.col, field=field, operator="in", value=value)
        assert envelope["data"]["value"] == [first]
        assert [m["id"] for m in envelope["data"]["matches"]] == expected
    broken = call(env, tool(env, "query"), row=slot.row, col=slot.col, field=field, operator="in", value="[oops")
    assert broken["data"]["value"] == ["[oops"] and broken["data"]["matches"] == []


def test_query__checks_run_in_published_order(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled, slot = env.compiled, env.compiled.slots[0]
    query = tool(env, "query")
    numeric, categorical = _numeric_field(domain), _categorical_field(domain)
    allowed = ", ".join(sorted(k for k in get_domain(domain).item_keys if k != get_domain(domain).id_key))
    r, c = slot.row, slot.col
    vr, vc = visible_cell(compiled)
    cases = [
        ({"row": "x", "col": c, "field": "?", "operator": "?", "value": None}, "row and col must be integers"),
        ({"row": -1, "col": c, "field": "?", "operator": "?", "value": None}, f"Invalid slot (row=-1, col={c})"),
        (
            {"row": vr, "col": vc, "field": "?", "operator": "?", "value": None},
            "Attribute candidate queries are only allowed for hidden slots.",
        ),
        ({"row": r, "col": c, "field": "  ", "operator": "?", "value": None}, "field must be a non-empty string"),
        ({"row": r, "col": c, "field": 7, "operator": "?", "value": None}, "field must be a non-empty string"),
        (
            {"row": r, "col": c, "field": "colour", "operator": "?", "value": None},
            f"unknown field: colour. allowed fields: {allowed}",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": "==", "value": None},
            "operator must be one of: >, >=, =, <, <=, in, not_in",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": [">"], "value": 1},
            "operator must be one of: >, >=, =, <, <=, in, not_in",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": "in", "value": 5},
            "value must be a string list for `in` or `not_in` queries",
        ),
        (
            {"row": r, "col": c, "field": categorical, "operator": "in", "value": ["a", 1]},
            "value must be a string list for `in` or `not_in` queries",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": ">", "value": True},
            "boolean values are not supported for attribute queries",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": ">", "value": [1]},
            "value must be numeric for numeric comparisons, or a string list for `in`/`not_in`",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": ">", "value": None},
            "value must be numeric for numeric comparisons, or a string list for `in`/`not_in`",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": "in", "value": ["1"]},
            "numeric fields only support: >, >=, =, <, <=",
        ),
        (
            {"row": r, "col": c, "field": categorical, "operator": ">", "value": 1},
            "categorical fields only support: in, not_in",
        ),
        (
            {"row": r, "col": c, "field": numeric, "operator": ">", "value": "abc"},
            "numeric comparisons require a numeric value",
        ),
    ]
    for arguments, detail in cases:
        assert failed_with(call(env, query, **arguments), detail), (arguments, detail)


def test_query__operator_that_is_no_str__refused_after_the_field_checks_whatever_the_value(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    slot, query = env.compiled.slots[0], tool(env, "query")
    numeric, spec = _numeric_field(domain), get_domain(domain)
    allowed = ", ".join(sorted(k for k in spec.item_keys if k != spec.id_key))
    operator_refused = "operator must be one of: >, >=, =, <, <=, in, not_in"
    cases = [  # each twice, so that the second is answered from the per-instance reply cache
        (numeric, [">"], 1, operator_refused),
        (numeric, None, ["a"], operator_refused),
        (numeric, 5, "abc", operator_refused),
        ("colour", [">"], 1, f"unknown field: colour. allowed fields: {allowed}"),
        ("  ", [">"], 1, "field must be a non-empty string"),
    ] * 2
    for field, operator, value, message in cases:
        envelope = call(env, query, row=slot.row, col=slot.col, field=field, operator=operator, value=value)
        assert failed_with(envelope, message), (field, operator, value)
    assert env.state.query_calls[0] == 0  # refusals are not charged


def test_query__field_is_stripped_and_echoed_clean(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    slot = env.compiled.slots[0]
    envelope = call(env, tool(env, "query"), row=slot.row, col=slot.col, field=" name ", operator="not_in", value=[])
    assert envelope["data"]["field"] == "name" and len(envelope["data"]["matches"]) == len(slot.candidate_ids)


# what the published release strips from a set-query value (str.strip(): every Unicode whitespace)
STRIPPED = [chr(c) for c in range(0x110000) if chr(c).isspace()]
ISSUE_INDEX = 9  # H=5, B=4: the instance of the reported example (course row 2, col 3)


def _set_query_case(env: AceEnv, domain: str) -> tuple[int, int, str, str, list[str]]:
    """(row, col, categorical field, a value of it, the ids of the candidates with that value)."""
    compiled, slot = env.compiled, env.compiled.slots[0]
    field = _categorical_field(domain)
    value = compiled.items[slot.candidate_items[0]][field]
    ids = [
        i for i, k in zip(slot.candidate_ids, slot.candidate_items, strict=True) if compiled.items[k][field] == value
    ]
    return slot.row, slot.col, field, value, ids


def test_query__set_value_is_stripped_of_any_whitespace_before_json_decoding(domain: str) -> None:
    env = make_env(domain, ISSUE_INDEX)
    row, col, field, value, ids = _set_query_case(env, domain)
    for operator in ("in", "not_in"):
        for space in [*STRIPPED, " \t\r\n\u00a0\u3000", "".join(STRIPPED)]:
            padded = space + json.dumps([value]) + space
            data = call(env, tool(env, "query"), row=row, col=col, field=field, operator=operator, value=padded)["data"]
            assert data["value"] == [value], repr(space)
            matched = [m["id"] for m in data["matches"]]
            assert (matched == ids) if operator == "in" else (not set(matched) & set(ids)), repr(space)


def test_query__set_value_that_does_not_decode_is_kept_whole_and_unstripped(domain: str) -> None:
    env = make_env(domain, ISSUE_INDEX)
    row, col, field, value, _ = _set_query_case(env, domain)
    not_whitespace = "\u200b"  # a zero-width space is not whitespace to str.strip: no JSON is decoded
    for raw in (" [oops ", "\u00a0[\n", f" ['{value}'] ", not_whitespace + json.dumps([value]), f" {value} "):
        data = call(env, tool(env, "query"), row=row, col=col, field=field, operator="in", value=raw)["data"]
        assert data["value"] == [raw] and data["matches"] == [], repr(raw)


def test_query__stripped_set_value_with_non_strings_fails_and_is_not_charged(domain: str) -> None:
    env = make_env(domain, ISSUE_INDEX, extra_query_num=0)
    row, col, field, _, _ = _set_query_case(env, domain)
    for raw in (" [1]", "\n[null]\n", '\u00a0["a", 2]', "\t[[]]"):
        envelope = call(env, tool(env, "query"), row=row, col=col, field=field, operator="in", value=raw)
        assert failed_with(envelope, "value must be a string list for `in` or `not_in` queries"), repr(raw)
    assert call(env, "get_hidden_slot_query_budget", row=row, col=col)["data"]["query_calls"] == 0


def test_query__set_value_is_parsed_before_the_field_kind_is_checked(domain: str) -> None:
    env = make_env(domain, ISSUE_INDEX)
    slot = env.compiled.slots[0]
    numeric = _numeric_field(domain)
    arguments = {"row": slot.row, "col": slot.col, "field": numeric, "operator": "not_in"}
    bad_list = call(env, tool(env, "query"), **arguments, value=" [null] ")
    assert failed_with(bad_list, "value must be a string list for `in` or `not_in` queries")
    good_list = call(env, tool(env, "query"), **arguments, value=' ["a"] ')
    assert failed_with(good_list, "numeric fields only support: >, >=, =, <, <=")


def test_query__integers_beyond_64_bits_are_refused_only_where_the_release_would_answer(domain: str) -> None:
    env = make_env(domain, ISSUE_INDEX, extra_query_num=0)
    slot = env.compiled.slots[0]
    query = tool(env, "query")
    for value in (2**64, -(2**64) - 1, 10**30, "18446744073709551616"):
        categorical = call(
            env, query, row=slot.row, col=slot.col, field=_categorical_field(domain), operator=">", value=value
        )
        assert failed_with(categorical, "categorical fields only support: in, not_in"), value
        numeric = call(env, query, row=slot.row, col=slot.col, field=_numeric_field(domain), operator=">", value=value)
        assert failed_with(numeric, "numeric comparison values must fit in 64 bits"), value
    assert call(env, "get_hidden_slot_query_budget", row=slot.row, col=slot.col)["data"]["query_calls"] == 0
    widest = call(env, query, row=slot.row, col=slot.col, field=_numeric_field(domain), operator="<", value=2**64 - 1)
    assert widest["data"]["value"] == 2**64 - 1 and len(widest["data"]["matches"]) == len(slot.candidate_ids)


# -- row/col coercion ---------------------------------------------------------------------------


def test_row_col__coerced_with_int_truncation_bools_and_numeric_strings(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled = env.compiled
    cases = [
        (2.9, True, (2, 1)),
        (" 3 ", False, (3, 0)),
        (0.2, 4.99, (0, 4)),
        ("+1", "0_1", (1, 1)),
        ("\u0662", "\uff13", (2, 3)),
    ]
    for row, col, expected in cases:  # the last: an Arabic-Indic 2 and a fullwidth 3, as int() reads them
        data = call(env, "get_slot_id", row=row, col=col)["data"]
        assert (data["row"], data["col"]) == expected
        item = compiled.initial_grid[expected[0] * compiled.cols + expected[1]]
        assert data["id"] == (None if item < 0 else compiled.item_ids[item])
    for bad in ("2.0", None, [1], "a", "x1", "\u00b2", "\u03b1\u03b2", "\u4e00", "", math.nan, math.inf):
        assert failed_with(call(env, "get_slot_id", row=bad, col=0), "row and col must be integers"), bad
    assert failed_with(call(env, "get_slot_id", row=compiled.rows, col=0), f"Invalid slot (row={compiled.rows}, col=0)")


class _Unconverted(Decimal):
    """A Decimal whose ``int()`` fails the test: converting a huge one takes time quadratic in its digits."""

    def __int__(self) -> int:
        raise AssertionError(f"int({self}) was computed")


class _UnconvertedFraction(Fraction):
    def __int__(self) -> int:
        raise AssertionError(f"int({self}) was computed")


@pytest.mark.parametrize("tool", ["get_slot_id", "set_slot"])
def test_cell__a_huge_decimal_or_fraction_is_off_the_grid_without_converting_it(domain: str, tool: str) -> None:
    """Issue 40: ``Decimal("1e999999")`` as a row took over three minutes, most of it in ``int()``."""
    env = make_env(domain, H1_INDEX)
    arguments = {"id": "C1"} if tool == "set_slot" else {}
    huge = [_Unconverted("1e999999"), _Unconverted("-1e30"), _UnconvertedFraction(10**40, 3)]
    for value in huge:
        assert failed_with(call(env, tool, row=value, col=0, **arguments), f"Invalid slot (row={value}, col=0)")
        assert failed_with(call(env, tool, row=0, col=value, **arguments), f"Invalid slot (row=0, col={value})")
    for value in (Decimal("NaN"), Decimal("sNaN"), Decimal("-Infinity")):
        assert failed_with(call(env, tool, row=value, col=0, **arguments), "row and col must be integers")
    data = call(env, "get_slot_id", row=Decimal("2.0"), col=Fraction(7, 2))["data"]
    assert (data["row"], data["col"]) == (2, 3)  # a small one converts as int() does


# -- set_slot ---------------------------------------------------------------------------------


def test_set_slot__checks_and_id_normalisation(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled, slot = env.compiled, env.compiled.slots[0]
    r, c = slot.row, slot.col
    vr, vc = visible_cell(compiled)
    assert failed_with(
        call(env, "set_slot", row=vr, col=vc, id="x"), f"Slot (row={vr}, col={vc}) is fixed and cannot be modified"
    )
    assert failed_with(call(env, "set_slot", row=-1, col=0, id="x"), "Invalid slot (row=-1, col=0)")
    for empty in (None, ""):
        assert failed_with(call(env, "set_slot", row=r, col=c, id=empty), f"Slot (row={r}, col={c}) is already empty.")
    allowed = "Allowed ids: [" + ", ".join(repr(i) for i in sorted(slot.candidate_ids)) + "]"
    for bad in ("nope", 12, 1.5):
        detail = f"Slot (row={r}, col={c}) can only be set to one of its candidate ids. {allowed}"
        assert failed_with(call(env, "set_slot", row=r, col=c, id=bad), detail), bad
    wanted = truth_id(compiled, 0)
    updated = {"row": r, "col": c, "id": wanted, "message": "Hidden slot updated."}
    assert call(env, "set_slot", row=r, col=c, id=wanted)["data"] == updated
    assert call(env, "set_slot", row=r, col=c, id=wanted)["data"] == updated  # setting again succeeds
    assert call(env, "set_slot", row=r, col=c)["data"] == {
        "row": r,
        "col": c,
        "id": None,
        "message": "Hidden slot cleared.",
    }
    assert call(env, "get_slot_id", row=r, col=c)["data"]["id"] is None


def test_set_slot__accepts_filters_and_decoys_without_checking(domain: str) -> None:
    env = make_env(domain, H15_INDEX)
    entries = env.compiled.instance.slots
    for s, entry in enumerate(entries):
        for item_id in (*entry.filter_candidate_ids[:1], *entry.decoy_ids[:1]):
            envelope = call(env, "set_slot", row=entry.row, col=entry.col, id=item_id)
            assert envelope["status"] == "success", (s, item_id)


# -- grid state ---------------------------------------------------------------------------------


def test_get_current_grid_state__is_a_snapshot_of_the_live_grid(domain: str) -> None:
    env = make_env(domain, H15_INDEX)
    compiled = env.compiled
    before = call(env, "get_current_grid_state")["data"]["slots"]
    assert before == compiled.instance.partial_solution
    slot = compiled.slots[0]
    call(env, "set_slot", row=slot.row, col=slot.col, id=truth_id(compiled, 0))
    after = call(env, "get_current_grid_state")["data"]["slots"]
    assert after[slot.row][slot.col] == truth_id(compiled, 0)
    assert before[slot.row][slot.col] is None
    snapshot = [list(row) for row in after]
    after[0][0] = "tampered"
    assert call(env, "get_current_grid_state")["data"]["slots"] == snapshot
    assert compiled.instance.partial_solution[slot.row][slot.col] is None


def test_grid_texts__write_every_id_as_json_dumps(domain: str, tmp_path: Path) -> None:
    """The first user message and every grid-state reply hold the grid as ``json.dumps(grid,
    ensure_ascii=False)`` writes it, for ids with non-ASCII text, quotes, backslashes, NUL and ``%``
    (the grid is written from each item id's kept JSON text)."""
    raw = json.loads(published_file(domain).read_text())
    instance = raw["instances"][H15_INDEX]
    raw["instances"], raw["num_instances"] = [instance], 1
    visible = next(i for row in instance["partial_solution"] for i in row if i is not None)
    first, second = instance["slots"][0]["candidate_ids"][:2]
    renamed = {visible: 'Ç%s "日本"\\ 1\x00', first: "%d\u2028x", second: "100%\x00"}
    text = json.dumps(raw, ensure_ascii=False)
    for old, new in renamed.items():
        text = text.replace(json.dumps(old), json.dumps(new, ensure_ascii=False))
    path = tmp_path / "renamed.json"
    path.write_text(text, encoding="utf-8")
    env = AceEnv(domain, dataset=path)
    message = env.reset(options={"instance_index": 0})[0]
    grid = [list(row) for row in env.compiled.instance.partial_solution]
    assert renamed[visible] in (i for row in grid for i in row)
    assert json.dumps(grid, ensure_ascii=False) in message
    # call() checks each observation is json.dumps(decoded, ensure_ascii=False) byte for byte
    assert call(env, "get_current_grid_state")["data"]["slots"] == grid
    slot = env.compiled.slots[0]
    for item_id in (renamed[first], renamed[second], None):
        call(env, "set_slot", row=slot.row, col=slot.col, id=item_id)
        grid[slot.row][slot.col] = item_id
        assert call(env, "get_current_grid_state")["data"]["slots"] == grid


# -- item tools ---------------------------------------------------------------------------------


def test_get_item_info__only_initially_visible_ids(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled = env.compiled
    vr, vc = visible_cell(compiled)
    visible = compiled.instance.partial_solution[vr][vc]
    data = call(env, tool(env, "item_info"), id=visible)["data"]
    assert data == {"id": visible, "item": compiled.instance.item_pool[visible]}
    hidden = truth_id(compiled, 0)
    call(env, "set_slot", row=compiled.slots[0].row, col=compiled.slots[0].col, id=hidden)
    detail = f"Item id {hidden} is not accessible. You may only inspect ids from non-hidden slots."
    assert failed_with(call(env, tool(env, "item_info"), id=hidden), detail)
    assert failed_with(call(env, tool(env, "item_info"), id=5), "id must be a string")


def test_get_item_attributes__single_field_is_flat_and_several_are_nested(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    compiled = env.compiled
    pool = compiled.instance.item_pool
    ids = sorted(compiled.visible_ids)[:3]
    numeric, categorical = _numeric_field(domain), _categorical_field(domain)
    single = call(env, tool(env, "item_attributes"), ids=ids, field=f" {numeric} ")["data"]
    assert single == {"fields": [numeric], "items": {i: pool[i][numeric] for i in ids}, "missing_ids": []}
    for field in ([numeric, categorical], json.dumps([numeric, categorical])):
        multi = call(env, tool(env, "item_attributes"), ids=json.dumps([*ids, ids[0]]), field=field)["data"]
        assert multi["fields"] == [numeric, categorical]
        assert multi["items"] == {i: {numeric: pool[i][numeric], categorical: pool[i][categorical]} for i in ids}


def test_get_item_attributes__checks_run_in_published_order(domain: str) -> None:
    env = make_env(domain, H1_INDEX, max_query_ids=2, max_query_fields=2)
    compiled = env.compiled
    ids = sorted(compiled.visible_ids)[:2]
    hidden = truth_id(compiled, 0)
    allowed = ", ".join(sorted(k for k in get_domain(domain).item_keys if k != get_domain(domain).id_key))
    name = tool(env, "item_attributes")
    cases = [
        ({"ids": "[oops", "field": 5}, "ids string must be a valid JSON list"),
        ({"ids": '{"a": 1}', "field": 5}, "ids must be a list"),
        ({"ids": 5, "field": 5}, "ids must be a list"),
        ({"ids": [*ids[:1], 3], "field": 5}, "each element in ids must be a string"),
        ({"ids": [*ids, "x"], "field": 5}, "ids can contain at most 2 items"),
        ({"ids": [*ids, "x"], "field": "name"}, "ids can contain at most 2 items"),
        ({"ids": ids, "field": 5}, "field must be a string or a list of attribute names"),
        ({"ids": ids, "field": ["name", 3]}, "each field must be a string"),
        ({"ids": ids, "field": "   "}, "field must specify at least one attribute name"),
        ({"ids": ids, "field": ["", " "]}, "field must specify at least one attribute name"),
        ({"ids": ids, "field": ["a", "b", "c"]}, "field can specify at most 2 attributes"),
        (
            {"ids": [ids[0], hidden], "field": ["colour"]},
            f"ids contain inaccessible item(s): {hidden}. You may only inspect ids from non-hidden slots.",
        ),
        ({"ids": ids, "field": ["colour", "name", "size"]}, "field can specify at most 2 attributes"),
        ({"ids": ids, "field": ["colour", "size"]}, f"unknown field(s): colour, size. allowed fields: {allowed}"),
    ]
    for arguments, detail in cases:
        assert failed_with(call(env, name, **arguments), detail), (arguments, detail)


# -- checks ---------------------------------------------------------------------------------------


def test_check_slot_constraints__reports_validity_with_optional_reason(domain: str) -> None:
    env = make_env(domain, H15_INDEX, check_include_reason=True)
    compiled = env.compiled
    entry, slot = compiled.instance.slots[0], compiled.slots[0]
    name = tool(env, "slot_check")
    assert failed_with(
        call(env, name, row=slot.row, col=slot.col), f"Slot (row={slot.row}, col={slot.col}) has not been filled yet."
    )
    vr, vc = visible_cell(compiled)
    assert failed_with(call(env, name, row=vr, col=vc), "Slot constraint checks are only allowed for hidden slots.")
    call(env, "set_slot", row=slot.row, col=slot.col, id=entry.filter_candidate_ids[0])
    reason = f"slot ({slot.row}, {slot.col}) violates its slot constraints"
    assert call(env, name, row=slot.row, col=slot.col)["data"] == {
        "is_valid": False,
        "row": slot.row,
        "col": slot.col,
        "reason": reason,
    }
    call(env, "set_slot", row=slot.row, col=slot.col, id=entry.truth_id)
    assert call(env, name, row=slot.row, col=slot.col)["data"] == {
        "is_valid": True,
        "row": slot.row,
        "col": slot.col,
        "reason": None,
    }


def test_check_global_constraints__incomplete_grid_is_refused_and_not_charged(domain: str) -> None:
    env = make_env(domain, H15_INDEX, global_check_alpha=1)
    detail = "The current grid must be fully filled before global constraints can be checked."
    assert failed_with(call(env, tool(env, "global_check")), detail)
    assert call(env, "get_global_check_budget")["data"] == {
        "remaining_global_checks": 15,
        "global_check_budget": 15,
        "global_check_calls": 0,
    }


def test_check_global_constraints__decoy_gives_the_rule_sentence_and_filter_the_slot(domain: str) -> None:
    env = make_env(domain, H15_INDEX, check_include_reason=True)
    fill_with_truth(env)
    compiled, name = env.compiled, tool(env, "global_check")
    assert call(env, name)["data"] == {"is_valid": True, "reason": None}
    entry = next(e for e in compiled.instance.slots if e.decoy_ids)
    call(env, "set_slot", row=entry.row, col=entry.col, id=entry.decoy_ids[0])
    data = call(env, name)["data"]
    assert data["is_valid"] is False
    assert data["reason"] in {rule.reason for rule in compiled.global_rules}
    call(env, "set_slot", row=entry.row, col=entry.col, id=entry.filter_candidate_ids[0])
    assert call(env, name)["data"] == {
        "is_valid": False,
        "reason": f"slot ({entry.row}, {entry.col}) violates its slot constraints",
    }
    assert call(env, "get_global_check_budget")["data"]["global_check_calls"] == 3


# -- budgets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [-1, 0, 3])
def test_budgets__per_slot_budget_is_active_rules_plus_hidden_plus_extra(domain: str, extra: int) -> None:
    env = make_env(domain, H1_INDEX, extra_query_num=extra)
    for index in range(len(env.dataset)):
        _, info = env.reset(options={"instance_index": index})
        entries = env.compiled.instance.slots
        expected = {
            f"{e.row},{e.col}": None
            if extra == -1
            else len(e.slot_constraints["active_rule_names"]) + len(entries) + extra
            for e in entries
        }
        assert info["budgets"]["hidden_slot_query_budget"] == expected


@pytest.mark.parametrize("alpha", [0, 0.5, 1, 1.5, -1, None])
def test_budgets__global_check_budget_is_floor_alpha_times_hidden(domain: str, alpha: float | None) -> None:
    env = make_env(domain, H1_INDEX, global_check_alpha=alpha)
    for index in (0, 7, 14, 21, 28):
        _, info = env.reset(options={"instance_index": index})
        hidden = info["hidden_slots"]
        expected = None if alpha in (-1, None) else math.floor(alpha * hidden)
        assert info["budgets"]["global_check_budget"] == expected
        data = call(env, "get_global_check_budget")["data"]
        assert data == {"remaining_global_checks": expected, "global_check_budget": expected, "global_check_calls": 0}


def test_budgets__half_alpha_with_one_hidden_slot_disables_global_checks(domain: str) -> None:
    env = make_env(domain, H1_INDEX, global_check_alpha=0.5)
    fill_with_truth(env)
    assert failed_with(
        call(env, tool(env, "global_check")), "Global constraint check budget exhausted. Used 0/0 calls."
    )


def test_budgets__global_checks_are_charged_until_exhausted(domain: str) -> None:
    env = make_env(domain, 7, global_check_alpha=0.4)  # H=5 -> floor(2.0) = 2
    fill_with_truth(env)
    for _ in range(2):
        assert call(env, tool(env, "global_check"))["data"] == {"is_valid": True}
    assert failed_with(
        call(env, tool(env, "global_check")), "Global constraint check budget exhausted. Used 2/2 calls."
    )
    assert call(env, "get_global_check_budget")["data"]["remaining_global_checks"] == 0


# -- dispatch -----------------------------------------------------------------------------------


def test_dispatch__unknown_and_foreign_tools_are_unknown(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    other = next(d for d in DOMAIN_NAMES if d != domain)
    for name in ("foo_tool", f"get_{other}_item_info", ""):
        observation = env.step({"name": name, "arguments": {}})[0]
        assert json.loads(observation) == {
            "status": "failed",
            "messages": f"Unknown tool, '{name}' for domain '{domain}'",
            "data": {},
        }


def test_dispatch__extra_arguments_are_ignored_and_missing_ones_reported(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    assert call(env, "get_slot_id", row=0, col=0, bogus=1, kwargs={})["status"] == "success"
    assert failed_with(call(env, "get_slot_id", row=0), "missing required argument(s): col")
    slot = env.compiled.slots[0]
    assert failed_with(
        call(env, tool(env, "query"), row=slot.row, col=slot.col),
        "missing required argument(s): field, operator, value",
    )


def test_dispatch__mapping_arguments_give_their_own_keys_only(domain: str) -> None:
    """A Mapping that fills gaps (a defaultdict) binds what it holds: a left-out parameter takes
    its default or is reported missing, as with a plain dict."""
    env = make_env(domain, H1_INDEX)
    compiled = env.compiled
    slot = compiled.slots[0]
    item_id = truth_id(compiled, 0)
    assert call(env, "set_slot", row=slot.row, col=slot.col, id=item_id)["status"] == "success"
    tools, state = env.tools, env.state
    cleared = tools.call(state, "set_slot", defaultdict(lambda: item_id, row=slot.row, col=slot.col))
    assert json.loads(cleared.text)["data"]["id"] is None  # id left out: the default clears the slot
    missing = tools.call(state, "get_slot_id", MappingProxyType(defaultdict(int, row=0)))
    assert failed_with(json.loads(missing.text), "missing required argument(s): col")
    item_info = tool(env, "item_info")
    row, col = visible_cell(compiled)
    visible = compiled.item_ids[compiled.initial_grid[row * compiled.cols + col]]
    assert call(env, item_info, id=visible, bogus=1)["status"] == "success"
    assert failed_with(call(env, item_info, ids=[visible]), "missing required argument(s): id")
    assert call(env, "get_global_check_budget", bogus=1)["status"] == "success"


def test_done__returns_stop_and_changes_nothing(domain: str) -> None:
    env = make_env(domain, H1_INDEX)
    grid = list(env.state.grid)
    observation = env.step({"name": "done", "arguments": {}})[0]
    assert observation == STOP
    assert env.state.grid == grid


# -- schemas ------------------------------------------------------------------------------------


def test_schemas__are_valid_openai_functions_with_described_parameters(domain: str) -> None:
    tools = toolset(get_domain(domain))
    assert len(tools.schemas) == 11
    assert [s["function"]["name"] for s in tools.schemas] == list(tools.names)
    for schema in tools.schemas:
        assert set(schema) == {"type", "function"} and schema["type"] == "function"
        function = schema["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"] and "\n" not in function["description"]
        parameters = function["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object"
        assert "kwargs" not in parameters["properties"]
        for name, prop in parameters["properties"].items():
            assert isinstance(prop.get("description"), str) and prop["description"], (function["name"], name)
        assert set(parameters["required"]) <= set(parameters["properties"])
    required = {s["function"]["name"]: s["function"]["parameters"]["required"] for s in tools.schemas}
    noun = get_domain(domain).tool_noun
    assert required == {
        "set_slot": ["row", "col"],
        "get_current_grid_state": [],
        "get_hidden_slot_query_budget": ["row", "col"],
        "get_global_check_budget": [],
        "get_slot_id": ["row", "col"],
        "done": [],
        f"query_{noun}_candidate_from_attribute": ["row", "col", "field", "operator", "value"],
        f"get_{noun}_item_info": ["id"],
        f"get_{noun}_item_attributes": ["ids", "field"],
        f"check_{noun}_slot_constraints": ["row", "col"],
        f"check_{noun}_global_constraints": [],
    }


def test_schemas__example_arguments_validate_against_their_schema(domain: str) -> None:
    tools = toolset(get_domain(domain))
    by_name = {s["function"]["name"]: s["function"]["parameters"] for s in tools.schemas}
    noun = get_domain(domain).tool_noun
    examples = {
        "set_slot": {"row": 1, "col": 2, "id": None},
        f"query_{noun}_candidate_from_attribute": {
            "row": 0,
            "col": 1,
            "field": "name",
            "operator": "not_in",
            "value": [],
        },
        f"get_{noun}_item_attributes": {"ids": ["X1"], "field": ["name"]},
    }
    for name, arguments in examples.items():
        jsonschema.validate(arguments, by_name[name])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"row": 0, "col": 1, "field": "name", "operator": "==", "value": 1},
            by_name[f"query_{noun}_candidate_from_attribute"],
        )


def test_payloads__non_ascii_values_are_serialised_like_json_dumps(domain: str, tmp_path: Path) -> None:
    source = published_file(domain)
    raw = json.loads(source.read_text())
    instance = raw["instances"][H1_INDEX]
    raw["instances"], raw["num_instances"] = [instance], 1
    visible = instance["partial_solution"][0][0] or instance["partial_solution"][0][1]
    candidate = instance["slots"][0]["candidate_ids"][0]
    for item_id, name in ((visible, 'Écriture "✓" \\ 101'), (candidate, "Zoë\u2028 102")):
        instance["item_pool"][item_id]["name"] = name
    path = tmp_path / "unicode.json"
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    env = AceEnv(domain, dataset=path)
    env.reset(options={"instance_index": 0})
    slot = env.compiled.slots[0]
    # call() checks each observation equals json.dumps(decoded, ensure_ascii=False)
    matches = call(env, tool(env, "query"), row=slot.row, col=slot.col, field="name", operator="not_in", value=["Zoë"])
    assert matches["data"]["matches"][0] == {"id": candidate, "name": "Zoë\u2028 102"}
    attributes = call(env, tool(env, "item_attributes"), ids=[visible], field=["name", "name"])
    assert attributes["data"]["items"] == {visible: {"name": 'Écriture "✓" \\ 101'}}
    assert call(env, tool(env, "item_info"), id=visible)["data"]["item"]["name"] == 'Écriture "✓" \\ 101'
