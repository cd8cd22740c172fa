"""The tiny model's tokenizer options: an extra corpus, merges across words, a bounded token length,
digits as tokens of their own, whole tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ace_gym.agents.llm.tiny_model import build_tiny_model  # noqa: E402

PHRASE = "Each `null` value is a missing slot that still needs a valid item id."


def _tokenizer(path: Path, **options: object) -> object:
    build_tiny_model(path, vocab_size=1024, hidden_size=64, num_layers=1, **options)  # type: ignore[arg-type]
    return transformers.AutoTokenizer.from_pretrained(path)


def test_build_tiny_model__merges_across_words_within_the_token_length_and_decodes_exactly(tmp_path: Path) -> None:
    words = _tokenizer(tmp_path / "words", corpus=[PHRASE] * 50)
    across = _tokenizer(tmp_path / "across", corpus=[PHRASE] * 50, split_words=False)
    bounded = _tokenizer(tmp_path / "bounded", corpus=[PHRASE] * 50, split_words=False, max_token_length=8)
    for tokenizer in (words, across, bounded):
        assert tokenizer.decode(tokenizer.encode(PHRASE)) == PHRASE  # byte-level: any text round-trips
    assert len(across.encode(PHRASE)) < 5 < len(words.encode(PHRASE))  # word-split BPE needs a token per word
    pieces = bounded.convert_ids_to_tokens(bounded.encode(PHRASE))
    assert (
        max(len(piece) for piece in pieces)
        <= 8
        < max(len(p) for p in across.convert_ids_to_tokens(across.encode(PHRASE)))
    )


def test_build_tiny_model__split_digits_makes_each_digit_a_token_wherever_the_number_stands(tmp_path: Path) -> None:
    text = '{"row": 0, "col": 2, "id": "C715"} {"matches":{"C715":2}}'
    merged = _tokenizer(tmp_path / "merged", corpus=[text] * 50, split_words=False)
    digits = _tokenizer(tmp_path / "digits", corpus=[text] * 50, split_words=False, split_digits=True)
    assert digits.decode(digits.encode(text)) == text
    pieces = digits.convert_ids_to_tokens(digits.encode(text))
    numbered = [piece for piece in pieces if any(c.isdigit() for c in piece)]
    assert numbered == ["0", "2", "7", "1", "5", "7", "1", "5", "2"]  # each digit alone, the id twice alike
    assert any(
        len([c for c in piece if c.isdigit()]) > 1 or (any(c.isdigit() for c in piece) and len(piece) > 1)
        for piece in merged.convert_ids_to_tokens(merged.encode(text))
    )  # without the option, merges take digits into longer tokens


def test_build_tiny_model__whole_tokens_are_one_token_each_wherever_they_stand(tmp_path: Path) -> None:
    text = '{"row": 0, "col": 2, "id": "C715"} {"matches":{"C715":2,"C859":4}} C1234'
    tokenizer = _tokenizer(tmp_path / "ids", split_words=False, split_digits=True, whole_tokens=["C715", "C859"])
    assert tokenizer.decode(tokenizer.encode(text)) == text
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.encode(text))
    assert pieces.count("C715") == 2 and pieces.count("C859") == 1
    numbered = [piece for piece in pieces if any(c.isdigit() for c in piece) and piece not in ("C715", "C859")]
    assert numbered == ["0", "2", "2", "4", "1", "2", "3", "4"]  # other numbers still digit by digit
