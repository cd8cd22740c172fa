"""Bridges to training frameworks; each module imports its framework, so import the module you use
(``ace_gym.integrations.trainer_callback`` needs the ``hf`` extra)."""
