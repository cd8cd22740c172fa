"""One generation attempt: truth, thresholds, slot rules, decoys, filters -> a validated Instance.

Follows docs/compatibility.md §2 (stages 1-2) with every random draw taken from the attempt's numpy Generator.
An attempt either returns a complete :class:`~ace_gym.instance.Instance` in the published layout or raises
:class:`AttemptFailed` with a reason; the caller retries with the next derived seed.

Items are rows of an int64 matrix over the domain's attributes (categorical values as codes).
Global rules become *components* (see :mod:`ace_gym.generators.combinations`).

Departures from the published generator, each fixing a tell or a failure mode (docs/compatibility.md §2.7, §7):

* Names do not reveal the truth. The published release numbers names by generation order, so the
  truth always has the smallest number in its slot. Here name numbers are a random permutation
  of 100..100+P-1 drawn after all P items exist, the phrase is drawn per item, and the
  ``item_pool`` order is shuffled too.
* Decoy attributes stay inside the domain's natural ranges (``NumericAttribute.low/high``) and
  inside the slot's own rules; the published targeted sampling could push them below the range.
* No vacuous slot rule. A rule value is drawn only among values compatible with the truth that
  some in-range item could fail (``max``: value < high, ``min``: value > low). A hidden cell whose
  truth item admits too few such rules gets a fresh truth item (hidden truths are therefore never
  at the natural extreme of more than one rule attribute; visible items are unconstrained).
* Filters are constructed to violate: each filter takes random in-range attributes, then one of
  the slot's active rules (chosen at random) gets a value drawn from its violating range.
* Decoys are constructed, not rejection-sampled: each decoy targets one rule component that the
  separable test shows it can break under every earlier choice and sets the rule's attribute to a
  value drawn from the breaking (and, where possible, open-prefix-safe) range; the remaining
  attributes are random within the slot's allowed ranges. Branch slots are drawn among the hidden
  cells where some decoy can exist under the drawn thresholds (the published generator drew them
  among all hidden cells and restarted when a slot had none).
* Open-prefix tiers are met by batches of constructed candidates per tier rather than by attempt
  counts: tier 1 (every earlier choice, later hidden cells empty), tier 2 (empty or decoy
  suffixes), tier 3 (earlier slots truth), else ``hard_only``; the last branch slot is
  ``last_branch_hard_only`` as published.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from ace_gym.constraints import SLOT_KINDS, Reading, combine, components, kind_of, read, read_each
from ace_gym.dataset_schema import Instance, InstanceMeta, Position, SlotEntry
from ace_gym.domains import CategoricalAttribute, Domain, NumericAttribute, get_domain
from ace_gym.generators.combinations import breaks_every_combination
from ace_gym.generators.config import InstanceConfig
from ace_gym.prompts import render_task_instruction

STAGE_LABELS = {0: "not_applicable", 1: "tier_1", 2: "tier_2", 3: "tier_3", 4: "hard_only"}
LAST_BRANCH_LABEL = "last_branch_hard_only"
DECOY_BATCH = 8  # candidates constructed per decoy and tier before falling to the next tier
TRUTH_REDRAWS = 200  # fresh truth items tried for a hidden cell without enough non-vacuous rules


class AttemptFailed(Exception):
    """This attempt's random draws admit no instance; ``reason`` says which stage failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _DomainTable:
    """A domain's attributes and slot rules as arrays (built once per domain)."""

    domain: Domain
    low: np.ndarray  # natural range per attribute; categorical: [0, len(values) - 1]
    high: np.ndarray
    rule_attr: tuple[int, ...]  # slot rules, domain order
    rule_is_max: tuple[bool, ...]
    rule_values: tuple[np.ndarray, ...]
    name_attr: int  # -1 for the fixed "Worker" phrase

    def index(self, attribute: str) -> int:
        return [a.name for a in self.domain.attributes].index(attribute)

    def vocabulary(self, attribute: str) -> tuple[str, ...] | None:
        """The category values of ``attribute`` in code order; None for a numeric attribute."""
        found = self.domain.attribute(attribute)
        return found.values if isinstance(found, CategoricalAttribute) else None


