"""Deterministic lessons and decisions mined from one session log (issue 11 item 2). Pure.

No model is asked; three patterns are recognised, each with its provenance
``<first 8 characters of the session id>:<line in the log file>``:

- **error, then fix** (``lesson``): a tool call failed with an error signature, and a later
  call of the same command (or the same tool on the same file) succeeded after files were
  edited or other commands ran in between. The lesson names the command, the error and what
  changed; its source is the line of the failing call.
- **operator correction** (``decision``): a human prompt that corrects the agent: it opens
  with "no", "nope", "wrong", "stop", "wait,", "don't", "do not", "never", "always",
  "actually", "I don't think", "you/we should(n't)", or says "use X instead" / "which is less
  work"; or a tool call the operator rejected with a reason, or stopped with a line of their
  own ("wait, copy the favicon too first"). The decision is the opening (up to two sentences)
  of what the operator wrote.
- **reverted change** (``lesson``): an edit that exactly undoes an earlier edit of the same
  file, or a ``git checkout -- …`` / ``git restore …`` / ``git revert`` / ``git reset --hard``.

Every text is redacted, one line, cut to 240 characters, and marker-safe: it can never open
or close an HTML comment.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from brain.core.markers import code_closed
from brain.core.redaction import redact
from brain.core.session import MAX_LESSONS, Lesson
from brain.core.text import printable

LESSON_CHARS = 240

_CORRECTION_START = re.compile(
    r"^\s*(?:no\b[,.!:]?|nope\b|wrong\b|stop\b|don'?t\b|do not\b|never\b|always\b|actually\b[,]?|wait\b[,.!]"
    r"|please (?:don'?t|do not|never|always)\b|that'?s (?:not|wrong)\b|not like that\b|i don'?t think\b"
    r"|(?:you|we) (?:should(?:n'?t)?|must(?:n'?t)?|can'?t|cannot)\b)",
    re.IGNORECASE,
)
_INSTEAD = re.compile(
    r"\b(?:use|try|prefer|call|run)\s+\S.{0,80}?\binstead\b|\b(?:which|that) is (?:less work|simpler|easier|cleaner)\b",
    re.IGNORECASE,
)
#: A rejected tool call that carries the operator's reason (Claude Code writes it into the result).
_REJECTION = re.compile(r"(?:reason for the rejection:|the user said:)\s*(.+)", re.IGNORECASE | re.DOTALL)
_REVERT_COMMAND = re.compile(
    r"\bgit\s+(?:checkout\s+(?:HEAD\s+)?--\s+\S+|restore\s+(?!--staged)\S+|revert\b|reset\s+--hard\b)"
)
#: A line that only instruments the code while debugging (a print, a log call, a breakpoint): an
#: edit that added nothing else (but comments) and was taken out again is the debugging's
#: scaffolding, not a change that did not hold.
_INSTRUMENT = re.compile(
    r"\s*(?:console\.(?:log|debug|info|warn|error|trace|dir|table)\s*\(|print(?:ln|f)?!?\s*\(|debugger\b"
    r"|(?:dd|dump|var_dump|print_r|error_log|breakpoint|IO\.inspect|dbg!)\s*\(|(?:logger|log|logging)\.debug\s*\("
    r"|System\.out\.print|fmt\.Print|import\s+i?pdb|i?pdb\.set_trace|Log\.d\s*\()"
)
#: A comment line (not a ``#!`` line).
_COMMENT = re.compile(r"(?://|#|--|/\*|\*)(?!!)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def safe_text(text: str, limit: int = LESSON_CHARS) -> str:
    """One redacted line that can never open or close a marker or comment."""
    line = " ".join(redact(printable(text[: limit * 4])).split())  # no terminal colours, no control characters
    line = line.replace("<!--", "&lt;!--").replace("-->", "--&gt;")
    if len(line) > limit:
        cut = line[:limit]
        space = cut.rfind(" ", limit - 60)
        line = (cut[:space] if space > 0 else cut).rstrip(" ,.;:") + "…"
    return code_closed(line)  # a cut inside a code span must not hide the next block's marker


def _opening(text: str) -> str:
    """The prompt's opening, up to two sentences: what the operator asked for."""
    parts = [p for p in _SENTENCE_END.split(text.strip(), maxsplit=2) if p.strip()][:2]
    return " ".join(parts) if parts else text.strip()


def _changed_line(before: str, after: str) -> str:
    """The first line of ``before`` that ``after`` does not have, shortened: what the edit touched."""
    kept = set(after.splitlines())
    for raw in before.splitlines():
        line = raw.strip()
        if line and raw not in kept:
            return line.replace("`", "'")[:60]
    return ""


