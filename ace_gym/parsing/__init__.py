"""Reading tool calls out of LLM output, in every common format, without ever raising.

``parse_turn(action, tool_format="auto")`` takes model text or an OpenAI-style assistant
message and returns a :class:`ParsedTurn` (calls, prose, reasoning, errors, format). Formats:
``hermes`` (Hermes / Qwen2.5 ``<tool_call>{json}</tool_call>``), ``qwen3_xml`` (Qwen3-Coder /
Qwen3.5 ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>``),
``llama3_json`` (``{"name": ..., "parameters": ...}``), ``json`` (a bare call object or list),
``mistral`` (``[TOOL_CALLS][...]``), ``pythonic`` (``[set_slot(row=1, col=2, id="C1")]``) and
``openai`` (native ``tool_calls``). Any text is read in linear time (``benchmarks/bench_parsing.py``
measures it); limits on garbage are reported in ``errors``.
"""

from ace_gym.parsing.calls import ParsedCall
from ace_gym.parsing.reasoning import split_reasoning
from ace_gym.parsing.turn import FORMAT_EXAMPLES, TOOL_FORMATS, ParsedTurn, parse_text, parse_turn

__all__ = ["FORMAT_EXAMPLES", "TOOL_FORMATS", "ParsedCall", "ParsedTurn", "parse_text", "parse_turn", "split_reasoning"]
