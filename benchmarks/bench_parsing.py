"""Parser time on pathological model output: every format, several adversarial shapes, 1 MB each.

    python benchmarks/bench_parsing.py [--size BYTES] [--repeats R]

One degenerate completion must never stall a batch, so every parser must run in linear time. For
each format (``parse_turn(text, format)``; ``auto`` runs every text shape through detection;
``think`` is the reasoning split alone; ``openai`` parses assistant messages whose ``tool_calls``
total the same size) and each adversarial shape (repeated openers, unclosed tags, deep brackets,
long digit runs, many candidate calls...), it measures in this process and this run:

* ``ms``: the best of R parses of the ``--size`` text (default 1 MB);
* ``x scan``: that time over the time of one regex scan for markup characters over the same
  text (a linear baseline measured alongside: what a single pass over the bytes costs);
* ``x scan, 1/4``: the same ratio for the text built at a quarter of the size. A linear parser
  keeps the ratio (up to noise and cache effects); a quadratic one shows it 4x larger at full size.

Target (issue 8): every shape of every format under 50 ms at 1 MB. The last table gives the worst
shape per format.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from typing import Any

from ace_gym.parsing import parse_turn, split_reasoning

TARGET_MS = 50.0
_MARKUP = re.compile(r"""[][{}()<>"']""")


