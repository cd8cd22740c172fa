#!/usr/bin/env bash
# Install the CPU build of torch VERSION: `bash scripts/install_cpu_torch.sh 2.13.0`.
# On Linux, PyPI's `torch` is the CUDA build (several GB with its nvidia packages), so the CPU
# build comes from PyTorch's own CPU wheel index, asked for by its local version VERSION+cpu (which
# PyPI never has, so an unreachable index cannot silently give the CUDA build). Where that fails
# (the index cannot be reached, or has no +cpu wheel for this platform, e.g. macOS, whose PyPI
# wheels are CPU builds) it falls back to the plain `torch==VERSION` from pip's own configuration.
# Exits non-zero, saying why, when neither installs or when the torch installed is not a CPU build.
set -euo pipefail
version="${1:?usage: install_cpu_torch.sh VERSION}"
cpu_index="https://download.pytorch.org/whl/cpu"
if ! python -m pip install --index-url "$cpu_index" --extra-index-url https://pypi.org/simple \
    --timeout 15 --retries 1 "torch==$version+cpu"; then
    echo "install_cpu_torch.sh: torch==$version+cpu did not install from $cpu_index;" \
        "falling back to torch==$version from pip's configured sources" >&2
    if ! python -m pip install "torch==$version"; then
        echo "install_cpu_torch.sh: torch==$version did not install either (see pip's messages above)" >&2
        exit 1
    fi
fi
if ! python -c "import sys, torch; sys.exit(torch.version.cuda is not None)"; then
    echo "install_cpu_torch.sh: the torch installed is a CUDA build, not the CPU build; install torch==$version" \
        "from $cpu_index by hand (pip install --index-url $cpu_index torch==$version+cpu)" >&2
    exit 1
fi
