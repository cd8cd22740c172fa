"""Data flows one way: ace_gym's packages sit in layers (LAYERS, the table docs/architecture.md
prints), none imports a higher layer or another benchmark home, and neither the package graph nor
the module graph has a cycle.

Every import statement counts, wherever it stands: at module level, inside a function (a
deferred import is still a dependency) or under ``TYPE_CHECKING``; for the layers, so does every
string naming an ace_gym module or an entry point in one (``"ace_gym.x.y:Name"``), so that a
string cannot hide an edge (a dotted name of an attribute, ``"ace_gym.x.y.Name"``, names its
longest module prefix). ``from package import name`` depends on the submodule ``package.name`` when
there is one, else on the package itself; importing ``a.b.c`` is not counted as depending on the
packages ``a`` and ``a.b``. A deprecated alias points to its new home on purpose for one release
and is no edge: a module of exactly the shim shape (:data:`SHIM_SHAPE`), and a table of names
that moved out passed to ``lazy_exports.moved_names``. A module name built at run time would
hide an edge, so only the modules of :data:`DYNAMIC_IMPORTS_ALLOWED` import one.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import ace_gym

PACKAGE_ROOT = Path(ace_gym.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _import_targets(node: ast.AST, package: str, modules: dict[str, Path]) -> list[str]:
    """The modules an import statement ``node`` in package ``package`` depends on ([] for another node)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ace_gym modules that module ``name`` (file ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = {target for node in ast.walk(tree) for target in _import_targets(node, package, modules)}
    return {module for module in found if module in modules and module != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_cycle(graph, component) for component in components]


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest import path from the component's first module back to itself."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def test_imports__ace_gym_has_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycles = [" -> ".join(cycle) for cycle in _cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_imports__the_cycle_finder_finds_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    modules = {"ace_gym.a": tmp_path / "a.py", "ace_gym.b": tmp_path / "b.py", "ace_gym.c": tmp_path / "c.py"}
    modules["ace_gym.a"].write_text("from ace_gym import b\n")
    modules["ace_gym.b"].write_text("def f():\n    from ace_gym.c import x\n")
    modules["ace_gym.c"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph == {"ace_gym.a": {"ace_gym.b"}, "ace_gym.b": {"ace_gym.c"}, "ace_gym.c": {"ace_gym.a"}}
    assert _cycles(graph) == [["ace_gym.a", "ace_gym.b", "ace_gym.c", "ace_gym.a"]]
    assert _cycles({"ace_gym.a": {"ace_gym.b"}, "ace_gym.b": set()}) == []


def test_imports__only_the_entry_point_imports_the_cli_dispatcher() -> None:
    """``ace_gym.cli`` assembles every command, so a module importing it depends on all of them:
    commands and libraries take the shared flags from ``cli_flags`` and the exit codes from
    ``exit_codes``; only ``python -m ace_gym`` (and the ``ace-gym`` script) runs the dispatcher."""
    modules = _modules()
    importers = sorted(name for name, path in modules.items() if "ace_gym.cli" in _imports(name, path, modules))
    assert importers == ["ace_gym.__main__"]


# --- Package layers -----------------------------------------------------------------------------
#
# A package is ``ace_gym.<first component>`` (a top-level module is its own package; the root
# package ``ace_gym/__init__.py`` is "ace_gym"). A package may import only packages of its own or a
# lower layer, the package-level graph has no cycle, and the benchmark homes import none of each
# other. docs/architecture.md prints the same table (test_layers__the_architecture_doc_states_this_table).

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "errors",
            "atomic",
            "text",
            "stats",
            "lazy_exports",
            "presets",
            "ray_cluster",
            "version",
            "exit_codes",
            "wrapper_entry",
        ),
    ),
    (
        "data",
        (
            "domains",
            "constraints",
            "dataset_schema",
            "instance",
            "scoring",
            "prompts",
            "generators",
            "curriculum",
            "chat_template",
            "cli_flags",
        ),
    ),
    ("tools", ("tools", "parsing", "spaces")),
    ("envs", ("envs",)),
    ("core", ("wrappers", "agents")),
    ("runs", ("runs",)),
    ("benchmarks", ("planning", "feedback", "longbench")),
    ("stacks", ("stacks", "policies")),
    ("apps", ("eval", "server", "integrations", "hub", "registration", "cli", "__main__", "ace_gym")),
)
"""Lowest first: (layer name, its packages)."""

INDEPENDENT_LAYERS = frozenset({"benchmarks"})
"""Layers whose packages import none of each other (one home per benchmark)."""

LAYER_OF: dict[str, int] = {package: rank for rank, (_, packages) in enumerate(LAYERS) for package in packages}


