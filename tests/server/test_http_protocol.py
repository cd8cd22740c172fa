"""ace_gym.server.http_protocol stands in front of uvicorn's HTTP protocol through public
interfaces only (``asyncio.Protocol`` and how uvicorn builds a protocol class), so that no
uvicorn release is excluded: the bounds themselves are tested end to end in test_app.py."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="the serve extra installs fastapi, uvicorn, websockets and httpx")

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ace_gym.server import http_protocol
from ace_gym.server.http_protocol import BoundedHttpProtocol

ROOT = Path(__file__).resolve().parents[2]


def test_bounded_protocol__wraps_uvicorns_protocol_rather_than_extending_its_private_code() -> None:
    assert not issubclass(BoundedHttpProtocol, HttpToolsProtocol)
    tree = ast.parse(inspect.getsource(http_protocol))
    inner_calls = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "_inner"
    }
    assert inner_calls <= {name for name in dir(__import__("asyncio").Protocol) if not name.startswith("_")}
    assert inner_calls >= {"connection_made", "data_received", "connection_lost"}


def test_pyproject__does_not_cap_uvicorn() -> None:
    pins = re.findall(r'"uvicorn(?:\[standard\])?([^"]*)"', (ROOT / "pyproject.toml").read_text())
    assert pins and all("<" not in pin for pin in pins), pins


def test_configured__a_subclass_with_the_limits_uvicorn_builds_with_its_arguments() -> None:
    bounded = BoundedHttpProtocol.configured(1024, 8, 2.5)
    assert issubclass(bounded, BoundedHttpProtocol)
    assert (bounded.max_header_bytes, bounded.max_headers, bounded.request_timeout_s) == (1024, 8, 2.5)
    assert (BoundedHttpProtocol.max_header_bytes, BoundedHttpProtocol.max_headers) == (64 << 10, 100)
    parameters = inspect.signature(bounded).parameters
    assert [p.kind for p in parameters.values()] == [inspect.Parameter.VAR_KEYWORD]  # what uvicorn passes, as given
