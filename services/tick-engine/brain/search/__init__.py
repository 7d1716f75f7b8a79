"""Recall: the full-text index over the vault, ``brain search`` and prompt-time recall (SPEC §15)."""
