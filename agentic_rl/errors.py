"""`UserError`: a mistake the user can fix — a recipe's key or value, a file, a flag. The command line
prints it as one line and exits 2 (`cli.py`); any other exception is a bug or a machine's fault and
keeps its traceback (exit 1)."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user gave: the message says what is wrong and where."""


class ConfigError(UserError, ValueError):
    """A recipe's key or value is wrong (the config loader's and the checks' errors;
    `agentic_rl.trainer.config` re-exports it)."""


class UserFileError(UserError, FileNotFoundError):
    """A file or directory the user named does not exist."""


class UserDataError(UserError, ValueError):
    """A file the user gave holds something that cannot be read as what it should be (its path and line)."""


class UnknownName(UserError, KeyError):
    """A name looked up in a registry (an env, a format, an estimator...) that is not there; the message
    lists the known names."""

    def __str__(self) -> str:  # KeyError's own str() quotes the message
        return str(self.args[0]) if self.args else ""
