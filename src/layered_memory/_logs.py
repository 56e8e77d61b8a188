"""The package's loggers: what they log goes through secret redaction first.

A log line names paths and keys: a file the agent wrote or was refused, a rule file found on
disk, an import a memory file names, a thread id, a session key. Any of them may hold a token
(`refused write of /.agents/rules/ghp_....md`), and logs are kept, shipped and shared more
widely than memory. So every logger of the package is made by `get_logger`, whose filter runs
the formatted message (and a traceback's text) through `redact_text` before any handler sees
it: a line a future change adds is covered too. It runs only for records that are emitted
(nothing on a quiet run) and costs what `redact_text` costs on one line.
"""

from __future__ import annotations

import logging

from layered_memory.safety.redaction import redact_text

__all__ = ["get_logger"]


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message).text
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            # Formatters reuse `exc_text` when it is set: the traceback is formatted once, here.
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact_text(text).text
        return True


_FILTER = _Redacting()


def get_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` with secrets redacted from everything it logs."""
    logger = logging.getLogger(name)
    logger.addFilter(_FILTER)
    return logger
