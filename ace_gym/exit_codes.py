"""The exit codes of every ``ace-gym`` command, one definition for the dispatcher
(:mod:`ace_gym.cli`, which maps a command's errors to them) and the commands that return one
themselves (``ace-gym replay``). Imports nothing.

0 success; 1 ``ace-gym serve``'s server or one of its worker processes failed while starting; 2 a
bad argument, configuration or dataset, an output directory that holds another run, or a
``--host``/``--port`` that ``ace-gym serve`` cannot listen on; 3 the output directory or the port
is in use by another process; 4 the results could not be read or written (not a directory, no
permission, disk full, a FIFO or device where a file belongs); 5 the episode file holds malformed
lines; 6 ``ace-gym replay`` found an episode that did not replay identically (docs/replay.md); 7
the model could not be reached or loaded (an endpoint refusing the connection or the key, a wrong
URL or model name, a model path that does not load: no episode is stored for it, and re-running
the same command plays those episodes); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_SERVER_START = 1
EXIT_CONFIG = 2
EXIT_IN_USE = 3
EXIT_IO = 4
EXIT_MALFORMED = 5
EXIT_REPLAY_MISMATCH = 6
EXIT_ENGINE = 7
EXIT_INTERRUPTED = 130
EXIT_CODES_HELP = (
    "exit codes: 0 success; 1 (serve) the server or a worker failed while starting; 2 bad argument, "
    "configuration or dataset, an output directory holding another run, or (serve) a --host/--port "
    "it cannot listen on; 3 output directory or (serve) port in use by another process; 4 results "
    "could not be read or written (not a directory, no permission, disk full); 5 malformed lines in "
    "episodes.jsonl; 6 a replay differs from its record; 7 the model could not be reached or loaded "
    "(nothing stored for it: re-run to resume); 130 interrupted"
)
"""The exit codes as ``ace-gym --help`` lists them."""