@cache
def _table(domain_name: str) -> _DomainTable:
    domain = get_domain(domain_name)
    low, high = [], []
    for attribute in domain.attributes:
        if isinstance(attribute, NumericAttribute):
            low.append(attribute.low)
            high.append(attribute.high)
        else:
            low.append(0)
            high.append(len(attribute.values) - 1)
    names = [a.name for a in domain.attributes]
    return _DomainTable(
        domain=domain,
        low=np.asarray(low, dtype=np.int64),
        high=np.asarray(high, dtype=np.int64),
        rule_attr=tuple(names.index(rule.attribute) for rule in domain.slot_rules),
        rule_is_max=tuple(SLOT_KINDS[rule.kind].upper for rule in domain.slot_rules),
        rule_values=tuple(np.asarray(rule.values, dtype=np.int64) for rule in domain.slot_rules),
        name_attr=names.index(domain.name_attribute) if domain.name_attribute else -1,
    )


def _random_items(rng: np.random.Generator, count: int, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``count`` items with every attribute uniform in ``[low, high]`` (per attribute or per item)."""
    return rng.integers(low, high + 1, size=(count, low.shape[-1]), dtype=np.int64)


class _Components:
    """The global rules of one instance as signed components (:func:`ace_gym.constraints.components`),
    each reading an item's attribute directly: the rule's reading and the component's test compose
    into one reading, because only a VALUE reading is ever tested further (``RuleKind`` enforces it)."""

    def __init__(self, table: _DomainTable, bounds: dict[str, int], rows: int) -> None:
        spec: list[tuple[int, int, int, int, int, int, bool]] = []  # read, param, attr, sign, row, T, upper
        for rule in table.domain.global_rules:
            kind, attr = kind_of(rule), table.index(rule.attribute)
            parameter = kind.parameter(rule, table.vocabulary(rule.attribute))
            codes = range(int(table.high[attr]) + 1)
            found = components(kind, bounds[rule.name], codes, rows)
            for test, tested, sign, row, threshold in zip(*found, strict=True):
                reading = (kind.reading, parameter) if test is Reading.VALUE else (test, tested)
                spec.append((*reading, attr, sign, row, threshold, kind.upper))
        columns = np.asarray([s[:6] for s in spec], dtype=np.int64).T
        self.read, self.param, self.attr, self.sign, self.row, self.threshold = columns
        self.upper = np.asarray([s[6] for s in spec], dtype=bool)
        self.count = len(spec)

    def of(self, items: np.ndarray, cell_rows: np.ndarray | int) -> np.ndarray:
        """Contribution rows ``(len(items), components)`` of items placed in rows ``cell_rows``."""
        out = read_each(self.read, items[:, self.attr], self.param)
        out *= self.sign
        rows = np.broadcast_to(np.asarray(cell_rows).reshape(-1, 1), out.shape)
        out[(self.row >= 0) & (self.row != rows)] = 0
        return out

    def of_values(self, ks: np.ndarray, values: np.ndarray, cell_row: int) -> np.ndarray:
        """Contributions ``(len(ks), len(values))`` to components ``ks``, which read one attribute,
        of an item with each of ``values`` placed in row ``cell_row``."""
        out = read_each(self.read[ks, None], values[None, :], self.param[ks, None])
        out *= self.sign[ks, None]
        out[(self.row[ks] >= 0) & (self.row[ks] != cell_row)] = 0
        return out


def _thresholds(rng: np.random.Generator, table: _DomainTable, truth: np.ndarray, cols: int) -> dict[str, int]:
    """One threshold per global rule, drawn from its kind's range around the truth grid's aggregate
    (docs/compatibility.md §1.6)."""
    cells = truth.shape[0]
    bounds: dict[str, int] = {}
    for rule in table.domain.global_rules:
        kind, attr = kind_of(rule), table.index(rule.attribute)
        parameter = kind.parameter(rule, table.vocabulary(rule.attribute))
        observed = combine(kind.aggregate, read(kind.reading, truth[:, attr], parameter), cols)
        low, high = kind.threshold_range(observed, rule, cells, cols, int(table.high[attr]))
        bounds[rule.name] = int(rng.integers(low, high + 1))
    return bounds


def _nonvacuous_values(table: _DomainTable, rule: int, item: np.ndarray) -> np.ndarray:
    """Values of slot rule ``rule`` the item satisfies and some in-range item could fail."""
    attr, values = table.rule_attr[rule], table.rule_values[rule]
    value = item[attr]
    if table.rule_is_max[rule]:
        return values[(values >= value) & (values < table.high[attr])]
    return values[(values <= value) & (values > table.low[attr])]


def _feasible_rules(table: _DomainTable, item: np.ndarray) -> list[int]:
    return [r for r in range(len(table.rule_attr)) if _nonvacuous_values(table, r, item).size]


def _assign_slot_rules(
    rng: np.random.Generator, table: _DomainTable, hidden_items: np.ndarray, per_slot: int
) -> list[list[tuple[int, int]]]:
    """Per hidden slot its ``(rule, value)`` list in assignment order: round-robin cover of the
    shuffled rules, then a random top-up to ``per_slot`` rules (docs/compatibility.md §2.3 step 5)."""
    feasible = [_feasible_rules(table, item) for item in hidden_items]
    count = len(hidden_items)
    assigned: list[list[int]] = [[] for _ in range(count)]
    for i, rule in enumerate(rng.permutation(len(table.rule_attr)).tolist()):
        for step in range(count):
            s = (i + step) % count
            if rule in feasible[s] and len(assigned[s]) < per_slot:
                assigned[s].append(rule)
                break
    for s in range(count):
        missing = [r for r in feasible[s] if r not in assigned[s]]
        while len(assigned[s]) < per_slot:
            assigned[s].append(missing.pop(int(rng.integers(len(missing)))))
    return [
        [(rule, int(rng.choice(_nonvacuous_values(table, rule, hidden_items[s])))) for rule in assigned[s]]
        for s in range(count)
    ]


def _allowed_ranges(table: _DomainTable, rules: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Natural ranges narrowed by a slot's rules: the box a decoy must lie in."""
    low, high = table.low.copy(), table.high.copy()
    for rule, value in rules:
        attr = table.rule_attr[rule]
        if table.rule_is_max[rule]:
            high[attr] = min(high[attr], value)
        else:
            low[attr] = max(low[attr], value)
    return low, high


def _split_budget(rng: np.random.Generator, budget: int, k: int, cap: int) -> list[int]:
    """Decoy counts of the k branch slots: each in [1, cap], summing to ``budget`` (docs/compatibility.md §2.3)."""
    if k == 1:
        return [budget]
    parts, remaining = [], budget
    for i in range(k - 1):
        left = k - 1 - i
        parts.append(int(rng.integers(max(1, remaining - left * cap), min(cap, remaining - left) + 1)))
        remaining -= parts[-1]
    parts.append(remaining)
    return [int(x) for x in rng.permutation(parts)]


class _TargetSets:
    """For one branch slot: per component, the attribute values that break it (hard) and that
    also keep it within bound in a tier's open contexts."""

    def __init__(
        self,
        components: _Components,
        low: np.ndarray,
        high: np.ndarray,
        cell_row: int,
        need_above: np.ndarray,
        open_limit: np.ndarray | None = None,
    ) -> None:
        found: dict[int, np.ndarray] = {}
        for attr in np.unique(components.attr).tolist():
            ks = np.flatnonzero(components.attr == attr)
            candidates = np.arange(low[attr], high[attr] + 1, dtype=np.int64)
            contribution = components.of_values(ks, candidates, cell_row)
            ok = contribution > need_above[ks, None]
            if open_limit is not None:
                ok &= (contribution <= open_limit[ks, None]) | ~components.upper[ks, None]
            for i in np.flatnonzero(ok.any(axis=1)).tolist():
                found[int(ks[i])] = candidates[ok[i]]
        self.values = dict(sorted(found.items()))  # component order: draws do not depend on attributes
        self.components = components

    def draw(self, rng: np.random.Generator, count: int, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """``count`` items in ``[low, high]``, each with one targeted attribute set to a breaking
        value: the attribute is drawn uniformly among those with a breakable component, then the
        component (e.g. which category of a ``repeat_max`` rule), then the value."""
        items = _random_items(rng, count, low, high)
        by_attr: dict[int, list[int]] = {}
        for k in self.values:
            by_attr.setdefault(int(self.components.attr[k]), []).append(k)
        choices = list(by_attr.values())
        for n in range(count):
            group = choices[int(rng.integers(len(choices)))]
            k = group[int(rng.integers(len(group)))]
            values = self.values[k]
            items[n, self.components.attr[k]] = values[int(rng.integers(values.size))]
        return items


@dataclass(frozen=True)
class _Scaffold:
    """Stage 1 (docs/compatibility.md §2.3): truth, thresholds, hidden layout, slot rules and the branch plan.

    Arrays over components: ``truth_rows[cell]`` (each truth item's contribution), ``totals``
    (the truth grid's vector), ``later_truth[s]`` (summed over the hidden cells after slot s).
    """

    truth: np.ndarray
    hidden: np.ndarray
    bounds: dict[str, int]
    components: _Components
    cell_rows: np.ndarray
    truth_rows: np.ndarray
    totals: np.ndarray
    slot_rules: list[list[tuple[int, int]]]
    ranges: list[tuple[np.ndarray, np.ndarray]]
    later_truth: np.ndarray
    branch: list[int]
    allocations: list[int]


def _scaffold(config: InstanceConfig, rng: np.random.Generator, table: _DomainTable) -> _Scaffold:
    cells, cols = config.cells, config.cols
    per_slot = min(len(table.rule_attr), 3 if config.hidden_slots == 1 else 2)
    truth = _random_items(rng, cells, table.low, table.high)
    hidden = np.sort(rng.choice(cells, size=config.hidden_slots, replace=False))
    for cell in hidden.tolist():  # hidden truths must admit per_slot non-vacuous rules
        for _ in range(TRUTH_REDRAWS):
            if len(_feasible_rules(table, truth[cell])) >= per_slot:
                break
            truth[cell] = _random_items(rng, 1, table.low, table.high)[0]
        else:
            raise AttemptFailed("no truth item admitting non-vacuous slot rules was drawn")
    bounds = _thresholds(rng, table, truth, cols)
    components = _Components(table, bounds, config.rows)
    cell_rows = np.arange(cells) // cols
    truth_rows = components.of(truth, cell_rows)
    totals = truth_rows.sum(axis=0)
    slot_rules = _assign_slot_rules(rng, table, truth[hidden], per_slot)
    ranges = [_allowed_ranges(table, rules) for rules in slot_rules]
    hidden_rows = truth_rows[hidden]
    later_truth = np.cumsum(hidden_rows[::-1], axis=0)[::-1] - hidden_rows

    # branch slots among the hidden cells where some decoy can break a rule on its own
    k = config.branch_slot_count
    breakable = [
        s
        for s, cell in enumerate(hidden.tolist())
        if _TargetSets(
            components, *ranges[s], int(cell_rows[cell]), components.threshold - totals + truth_rows[cell]
        ).values
    ]
    if len(breakable) < k:
        raise AttemptFailed(f"only {len(breakable)} hidden cells can hold a decoy under the drawn thresholds, need {k}")
    branch = sorted(rng.choice(breakable, size=k, replace=False).tolist()) if k else []
    allocations = _split_budget(rng, config.decoy_budget, k, config.branch_cap) if k else []
    return _Scaffold(
        truth,
        hidden,
        bounds,
        components,
        cell_rows,
        truth_rows,
        totals,
        slot_rules,
        ranges,
        later_truth,
        branch,
        allocations,
    )


class _EarlierDecoys:
    """What the decoys of the branch slots built so far allow, per component (docs/compatibility.md §2.5).

    ``slack``: sum over earlier slots of min(0, min delta) -- the most an adversarial choice of
    earlier decoys can lower a component (the hard guarantee must survive it).
    ``open_max(tier)``: the most earlier decoys can raise a component in the tier's open contexts:
    tier 1 any choice per slot, tier 2 the empty choice or all decoys from some slot on, tier 3
    none.
    """

    def __init__(self, width: int) -> None:
        self.slack = np.zeros(width, dtype=np.int64)
        self.maxima: list[np.ndarray] = []

    def add(self, deltas: np.ndarray) -> None:
        self.slack = self.slack + np.minimum(deltas.min(axis=0), 0)
        self.maxima.append(deltas.max(axis=0))

    def open_max(self, tier: int) -> np.ndarray | int:
        if not self.maxima or tier == 3:
            return 0
        maxima = np.asarray(self.maxima)
        if tier == 1:
            return np.maximum(maxima, 0).sum(axis=0)
        suffix_sums = np.cumsum(maxima[::-1], axis=0)[::-1]
        return np.maximum(suffix_sums.max(axis=0), 0)


def _decoys(
    rng: np.random.Generator, scaffold: _Scaffold, s: int, amount: int, earlier: _EarlierDecoys, last: bool
) -> tuple[np.ndarray, int]:
    """``amount`` decoys for hidden slot ``s`` and the slot's stage (1-3 open-prefix tier, 4 hard only).

    Every decoy passes the slot's rules and, by the separable test, breaks some global rule under
    every choice in the earlier branch slots (later slots truth). Tiers are tried in order with a
    batch of constructed candidates each; the last branch slot skips them (docs/compatibility.md §2.5).
    """
    components = scaffold.components
    cell = int(scaffold.hidden[s])
    row = int(scaffold.cell_rows[cell])
    low, high = scaffold.ranges[s]
    base = scaffold.totals - scaffold.truth_rows[cell]
    need_above = components.threshold - base - earlier.slack
    accepted = np.zeros((0, low.shape[0]), dtype=np.int64)
    stage = 4
    for tier in () if last else (1, 2, 3):
        limit = components.threshold - (base - scaffold.later_truth[s]) - earlier.open_max(tier)
        targets = _TargetSets(components, low, high, row, need_above, limit)
        if not targets.values:
            continue
        batch = targets.draw(rng, DECOY_BATCH * (amount - len(accepted)), low, high)
        contribution = components.of(batch, row)
        ok = breaks_every_combination(base, earlier.slack, components.threshold, contribution)
        ok &= ((contribution <= limit) | ~components.upper).all(axis=1)
        if ok.any():
            accepted = np.concatenate([accepted, batch[ok][: amount - len(accepted)]])
            stage = tier
        if len(accepted) == amount:
            return accepted, stage
    targets = _TargetSets(components, low, high, row, need_above)
    if not targets.values:
        raise AttemptFailed("no decoy can break a global rule under every earlier decoy choice")
    batch = targets.draw(rng, amount - len(accepted), low, high)
    if not breaks_every_combination(base, earlier.slack, components.threshold, components.of(batch, row)).all():
        raise AssertionError("a constructed decoy does not break every combination")  # a bug, not bad luck
    return np.concatenate([accepted, batch]), 4


def _filters(rng: np.random.Generator, table: _DomainTable, rules: list[tuple[int, int]], count: int) -> np.ndarray:
    """``count`` random in-range items, each made to violate one of ``rules`` (drawn at random)."""
    batch = _random_items(rng, count, table.low, table.high)
    chosen = rng.integers(len(rules), size=count)
    for position, (rule, value) in enumerate(rules):
        picked = np.flatnonzero(chosen == position)
        attr = table.rule_attr[rule]
        if table.rule_is_max[rule]:
            batch[picked, attr] = rng.integers(value + 1, table.high[attr] + 1, size=picked.size)
        else:
            batch[picked, attr] = rng.integers(table.low[attr], value, size=picked.size)
    return batch


def build_instance(config: InstanceConfig, rng: np.random.Generator) -> Instance:
    """One attempt (docs/compatibility.md §2.3-2.5): a validated instance in the published layout,
    without the certificate. Raises :class:`AttemptFailed` when the draws admit none."""
    table = _table(config.domain)
    scaffold = _scaffold(config, rng, table)
    components = scaffold.components
    items = [scaffold.truth]
    next_index = config.cells
    decoys: dict[int, list[int]] = {}
    stages: dict[int, tuple[int, str]] = {}
    earlier = _EarlierDecoys(components.count)
    for rank, (s, amount) in enumerate(zip(scaffold.branch, scaffold.allocations, strict=True)):
        last = rank == len(scaffold.branch) - 1
        accepted, stage = _decoys(rng, scaffold, s, amount, earlier, last)
        cell = int(scaffold.hidden[s])
        earlier.add(components.of(accepted, int(scaffold.cell_rows[cell])) - scaffold.truth_rows[cell])
        decoys[s] = list(range(next_index, next_index + amount))
        next_index += amount
        items.append(accepted)
        stages[s] = (stage, LAST_BRANCH_LABEL if last else STAGE_LABELS[stage])
    filters: dict[int, list[int]] = {}
    for s in range(config.hidden_slots):
        count = config.effective_candidates - 1 - len(decoys.get(s, []))
        items.append(_filters(rng, table, scaffold.slot_rules[s], count))
        filters[s] = list(range(next_index, next_index + count))
        next_index += count
    return _assemble(config, rng, table, scaffold, np.concatenate(items), _Roles(decoys, filters, stages))


@dataclass(frozen=True)
class _Roles:
    """What each hidden slot got beyond its truth: ``decoys[s]`` and ``filters[s]`` (pool rows) and
    ``stages[s]``, the decoy stage (number, label) of a branch slot."""

    decoys: dict[int, list[int]]
    filters: dict[int, list[int]]
    stages: dict[int, tuple[int, str]]


def _assemble(
    config: InstanceConfig,
    rng: np.random.Generator,
    table: _DomainTable,
    scaffold: _Scaffold,
    pool: np.ndarray,
    roles: _Roles,
) -> Instance:
    """Ids, names and the published layout (docs/compatibility.md §1.3-1.4). ``pool`` rows are the
    items in generation order (truth grid first). The random draws happen in this order: ids,
    name numbers, name phrases, the item-pool order, then each slot's candidate order."""
    ids, records = _item_records(rng, table, pool)
    item_pool = {ids[i]: records[i] for i in rng.permutation(len(ids)).tolist()}
    slots, instruction_rules = _slot_entries(rng, table.domain, config, scaffold, ids, roles)
    rows, cols, hidden = config.rows, config.cols, set(scaffold.hidden.tolist())
    return Instance(
        domain=table.domain.name,
        meta=_meta(config, scaffold, roles),
        global_constraints={"global": "global", **scaffold.bounds},
        item_pool=item_pool,
        truth_solution=[[ids[r * cols + c] for c in range(cols)] for r in range(rows)],
        partial_solution=[
            [None if r * cols + c in hidden else ids[r * cols + c] for c in range(cols)] for r in range(rows)
        ],
        hidden_slots=[Position(row=cell // cols, col=cell % cols) for cell in scaffold.hidden.tolist()],
        slots=slots,
        task_instruction=render_task_instruction(table.domain, rows, cols, scaffold.bounds, instruction_rules),
        instance_id=config.instance_id,
    )


def _item_records(
    rng: np.random.Generator, table: _DomainTable, pool: np.ndarray
) -> tuple[list[str], list[dict[str, int | str]]]:
    """Every pool item's id and item dict (id key, name, attributes in domain order). Ids are
    distinct random numbers; names pair a phrase drawn from the item's name attribute with a
    number from a random permutation, so neither reveals the generation order."""
    domain, size = table.domain, pool.shape[0]
    width = 3
    numbers = rng.choice(max(20 * size, 10**width), size=size, replace=False) + 1
    ids = [f"{domain.id_prefix}{int(n):0{width}d}" for n in numbers]
    name_numbers = rng.permutation(size) + 100
    phrase_draws = np.asarray(rng.random(size))
    attributes = domain.attributes
    named = attributes[table.name_attr] if table.name_attr >= 0 else None
    records = []
    for i in range(size):
        row = pool[i].tolist()
        if isinstance(named, CategoricalAttribute):
            phrases = domain.name_phrases[named.values[row[table.name_attr]]]
            phrase = phrases[int(phrase_draws[i] * len(phrases))]
        else:
            phrase = "Worker"
        record: dict[str, int | str] = {domain.id_key: ids[i], "name": f"{phrase} {int(name_numbers[i])}"}
        for a, attribute in enumerate(attributes):
            value = row[a]
            record[attribute.name] = value if isinstance(attribute, NumericAttribute) else attribute.values[value]
        records.append(record)
    return ids, records


def _slot_entries(
    rng: np.random.Generator,
    domain: Domain,
    config: InstanceConfig,
    scaffold: _Scaffold,
    ids: list[str],
    roles: _Roles,
) -> tuple[list[SlotEntry], list[tuple[int, int, list[tuple[str, str, int]]]]]:
    """The hidden slots in row-major order, each with its candidates shuffled, and their rules as
    the task instruction states them: ``(row, col, [(attribute, kind, value)])`` in domain order."""
    rank_of = {s: rank for rank, s in enumerate(scaffold.branch)}
    slots = []
    instruction_rules: list[tuple[int, int, list[tuple[str, str, int]]]] = []
    for s, cell in enumerate(scaffold.hidden.tolist()):
        r, c = divmod(cell, config.cols)
        own_decoys = [ids[i] for i in roles.decoys.get(s, [])]
        own_filters = [ids[i] for i in roles.filters[s]]
        candidates = [ids[cell], *own_decoys, *own_filters]
        candidates = [candidates[i] for i in rng.permutation(len(candidates)).tolist()]
        rules = scaffold.slot_rules[s]
        constraints: dict[str, int | str | list[str]] = {
            "row": r,
            "col": c,
            "active_rule_names": [domain.slot_rules[rule].name for rule, _ in rules],
        }
        constraints.update({domain.slot_rules[rule].name: value for rule, value in rules})
        stage = roles.stages.get(s)
        slots.append(
            SlotEntry(
                row=r,
                col=c,
                truth_id=ids[cell],
                is_hidden=True,
                slot_constraints=constraints,
                candidate_ids=candidates,
                decoy_ids=own_decoys,
                filter_candidate_ids=own_filters,
                is_branch_slot=s in rank_of,
                branch_rank=rank_of.get(s),
                allocated_budget=len(own_decoys),
                decoy_generation_final_stage=None if stage is None else stage[0],
                decoy_generation_final_stage_label=None if stage is None else stage[1],
            )
        )
        stated: list[tuple[str, str, int]] = [
            (domain.slot_rules[rule].attribute, domain.slot_rules[rule].kind, value) for rule, value in sorted(rules)
        ]
        instruction_rules.append((r, c, stated))
    return slots, instruction_rules


def _meta(config: InstanceConfig, scaffold: _Scaffold, roles: _Roles) -> InstanceMeta:
    """The instance's generation metadata (docs/compatibility.md §1.3); the instance's stage is its
    hardest branch slot's."""
    instance_stage = max((stage for stage, _ in roles.stages.values()), default=0)
    return InstanceMeta(
        rows=config.rows,
        cols=config.cols,
        hidden_slots=config.hidden_slots,
        branch_budget=config.decoy_budget,
        branch_slot_count=len(scaffold.branch),
        branch_budget_allocations=scaffold.allocations,
        candidates_per_slot=config.effective_candidates,
        requested_candidates_per_slot=config.candidates_per_slot,
        decoy_generation_final_stage=instance_stage,
        decoy_generation_final_stage_label=STAGE_LABELS[instance_stage],
    )
