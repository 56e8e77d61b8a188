"""Untrusted text made safe: secrets redacted before it is kept, memory defused before a prompt."""

__all__ = ["defuse", "redaction"]