def _only_scaffolding(before: str, after: str) -> bool:
    """True when the lines ``before`` has and ``after`` lacks are debugging instrumentation
    (:data:`_INSTRUMENT`) and comments, at least one of them a print, log call or breakpoint."""
    kept = set(after.splitlines())
    added = [raw.strip() for raw in before.splitlines() if raw.strip() and raw not in kept]
    instruments = [bool(_INSTRUMENT.match(line)) for line in added]
    return any(instruments) and all(found or _COMMENT.match(line) for found, line in zip(instruments, added, strict=True))


def is_correction(text: str) -> bool:
    """True when a human prompt corrects the agent (see the module doc)."""
    head = text.strip()[:600]
    if not head or len(head.split()) < 3:
        return False
    return bool(_CORRECTION_START.match(head) or _INSTEAD.search(head))


@dataclass
class _Pending:
    line: int
    display: str
    signature: str
    edits_before: int
    commands_before: int


@dataclass
class LessonMiner:
    session_key: str
    _lessons: list[Lesson] = field(default_factory=list)
    _edits: list[tuple[int, str]] = field(default_factory=list)  # (line, file)
    _edit_keys: dict[str, int] = field(default_factory=dict)  # hash(file, old, new) -> line
    _commands: list[tuple[int, str]] = field(default_factory=list)  # (line, first line of the command)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _fixed: set[str] = field(default_factory=set)
    _day: str = ""

    def _add(self, kind: str, text: str, line: int, day: str = "") -> None:
        if len(self._lessons) >= MAX_LESSONS:
            return
        source = f"{self.session_key}:{line}"
        if any(lesson.source == source and lesson.kind == kind for lesson in self._lessons):
            return
        self._lessons.append(Lesson(kind, safe_text(text), source, day or self._day))

    @staticmethod
    def _key(path: str, old: str, new: str) -> str:
        return hashlib.sha1(f"{path}\0{old}\0{new}".encode("utf-8", "replace"), usedforsecurity=False).hexdigest()

    def edit(self, line: int, path: str, old: str, new: str) -> None:
        self._edits.append((line, path))
        if not old or not new or old == new:
            return
        earlier = self._edit_keys.get(self._key(path, new, old))
        if earlier is not None and not _only_scaffolding(old, new):
            # This edit turns ``old`` back into ``new``: the earlier change had introduced ``old``.
            introduced, removed = _changed_line(old, new), _changed_line(new, old)
            what = (f" (`{removed}` → `{introduced}`)" if introduced and removed
                    else f" (adding `{introduced}`)" if introduced
                    else f" (removing `{removed}`)" if removed else "")
            self._add("lesson", f"The change to `{path}` made at line {earlier} was reverted{what}: it did not "
                      "hold.", line)
        self._edit_keys.setdefault(self._key(path, old, new), line)

    def shell(self, line: int, command: str) -> None:
        first = command.strip().split("\n", 1)[0]
        self._commands.append((line, first))
        match = _REVERT_COMMAND.search(command[:2000])
        if match:
            self._add("lesson", f"A change was reverted with `{match.group(0)[:120]}`.", line)

    def failure(self, line: int, key: str, display: str, signature: str) -> None:
        if key and key not in self._pending and key not in self._fixed:
            self._pending[key] = _Pending(line, display, signature, len(self._edits), len(self._commands))

    def success(self, line: int, key: str) -> None:
        pending = self._pending.pop(key, None)
        if pending is None:
            return
        self._fixed.add(key)
        files = list(dict.fromkeys(path for at, path in self._edits[pending.edits_before:]
                                   if at < line and not path.startswith(("/", "~"))))
        commands = [cmd for at, cmd in self._commands[pending.commands_before:] if pending.line < at < line
                    and cmd.strip() and cmd.strip() != pending.display]
        if files:
            shown = ", ".join(f"`{f}`" for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            fix = f"fixed by editing {shown}"
        elif commands:
            fix = f"fixed by running `{commands[-1][:80]}`"
        else:
            return  # the same call passed again with nothing changed: a flake, not a lesson
        self._add("lesson", f"`{pending.display}` failed with {pending.signature[:120]}; {fix}, then it passed.",
                  pending.line)

    def prompt(self, line: int, text: str, day: str = "") -> None:
        if day:
            self._day = day
        if is_correction(text):
            self._add("decision", _opening(text), line, day)

    def feedback(self, line: int, text: str) -> None:
        """What the operator answered when they stopped a command: a decision, word for word."""
        self._add("decision", _opening(text), line)

    def rejection(self, line: int, output: str) -> None:
        """A tool call the operator rejected with a reason: the reason is a decision."""
        match = _REJECTION.search(output[:4000])
        if match and len(match.group(1).split()) >= 3:
            self._add("decision", _opening(match.group(1)), line)

    def lessons(self) -> tuple[Lesson, ...]:
        """The lessons in log order; one mined before any dated prompt takes the session's date."""
        return tuple(lesson if lesson.date else Lesson(lesson.kind, lesson.text, lesson.source, self._day)
                     for lesson in self._lessons)
