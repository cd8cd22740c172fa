"""Text that can leave ace-gym: every string an env or wrapper emits encodes as UTF-8."""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so that it encodes as UTF-8.

    A model can spell a lone surrogate as a JSON or Python escape (``"\\ud800"``); passed on raw
    it would make an observation unencodable for a tokenizer and a record unwritable as UTF-8.
    """
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)
