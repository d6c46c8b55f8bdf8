"""The one exception class posenc raises for requests it cannot honour as asked.

:class:`UsageError` is a ``ValueError`` (so ``except ValueError`` keeps working) that marks an
error as the caller's to fix — a bad argument, flag, file or setting, named in the message
with the value received and what is allowed. The command line prints such errors as one
line with exit status 2; any other exception is a bug and keeps its traceback.
:class:`UsageTypeError` is the same for arguments of the wrong type (also a ``TypeError``).
"""

from __future__ import annotations


class UsageError(ValueError):
    """A request posenc cannot honour as asked; the message names the parameter, the value and what is allowed."""


class UsageTypeError(UsageError, TypeError):
    """A :class:`UsageError` about an argument of the wrong type (also a ``TypeError``)."""
