"""What every benchmark's runs share, below the benchmarks and the commands: the one rollout loop
(:mod:`~ace_gym.runs.loop`), the crash-safe result files (:mod:`~ace_gym.runs.results`) and token
counting (:mod:`~ace_gym.runs.tokens`). Nothing here names a benchmark."""
