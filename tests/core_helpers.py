"""Small helpers shared by the core tests: build an env on a bundled instance and call tools; leave
the temporary file of a killed atomic writer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ace_gym.envs import AceEnv
from ace_gym.instance import CompiledInstance
from ace_gym.tools import ToolKey, tool_name

H1_INDEX = 0  # H=1, B=0 in every published 5x5 file
H15_INDEX = 34  # H=15, B=19
INVALID = "Invalid tool arguments, "


def make_env(domain: str, index: int = H1_INDEX, **config: Any) -> AceEnv:
    """An env of ``domain`` reset onto bundled instance ``index``."""
    env = AceEnv(domain, **config)
    env.reset(options={"instance_index": index})
    return env


def call(env: AceEnv, name: str, **arguments: Any) -> dict[str, Any]:
    """Step one tool call and return the decoded envelope (checking it is serialised like json.dumps)."""
    observation = env.step({"name": name, "arguments": arguments})[0]
    envelope = json.loads(observation)
    assert observation == json.dumps(envelope, ensure_ascii=False), observation
    return envelope


def failed_with(envelope: dict[str, Any], detail: str) -> bool:
    """Whether ``envelope`` is the failure ``Invalid tool arguments, <detail>``."""
    return envelope == {"status": "failed", "messages": INVALID + detail, "data": {}}


def tool(env: AceEnv, key: ToolKey) -> str:
    """The name of tool ``key`` in the env's domain."""
    return tool_name(key, env.domain)


def fill_with_truth(env: AceEnv) -> None:
    """Set every hidden cell to its truth id through the public tool."""
    compiled = env.compiled
    for slot in compiled.slots:
        item_id = compiled.item_ids[int(compiled.truth[slot.cell])]
        assert call(env, "set_slot", row=slot.row, col=slot.col, id=item_id)["status"] == "success"


def truth_id(compiled: CompiledInstance, slot_index: int) -> str:
    return compiled.item_ids[int(compiled.truth[compiled.slots[slot_index].cell])]


def visible_cell(compiled: CompiledInstance) -> tuple[int, int]:
    """The first visible (non-hidden) cell, row-major."""
    cell = next(c for c in range(compiled.n_cells) if compiled.cell_slot_list[c] < 0)
    return divmod(cell, compiled.cols)


def nested_list(depth: int = 100_000) -> list[Any]:
    """``[[[...]]]`` nested ``depth`` deep; by default deeper than json, repr and pickle can go."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int = 100_000) -> dict[str, Any]:
    """``{"a": {"a": ...}}`` nested ``depth`` deep; by default deeper than json, repr and pickle can go."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def killed_writer(path: Path) -> Path:
    """The temporary file an AtomicFile writer of ``path`` leaves when it is killed with SIGKILL
    while writing (a subprocess, killed once it says it has written)."""
    script = (
        "import sys, time\n"
        "from ace_gym.atomic import AtomicFile\n"
        "target = AtomicFile(sys.argv[1])\n"
        "target.handle.write(b'half a file')\n"
        "target.handle.flush()\n"
        "print(target._temporary, flush=True)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        temporary = Path(process.stdout.readline().strip())  # type: ignore[union-attr]
    finally:
        process.kill()
        process.wait(timeout=60)
    assert temporary.parent == path.parent and temporary.exists()
    return temporary
