"""AgentLongBench as environments: long simulated agent histories with exact ground truth.

``gym.make("ALB-QA-v0", ...)`` asks one of the paper's eight question types about a generated
history (:mod:`ace_gym.longbench.qa_env`); ``gym.make("ALB-Puzzle-v0", ...)`` plays the guessing
game itself (:mod:`ace_gym.longbench.puzzle_env`). Modules, in the order data flows: ``tables``
(item tables, knowledge-free mask), ``engine`` (game rules), ``simulator`` (the investigator),
``render`` and ``trajectory`` (chat messages, token budget), ``questions`` and ``samples``,
``scoring`` (official parsing and metrics), ``official`` (export and loader of the official
JSONL layout), ``rollout`` and ``report`` (evaluation with chat engines). See
``docs/longbench.md``. Importing ``ace_gym`` does not import this package.
"""