def _fill(prefix: str, unit: str, suffix: str = "") -> Callable[[int], str]:
    """A builder of ``prefix + unit * k + suffix`` of exactly ``size`` characters."""

    def build(size: int) -> str:
        count = max(0, (size - len(prefix) - len(suffix)) // len(unit) + 1)
        body = (prefix + unit * count)[: size - len(suffix)]
        return body + suffix

    return build


TAGGED = [
    ("repeated <tool_call>", _fill("", "<tool_call>")),
    ("closers only", _fill("", "</tool_call>")),
    ("open and close, broken JSON", _fill("", "<tool_call>{</tool_call>")),
    ("unclosed tag, deep brackets", _fill("<tool_call>", "[")),
    ("unclosed string in a call", _fill('<tool_call>{"name": "a", "arguments": {"x": "', "y")),
    ("long digit run", _fill('<tool_call>{"name": "set_slot", "arguments": {"row": ', "1")),
    ("repeated call heads", _fill("<tool_call>", '{"name": "a", "arguments": ')),
    ("many calls", _fill("", '<tool_call>{"name": "done", "arguments": {}}</tool_call>')),
]
SHAPES: dict[str, list[tuple[str, Callable[[int], str]]]] = {
    "hermes": TAGGED,
    "qwen3_xml": [
        ("repeated <function=", _fill("<tool_call>", "<function=")),
        ("repeated <parameter=", _fill("<tool_call><function=a>", "<parameter=", "</function>")),
        ("repeated <parameter=x>", _fill("<tool_call><function=a>", "<parameter=x>", "</function>")),
        ("repeated <function=a>", _fill("<tool_call>", "<function=a>", "</function>")),
        ("deep brackets in a value", _fill("<tool_call><function=a><parameter=x>", "[", "</parameter></function>")),
        ("unclosed function, many values", _fill("<tool_call><function=a>", "<parameter=x>1</parameter>")),
        ("long name, no >", _fill("<tool_call><function=", "a")),
        ("many calls", _fill("", "<tool_call><function=done></function></tool_call>")),
        *TAGGED[:3],
    ],
    "json": [
        ("repeated {", _fill("", "{")),
        ("repeated [", _fill("", "[")),
        ("repeated [{", _fill("", "[{")),
        ("repeated call heads", _fill("", '{"name": "a", "arguments": ')),
        ("nested non-calls", _fill("", '{"y":[{"type":1},')),
        ("long list in a call", _fill('{"name":"a","arguments":{"k":[', "1,")),
        ("many empty objects", _fill("", "{}")),
        ("call head, then spaces", _fill('{"name": "x"', " ")),
        ("long digit run", _fill('{"name": "a", "arguments": {"row": ', "1")),
        ("unclosed string in a call", _fill('{"name": "a", "arguments": {"x": "', "y")),
        ("many calls", _fill("", '{"name": "done", "arguments": {}} ')),
    ],
    "llama3_json": [
        ("many python_tag calls", _fill("<|python_tag|>", '{"name": "a", "parameters": {}}; ')),
        ("repeated python_tag", _fill("", "<|python_tag|>{")),
    ],
    "mistral": [
        ("repeated [TOOL_CALLS]", _fill("", "[TOOL_CALLS]")),
        ("repeated [TOOL_CALLS][", _fill("", "[TOOL_CALLS][")),
        ("deep brackets", _fill("[TOOL_CALLS]", "[")),
        ("repeated name[ARGS]", _fill("", "[TOOL_CALLS]a[ARGS]")),
        ("long name", _fill("[TOOL_CALLS]", "a")),
        ("unclosed string in a call", _fill('[TOOL_CALLS][{"name": "a", "arguments": {"k": "', "x")),
        ("many calls", _fill("", '[TOOL_CALLS][{"name": "done", "arguments": {}}]')),
    ],
    "pythonic": [
        ("repeated [a(", _fill("", "[a(")),
        ("deep parentheses", _fill("[a(", "(")),
        ("repeated [", _fill("", "[")),
        ("long decimal literal", _fill("[a(x=", "1", ")]")),
        ("long hex literal", _fill("[a(x=0x", "f", ")]")),
        ("unterminated string", _fill("[a(x='", "y")),
        ("escaped quotes", _fill("[a(x='", "\\'")),
        ("long list argument", _fill("[a(x=[", "1,", "])]")),
        ("long name", _fill("[", "a")),
        ("many calls", _fill("", "[done()] ")),
        ("one list of many calls", _fill("[", "done(), ", "]")),
    ],
    "think": [
        ("repeated <think>", _fill("", "<think>")),
        ("repeated </think>", _fill("", "</think>")),
        ("empty blocks", _fill("", "<think></think>")),
        ("unterminated", _fill("<think>", "x")),
    ],
}
TEXT_FORMATS = ("hermes", "qwen3_xml", "json", "llama3_json", "mistral", "pythonic")


def _openai(builder: Callable[[int], str]) -> Callable[[int], dict[str, Any]]:
    def build(size: int) -> dict[str, Any]:
        call = {"id": "c", "type": "function", "function": {"name": "set_slot", "arguments": builder(size)}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}

    return build


def _many_tool_calls(size: int) -> dict[str, Any]:
    call = {"id": "c", "type": "function", "function": {"name": "done", "arguments": "{}"}}
    count = size // len(json.dumps(call))
    return {"role": "assistant", "content": "", "tool_calls": [call] * count}


OPENAI_SHAPES: list[tuple[str, Callable[[int], Any]]] = [
    ("arguments: deep brackets", _openai(_fill("", "["))),
    ("arguments: deep objects", _openai(_fill("", '{"a":'))),
    ("arguments: long digit run", _openai(_fill("", "1"))),
    ("many tool_calls", _many_tool_calls),
    ("content junk, no tool_calls", lambda size: {"role": "assistant", "content": _fill("", "[a(")(size)}),
]


def _best_ms(function: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best * 1e3


def _ratio_to_scan(parse: Callable[[Any], object], action: Any, repeats: int) -> tuple[float, float]:
    """(ms of ``parse(action)``, that time over a markup scan of the same text), measured back to back."""
    text = action if isinstance(action, str) else json.dumps(action)
    scan_ms = _best_ms(lambda: _MARKUP.findall(text), repeats)
    parse_ms = _best_ms(lambda: parse(action), repeats)
    return parse_ms, parse_ms / max(scan_ms, 1e-6)


def _cases() -> list[tuple[str, str, Callable[[int], Any], Callable[[Any], object]]]:
    """(format, shape, builder, parse) for every measured combination."""
    cases = []
    for tool_format in TEXT_FORMATS:
        for shape, build in SHAPES[tool_format]:
            cases.append((tool_format, shape, build, lambda text, f=tool_format: parse_turn(text, f)))
    for shape, build in SHAPES["think"]:
        cases.append(("think", shape, build, split_reasoning))
    for shape, build in OPENAI_SHAPES:
        cases.append(("openai", shape, build, lambda action: parse_turn(action, "openai")))
    seen = set()
    for tool_format in (*TEXT_FORMATS, "think"):
        for shape, build in SHAPES[tool_format]:
            if (label := f"{tool_format}: {shape}") not in seen:
                seen.add(label)
                cases.append(("auto", label, build, parse_turn))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20, help="characters per text (default 1 MiB)")
    parser.add_argument("--repeats", type=int, default=3, help="parses per shape (best one kept)")
    args = parser.parse_args()

    worst: dict[str, tuple[float, str, float, float]] = {}
    print(f"parse time per {args.size:,}-character text, best of {args.repeats}")
    header = f"{'ms':>8} {'x scan':>8} {'x scan, 1/4':>12}"
    print(f"{'format':<12} {'shape':<44} {header}  target < {TARGET_MS:g} ms")
    for tool_format, shape, build, parse in _cases():
        action, small = build(args.size), build(args.size // 4)
        parse_ms, ratio = _ratio_to_scan(parse, action, args.repeats)
        small_ratio = _ratio_to_scan(parse, small, args.repeats)[1]
        verdict = "ok" if parse_ms < TARGET_MS else "MISSED"
        print(f"{tool_format:<12} {shape:<44} {parse_ms:8.2f} {ratio:8.2f} {small_ratio:12.2f}  {verdict}")
        if parse_ms >= worst.get(tool_format, (-1.0, "", 0.0, 0.0))[0]:
            worst[tool_format] = (parse_ms, shape, ratio, small_ratio)

    print(f"\nworst shape per format ({args.size:,} characters)")
    print(f"{'format':<12} {header}  {'< 50 ms':<8} worst shape")
    for tool_format, (parse_ms, shape, ratio, small_ratio) in worst.items():
        verdict = "yes" if parse_ms < TARGET_MS else "NO"
        print(f"{tool_format:<12} {parse_ms:8.2f} {ratio:8.2f} {small_ratio:12.2f}  {verdict:<8} {shape}")


if __name__ == "__main__":
    main()
