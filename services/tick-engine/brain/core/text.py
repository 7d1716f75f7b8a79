"""Untrusted text made safe: the one ``clean_text`` for every writer of one-line text.

Feed rows, alarm files, AI answers and agent notes all take text from outside the vault
(session logs, stream events, LLM answers). :func:`clean_text` is the one definition of
what such text may be once it is written into a note:

* one line: line breaks, tabs and every other whitespace run become one space;
* printable: lone surrogates become U+FFFD, ANSI escapes go, control and format characters
  (``\\x00``, ``\\x1b``, U+2028, U+202E ...) become spaces;
* no marker syntax: ``<!--`` and ``-->`` are removed (repeatedly, so pieces cannot rejoin);
* redacted (SPEC §10), after the markers are gone (a removed ``<!--`` cannot hide a secret);
* at most ``max_chars`` characters, cut on a word boundary with ``…``; megabyte inputs are
  bounded before any of this runs.

:func:`clean_block` is the same for a block of lines (an agent's inbox note): line breaks and
tabs stay, every other rule holds.
"""

from __future__ import annotations

import errno
import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, cut on a word boundary when one is near, with ``…``."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"[:limit]
    head = text[: max(1, limit - 1)]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:-") + "…"


def cut_path(path: str, limit: int) -> str:
    """``path`` in at most ``limit`` characters with its file name whole: the folders in the
    middle give way (``S:/01_Repos/…/Status/Timeline.cshtml``), then the root; a name longer
    than the limit keeps its end (``…ine.cshtml``). Cutting the end, as :func:`cut` does, loses
    the one part a reader (or a search) recognises."""
    if len(path) <= limit:
        return path
    if limit <= 1:
        return "…"[:limit]
    sep = "\\" if "\\" in path and "/" not in path else "/"
    parts = path.split(sep)
    name = parts[-1]
    if len(parts) < 2 or len(name) + 2 > limit:
        return "…" + path[len(path) - (limit - 1):]
    tail = [name]
    for folder in reversed(parts[1:-1]):
        if len(parts[0]) + len(sep.join([folder, *tail])) + 2 * len(sep) + 1 > limit:
            break
        tail.insert(0, folder)
    short = f"{parts[0]}{sep}…{sep}{sep.join(tail)}"
    return short if len(short) <= limit else f"…{sep}{sep.join(tail)}"[-limit:]


def repair_surrogates(text: str) -> str:
    """``text`` safe to encode as UTF-8: lone surrogates (from JSON ``\\ud83d`` escapes) become U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def strip_marker_syntax(text: str) -> str:
    """``text`` without ``<!--`` / ``-->`` (repeated until none is left, so pieces cannot rejoin)."""
    while "<!--" in text or "-->" in text:
        text = text.replace("<!--", "").replace("-->", "")
    return text


def strip_ansi(text: str) -> str:
    """``text`` without terminal escapes (colours, cursor moves, titles)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def printable(text: str, keep: str = "") -> str:
    """``text`` with lone surrogates as U+FFFD, ANSI escapes removed, and every control,
    separator, format or unassigned character but those in ``keep`` a space."""
    text = strip_ansi(repair_surrogates(text))
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else " " for ch in text)


def clean_text(text: str, max_chars: int) -> str:
    """Untrusted ``text`` as one safe line of at most ``max_chars`` characters (see the module docstring)."""
    from brain.core.redaction import redact  # redaction imports this module's helpers

    single = " ".join(strip_marker_syntax(printable(text[: max(64, max_chars * 4)])).split())
    safe = " ".join(strip_marker_syntax(redact(single)).split())
    return cut(safe, max(1, max_chars))


def clean_block(text: str, max_chars: int) -> str:
    """Untrusted ``text`` as a safe block of lines (an agent's note): :func:`clean_text`'s rules,
    except that line breaks (``\\r\\n`` and ``\\r`` as ``\\n``) and tabs stay."""
    from brain.core.redaction import redact

    lines = printable(text[: max(64, max_chars * 4)].replace("\r\n", "\n").replace("\r", "\n"), keep="\n\t")
    safe = strip_marker_syntax(redact(strip_marker_syntax(lines))).strip()
    return cut(safe, max(1, max_chars))


#: Error class names, errno names, Node's and pnpm's error codes and compiler codes
#: (``AssertionError``, ``ECONNREFUSED``, ``ERR_PNPM_NO_SCRIPT``, ``TS2345``).
ERROR_NAME = re.compile(
    r"\b(?:[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Failure|Fault)|E[A-Z]{3,}[A-Z0-9]*"
    r"|ERR_[A-Z0-9]+(?:_[A-Z0-9]+)+|TS\d{4}|E\d{4})\b"
)


#: ``E`` + capitals is an errno name only when the system knows it (``ERROR``, ``EXPECTED`` are words).
_ERRNO_NAMES = frozenset(errno.errorcode.values())


#: What the machine lacks, named in the shells' and Python's own words: a program (bash's
#: ``gh: command not found``, zsh's ``command not found: gh``) or a module (``No module named 'yaml'``).
#: The next session on the machine meets it again; its class (``ModuleNotFoundError``) does not say which.
_MISSING = re.compile(r"([\w.+-]{1,50}): command not found(?!:)|command not found: ([\w.+-]{1,50})"
                      r"|No module named ['\"]?([\w.]{1,60})")


def error_names(text: str) -> list[str]:
    """The error names ``text`` mentions, in order (repeats kept: callers count them): classes,
    errno names and codes (:data:`ERROR_NAME`), and a missing program or module
    (``command not found: gh``, ``No module named yaml``)."""
    found = [(match.start(), match.group()) for match in ERROR_NAME.finditer(text)
             if not ((name := match.group())[0] == "E" and name.isupper() and name.isalpha()) or name in _ERRNO_NAMES]
    if "not found" in text or "No module" in text:
        for match in _MISSING.finditer(text):
            program = match.group(1) or match.group(2)
            found.append((match.start(), f"command not found: {program}" if program
                          else f"No module named {match.group(3).rstrip('.')}"))
        found.sort(key=lambda pair: pair[0])
    return [name for _, name in found]
