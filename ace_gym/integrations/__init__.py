"""Bridges to training frameworks; each module imports its framework, so import the module you use:
``trl`` (TRL's ``environment_factory`` and ``rollout_func``), ``skyrl``, ``openrlhf`` (an
``agent_func`` file), ``verl`` (an agent loop), ``verifiers`` (a ``verifiers.v1`` taskset/env/harness, the
``ace_gym_verifiers`` plugin), ``trainer_callback`` (validation during any
``transformers.Trainer`` run; the ``hf`` extra) and ``openenv`` (an openenv-core ``Environment``
for openenv-core's own ``create_app``)."""
