"""The ace-gym version (``ace_gym.__version__``), kept in the foundation layer so that a record
written by any layer can name it without importing the root package."""

__version__ = "0.1.0"
