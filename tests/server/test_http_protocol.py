"""ace_gym.server.http_protocol against the uvicorn it extends: an upgrade of uvicorn that removes
what BoundedHttpProtocol uses, or changes the method it copies, fails here rather than in a
running server."""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap

import pytest

pytest.importorskip("uvicorn", reason="the serve extra installs fastapi, uvicorn, websockets and httpx")

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ace_gym.server import http_protocol
from ace_gym.server.http_protocol import BoundedHttpProtocol

UPGRADE_ADVICE = "port the change to ace_gym/server/http_protocol.py, then widen the uvicorn pin in pyproject.toml"

# SHA-256 of uvicorn's HttpToolsProtocol.data_received source (dedented), the same in 0.35 and
# 0.54: BoundedHttpProtocol.data_received is a copy of it with the head bounds added
COPIED_DATA_RECEIVED_SHA256 = "02c2572f1df559070eba7f206a3f7e251782f5af4aaae194fc1ffb67f24c3873"


def _class_tree(source: str, name: str) -> ast.ClassDef:
    return next(node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef) and node.name == name)


def _self_attributes(tree: ast.AST, context: type[ast.expr_context]) -> set[str]:
    """The X of every ``self.X`` that ``tree`` reads (ast.Load) or assigns (ast.Store)."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and isinstance(node.ctx, context)
    }


def missing_uvicorn_names(base: type = HttpToolsProtocol) -> list[str]:
    """What BoundedHttpProtocol uses of ``base`` (``self.X`` it does not define itself, and
    ``super().X``) that ``base`` neither has as a class attribute nor assigns to ``self``."""
    subclass = _class_tree(inspect.getsource(http_protocol), BoundedHttpProtocol.__name__)
    own = {node.name for node in subclass.body if isinstance(node, ast.FunctionDef)}
    own |= {
        target.id
        for node in subclass.body
        if isinstance(node, ast.AnnAssign | ast.Assign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    own |= _self_attributes(subclass, ast.Store)
    from_super = {
        node.attr
        for node in ast.walk(subclass)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "super"
    }
    used = (_self_attributes(subclass, ast.Load) - own) | from_super
    provided = set(dir(base)) | _self_attributes(_class_tree(inspect.getsource(base), base.__name__), ast.Store)
    return sorted(used - provided)


def test_uvicorn__has_every_name_the_bounded_protocol_uses() -> None:
    missing = missing_uvicorn_names()
    assert not missing, (
        f"uvicorn {uvicorn.__version__}'s HttpToolsProtocol lacks {', '.join(missing)}, which "
        f"BoundedHttpProtocol uses: {UPGRADE_ADVICE}"
    )


def test_uvicorn__the_check_reports_a_private_method_uvicorn_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "_should_upgrade" not in missing_uvicorn_names()
    monkeypatch.delattr(HttpToolsProtocol, "_should_upgrade")
    assert "_should_upgrade" in missing_uvicorn_names()


def test_uvicorn__data_received_is_the_one_the_bounded_protocol_copies() -> None:
    current = textwrap.dedent(inspect.getsource(HttpToolsProtocol.data_received))
    assert hashlib.sha256(current.encode()).hexdigest() == COPIED_DATA_RECEIVED_SHA256, (
        f"uvicorn {uvicorn.__version__} changed HttpToolsProtocol.data_received, which "
        f"BoundedHttpProtocol.data_received copies: {UPGRADE_ADVICE}; it now reads:\n{current}"
    )
