"""Small text helpers shared by every writer of one-line text (feed, alarms, AI answers)."""

from __future__ import annotations


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, cut on a word boundary when one is near, with ``…``."""
    if len(text) <= limit:
        return text
    head = text[: max(1, limit - 1)]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:-") + "…"