@dataclass(frozen=True)
class Edge:
    """Module ``source`` (file ``path``, line ``line``) depends on module ``target``."""

    source: str
    target: str
    path: Path
    line: int
    how: str  # "import", or the string entry point that names the target

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(PACKAGE_ROOT.parent)}:{self.line}"


def _package(module: str) -> str:
    """``ace_gym.eval.loop`` -> ``eval``; ``ace_gym`` -> ``ace_gym``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layer(package: str) -> str:
    return f"{LAYERS[LAYER_OF[package]][0]} ({LAYER_OF[package]})" if package in LAYER_OF else "no layer"


SHIM_SHAPE = (
    "from ace_gym.lazy_exports import moved_module",
    "__moved_to__ = 'ace_gym.new.home'",
    "__getattr__, __dir__ = moved_module(__name__, __moved_to__)",
)
"""A moved module's whole body after its docstring (``lazy_exports.moved_module``): nothing else
may stand in a module whose imports the layers ignore."""


def _is_shim(tree: ast.Module) -> bool:
    """A deprecated alias: a docstring, then exactly :data:`SHIM_SHAPE` with any home (a string)."""
    body = tree.body
    if len(body) != 1 + len(SHIM_SHAPE) or not _is_docstring(body[0]):
        return False
    moved = body[2]
    if not (isinstance(moved, ast.Assign) and isinstance(moved.value, ast.Constant)):
        return False
    if not isinstance(moved.value.value, str):
        return False
    shape = ast.parse("\n".join(SHIM_SHAPE).replace("'ace_gym.new.home'", repr(moved.value.value))).body
    return [ast.dump(node) for node in body[1:]] == [ast.dump(node) for node in shape]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _called_name(node: ast.Call) -> str | None:
    """``f`` of a call ``f(...)`` or ``x.f(...)``."""
    function = node.func
    return function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)


def _moved_tables(tree: ast.Module) -> list[ast.expr]:
    """The tables of names that moved out, as ``lazy_exports.moved_names(__name__, TABLE)`` is
    given them: the expression itself, or the module-level value of the name passed."""
    passed = [
        node.args[1]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called_name(node) == "moved_names" and len(node.args) == 2
    ]
    names = {arg.id for arg in passed if isinstance(arg, ast.Name)}
    tables = [arg for arg in passed if not isinstance(arg, ast.Name)]
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            tables.append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names:
            if node.value is not None:
                tables.append(node.value)
    return tables


ENTRY_POINT = re.compile(r"^(ace_gym(?:\.\w+)+)(?::[\w.]+)?$")
"""A string naming an ace_gym module (``"ace_gym.x.y"``), an attribute of one
(``"ace_gym.x.y.Name"``) or an entry point in one (``"ace_gym.x.y:Name"``)."""


def _named_module(text: str, modules: dict[str, Path]) -> str | None:
    """The module a string names (its longest dotted prefix that is a module below ``ace_gym``), or None."""
    match = ENTRY_POINT.match(text)
    if not match:
        return None
    parts = match.group(1).split(".")
    return next((".".join(parts[:n]) for n in range(len(parts), 1, -1) if ".".join(parts[:n]) in modules), None)


DYNAMIC_IMPORTS_ALLOWED: dict[str, str] = {
    "ace_gym.cli": "the command table: each command's module, imported when it runs",
    "ace_gym.wrapper_entry": "a registry entry loads its wrapper class from the entry point it states",
    "ace_gym.stacks": "StackSpec.make loads the entry points Gymnasium registered for an env id",
    "ace_gym.planning": "the package's own submodules, by the name table of its lazy exports",
    "ace_gym.feedback": "the package's own submodules, by the name table of its lazy exports",
    "ace_gym.lazy_exports": "the loaders themselves: they import the homes the modules above name",
}
"""Modules that import a module whose name is built at run time, and why each needs to."""

IMPORTING_CALLS: dict[str, int] = {
    "import_module": 0,
    "__import__": 0,
    "load_env_creator": 0,
    "lazy_exports": 1,
    "lazy_homes": 1,
    "moved_module": 1,
}
"""Calls that import a module they are given, and the position of its name."""


def _dynamic_imports(tree: ast.Module) -> list[int]:
    """Lines calling an :data:`IMPORTING_CALLS` function with a module name that is not written out
    (a string, or for ``lazy_homes`` a dict of strings; a shim's ``__moved_to__`` counts as written)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _called_name(node) not in IMPORTING_CALLS:
            continue
        position = IMPORTING_CALLS[str(_called_name(node))]
        arg = node.args[position] if len(node.args) > position else None
        if isinstance(arg, ast.Dict):
            constant = all(isinstance(value, ast.Constant) and isinstance(value.value, str) for value in arg.values)
        elif _called_name(node) == "moved_module" and _is_shim(tree):
            constant = True
        else:
            constant = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        if not constant:
            found.append(node.lineno)
    return found


def _edges(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """Every dependency of module ``name`` on another ace_gym module: each import statement,
    wherever it stands, and each string literal naming an ace_gym module, an attribute of one or an
    entry point in one (an ``importlib.import_module`` or ``lazy_exports`` argument, a Gymnasium
    entry point). A deprecated alias (a module of the shim shape, a table given to ``moved_names``)
    points to its new home on purpose and is no edge."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    if _is_shim(tree):
        return []
    exempt = {id(node) for table in _moved_tables(tree) for node in ast.walk(table)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: list[Edge] = []
    for node in ast.walk(tree):
        targets = [(target, "import") for target in _import_targets(node, package, modules)]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in exempt:
            named = _named_module(node.value, modules)
            if named:
                targets = [(named, repr(node.value))]
        edges.extend(
            Edge(name, target, path, getattr(node, "lineno", 0), how)
            for target, how in targets
            if target in modules and target != name
        )
    return edges


def _all_edges() -> tuple[dict[str, Path], list[Edge]]:
    modules = _modules()
    edges = {edge: None for name, path in modules.items() for edge in _edges(name, path, modules)}  # ordered, once each
    return modules, list(edges)


def _shims(modules: dict[str, Path]) -> dict[str, str]:
    """Deprecated module paths -> their new homes."""
    found = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if _is_shim(tree):
            for node in tree.body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                    if any(isinstance(t, ast.Name) and t.id == "__moved_to__" for t in node.targets):
                        found[name] = str(node.value.value)
    return found


def _packages_on_disk() -> set[str]:
    """Every package and top-level module of ace_gym (deprecated top-level aliases aside)."""
    shims = _shims(_modules())
    found = {"ace_gym"}
    for child in PACKAGE_ROOT.iterdir():
        if child.is_dir() and (child / "__init__.py").exists():
            found.add(child.name)
        elif child.suffix == ".py" and child.name != "__init__.py" and f"ace_gym.{child.stem}" not in shims:
            found.add(child.stem)
    return found


def _describe(edge: Edge) -> str:
    source, target = _package(edge.source), _package(edge.target)
    via = "" if edge.how == "import" else f" (string {edge.how})"
    return (
        f"{edge.where}: {edge.source} -> {edge.target}{via}: {source} [{_layer(source)}] -> {target} [{_layer(target)}]"
    )


def _layer_violations(edges: list[Edge]) -> list[Edge]:
    """Edges from a lower layer up, or between two packages of an independent layer."""
    found = []
    for edge in edges:
        source, target = _package(edge.source), _package(edge.target)
        if source == target:
            continue
        if LAYER_OF[target] > LAYER_OF[source]:
            found.append(edge)
        elif LAYER_OF[target] == LAYER_OF[source] and LAYERS[LAYER_OF[source]][0] in INDEPENDENT_LAYERS:
            found.append(edge)
    return found


def _package_graph(edges: list[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {package: set() for package in LAYER_OF}
    for edge in edges:
        source, target = _package(edge.source), _package(edge.target)
        if source != target:
            graph.setdefault(source, set()).add(target)
            graph.setdefault(target, set())
    return graph


ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _doc_layers(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The layer table of docs/architecture.md: rows ``| RANK NAME | `package`, ... |``, ranks in order."""
    rows = re.findall(r"^\| (\d+) (\w+) \| (.*) \|$", text, flags=re.M)
    assert [int(rank) for rank, _, _ in rows] == list(range(len(rows))), "layer ranks out of order"
    return tuple((name, tuple(re.findall(r"`([^`]+)`", cells))) for _, name, cells in rows)


def test_layers__the_architecture_doc_states_this_table() -> None:
    assert _doc_layers(ARCHITECTURE.read_text(encoding="utf-8")) == LAYERS


def test_layers__the_doc_table_reader_reads_ranks_names_and_packages() -> None:
    text = "| Layer | Packages |\n|---|---|\n| 0 foundation | `errors`, `atomic` |\n| 1 data | `domains` |\n"
    assert _doc_layers(text) == (("foundation", ("errors", "atomic")), ("data", ("domains",)))


def test_layers__every_package_has_a_layer_and_every_layer_entry_a_package() -> None:
    on_disk = _packages_on_disk()
    placed = set(LAYER_OF)
    assert len(LAYER_OF) == sum(len(packages) for _, packages in LAYERS), "a package is in two layers"
    assert not on_disk - placed, f"packages with no layer (add each to LAYERS): {sorted(on_disk - placed)}"
    assert not placed - on_disk, f"LAYERS names packages that do not exist: {sorted(placed - on_disk)}"


def test_layers__no_package_imports_a_higher_layer_or_another_benchmark() -> None:
    _, edges = _all_edges()
    found = [_describe(edge) for edge in _layer_violations(edges)]
    assert not found, "imports against the layers (LAYERS in tests/contracts/test_imports.py):\n" + "\n".join(
        sorted(found)
    )


def test_layers__the_package_graph_has_no_cycle() -> None:
    _, edges = _all_edges()
    graph = _package_graph(edges)
    first_edge: dict[tuple[str, str], Edge] = {}
    for edge in sorted(edges, key=lambda e: (e.where, e.target)):
        first_edge.setdefault((_package(edge.source), _package(edge.target)), edge)
    cycles = [
        " -> ".join(cycle) + "\n" + "\n".join(f"  {_describe(first_edge[pair])}" for pair in itertools.pairwise(cycle))
        for cycle in _cycles(graph)
    ]
    assert not cycles, "package import cycles:\n" + "\n".join(cycles)


def test_layers__no_module_imports_a_deprecated_alias() -> None:
    """A shim's package is not its home's, so importing one would hide an edge: import the home."""
    modules, edges = _all_edges()
    shims = _shims(modules)
    found = [
        f"{edge.where}: {edge.source} -> {edge.target}, moved to {shims[edge.target]}"
        for edge in edges
        if edge.target in shims
    ]
    assert not found, "imports of deprecated module paths:\n" + "\n".join(sorted(found))


def test_layers__edges_count_deferred_imports_strings_but_not_deprecated_aliases(tmp_path: Path) -> None:
    shim = '"""Moved."""\n' + "\n".join(SHIM_SHAPE).replace("ace_gym.new.home", "ace_gym.eval.loop") + "\n"
    sources = {
        "ace_gym.errors": "",
        "ace_gym.text": 'import importlib\ndef f():\n    return importlib.import_module("ace_gym.eval.loop")\n',
        "ace_gym.stats": 'ENTRY = "ace_gym.envs:AceEnv"\nNAME = "ace_gym.not_a_module:X"\n',
        "ace_gym.envs": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ace_gym.eval import loop\n",
        "ace_gym.eval": "",
        "ace_gym.eval.loop": 'from ace_gym.lazy_exports import moved_names\nMOVED = {"X": "ace_gym.envs"}\n'
        "__getattr__, __dir__ = moved_names(__name__, MOVED)\n",
        "ace_gym.lazy_exports": shim,
    }
    modules = {name: tmp_path / f"{name}.py" for name in sources}
    for name, text in sources.items():
        modules[name].write_text(text)
    edges = {name: {(e.target, e.how) for e in _edges(name, path, modules)} for name, path in modules.items()}
    assert edges == {
        "ace_gym.errors": set(),
        "ace_gym.text": {("ace_gym.eval.loop", "'ace_gym.eval.loop'")},
        "ace_gym.stats": {("ace_gym.envs", "'ace_gym.envs:AceEnv'")},
        "ace_gym.envs": {("ace_gym.eval.loop", "import")},
        "ace_gym.eval": set(),
        "ace_gym.eval.loop": {("ace_gym.lazy_exports", "import")},
        "ace_gym.lazy_exports": set(),
    }


def _edges_of(tmp_path: Path, source: str) -> set[tuple[str, str]]:
    """The edges of a fake module ``ace_gym.text`` with ``source``, among a few real module names."""
    modules = {name: tmp_path / f"{name}.py" for name in ("ace_gym.text", "ace_gym.eval", "ace_gym.eval.rollout")}
    for path in modules.values():
        path.write_text("")
    modules["ace_gym.text"].write_text(source)
    return {(edge.target, edge.how) for edge in _edges("ace_gym.text", modules["ace_gym.text"], modules)}


@pytest.mark.parametrize(
    "extra",
    [
        "import ace_gym.eval.rollout\n",  # an import after the shim's lines
        "def f():\n    from ace_gym.eval import rollout\n",  # a deferred one
        "from ace_gym.lazy_exports import moved_module as mm\n",  # any other statement
    ],
)
def test_layers__a_module_naming_a_new_home_is_a_shim_only_in_the_exact_shim_shape(tmp_path: Path, extra: str) -> None:
    shim = '"""Moved."""\n' + "\n".join(SHIM_SHAPE).replace("ace_gym.new.home", "ace_gym.eval.rollout") + "\n"
    assert _edges_of(tmp_path, shim) == set() and _is_shim(ast.parse(shim))
    assert not _is_shim(ast.parse(shim + extra)) and _edges_of(tmp_path, shim + extra)
    assert not _is_shim(ast.parse(shim.replace('"""Moved."""\n', "import ace_gym.eval.rollout\n")))


def test_layers__only_a_table_given_to_moved_names_is_exempt(tmp_path: Path) -> None:
    table = 'MOVED = {"X": "ace_gym.eval.rollout"}\n'
    alias = "from ace_gym.lazy_exports import moved_names\n__getattr__, __dir__ = moved_names(__name__, MOVED)\n"
    assert _edges_of(tmp_path, table) == {("ace_gym.eval.rollout", "'ace_gym.eval.rollout'")}
    assert _edges_of(tmp_path, table + alias) == set()
    other = 'OTHER = {"X": "ace_gym.eval.rollout"}\n'
    assert _edges_of(tmp_path, other + table + alias) == {("ace_gym.eval.rollout", "'ace_gym.eval.rollout'")}
    inline = 'from ace_gym.lazy_exports import moved_names\nh = moved_names(__name__, {"X": "ace_gym.eval.rollout"})\n'
    assert _edges_of(tmp_path, inline) == set()


def test_layers__a_dotted_name_of_an_attribute_is_an_edge_to_its_module(tmp_path: Path) -> None:
    assert _edges_of(tmp_path, 'NAME = "ace_gym.eval.rollout.EpisodeSpec"\n') == {
        ("ace_gym.eval.rollout", "'ace_gym.eval.rollout.EpisodeSpec'")
    }
    assert _edges_of(tmp_path, 'NAME = "ace_gym.eval.nothing.X"\n') == {("ace_gym.eval", "'ace_gym.eval.nothing.X'")}
    assert _edges_of(tmp_path, 'NAME = "ace_gym.nothing"\nTEXT = "see ace_gym.eval.rollout"\n') == set()


@pytest.mark.parametrize(
    "call",
    [
        'importlib.import_module(f"ace_gym.{part}")',
        'import_module("ace_gym." + part)',
        'importlib.import_module(".".join(["ace_gym", part]))',
        '__import__("ace_gym.%s" % part)',
        'load_env_creator(part + ":X")',
        "lazy_exports(__name__, part, ['X'])",
        "lazy_homes(__name__, {'X': part})",
        "moved_module(__name__, part)",
    ],
)
def test_layers__a_module_name_built_at_run_time_is_found(call: str) -> None:
    source = f'import importlib\npart = "eval"\ndef f():\n    return {call}\n'
    assert _dynamic_imports(ast.parse(source)) == [4]
    written = 'importlib.import_module("ace_gym.eval")\nlazy_homes(__name__, {"X": "ace_gym.eval"})\n'
    assert _dynamic_imports(ast.parse(written)) == []


def test_layers__only_the_allowed_modules_import_a_module_named_at_run_time() -> None:
    found = {}
    for name, path in _modules().items():
        lines = _dynamic_imports(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if lines:
            found[name] = lines
    unexpected = {name: lines for name, lines in found.items() if name not in DYNAMIC_IMPORTS_ALLOWED}
    assert not unexpected, f"module names built at run time hide edges (module: lines): {unexpected}"
    assert set(DYNAMIC_IMPORTS_ALLOWED) == set(found), "an allowed module no longer needs it: drop it"


def test_layers__every_module_naming_a_new_home_has_the_shim_shape() -> None:
    """A module that defines ``__moved_to__`` and does anything else is no alias the layers may skip."""
    odd = [
        name
        for name, path in _modules().items()
        if "\n__moved_to__ = " in (text := path.read_text(encoding="utf-8")) and not _is_shim(ast.parse(text))
    ]
    assert odd == []


def test_layers__a_violation_names_file_line_edge_and_both_layers() -> None:
    path = PACKAGE_ROOT / "text.py"
    edge = Edge("ace_gym.text", "ace_gym.planning.probes", PACKAGE_ROOT / "text.py", 7, "import")
    assert _layer_violations([edge]) == [edge]
    assert _describe(edge) == (
        "ace_gym/text.py:7: ace_gym.text -> ace_gym.planning.probes: text [foundation (0)] -> planning [benchmarks (6)]"
    )
    sideways = Edge("ace_gym.longbench.x", "ace_gym.planning", path, 1, "import")
    down = Edge("ace_gym.planning.x", "ace_gym.runs.loop", path, 1, "import")
    assert _layer_violations([sideways, down]) == [sideways]
