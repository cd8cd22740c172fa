"""ace-gym envs over the network: the OpenEnv-protocol server (``ace-gym serve``,
:mod:`ace_gym.server.app`) and its Gymnasium client (:class:`ace_gym.server.client.RemoteEnv`).

The server needs the ``serve`` extra (FastAPI, uvicorn, websockets); the protocol is described in
``docs/server.md``.
"""
