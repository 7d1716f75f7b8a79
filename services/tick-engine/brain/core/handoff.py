"""What a session that just ended leaves for the next session in its project, before a tick
has folded it into the vault (docs/hooks.md, "A session that just ended").

The extraction runs every few minutes, so a session started right after the last one ended
(``/clear``, a new terminal, the next task) would otherwise get a feed without the work just
done. ``brain hook session-end`` renders these lines once, when the session ends (the hook
that has time to read a transcript), and ``brain hook session-start`` shows them while the
project's feed does not hold that session yet. Pure: a :class:`Session` in, lines out, in
the project feed's words (its handoff line, its "used here" line).
"""

from __future__ import annotations

from brain.core.arc_text import session_title, work_keys
from brain.core.project_feed import (
    MAX_TODOS,
    SCRATCH_PREFIXES,
    code_list,
    feed_path,
    feed_text,
    prompt_text,
    said,
    same_words,
    unresolved_line,
    words_of,
    work_line,
)
from brain.core.session import Session

#: What the lines carry of one session: enough to pick the work up, a fraction of the budget.
FILES, COMMANDS, IDENTIFIERS, ERROR_NAMES = 30, 15, 10, 6


def ended_session_lines(session: Session) -> list[str]:
    """Where ``session`` stopped, in the project feed's words: title, branch and last prompt on
    one line, then its last reply, files in play, commands, identifiers and errors, unresolved
    errors and open todos; every text redacted and cut, on one line each."""
    keys = work_keys([session])
    title = feed_text(session_title(session), 120)
    line = f"- {title}"
    if keys["branch"]:
        line += f" on branch `{feed_text(keys['branch'], 60)}`"
    last = prompt_text(keys["last_prompt"])
    if last and not same_words(last, title):
        line += f" — stopped at: \"{feed_text(last, 200)}\""
    lines = [line]
    reply = prompt_text(keys["last_state"])
    if reply:
        lines.append(f"- Its last reply: \"{feed_text(reply, 200)}\"")
    files = [f for f in keys["files"] if not f.startswith(SCRATCH_PREFIXES)][:FILES]
    if files:
        lines.append(f"- Files in play: {code_list(feed_path(f, 100) for f in files)}")
    commands = keys["commands"][:COMMANDS]
    listed = words_of("\n".join([*files, *commands]))
    identifiers = [i for i in keys["identifiers"] if not said(i, listed)][:IDENTIFIERS]
    work = work_line(commands, identifiers, keys["errors_met"][:ERROR_NAMES])
    if work:
        lines.append(work)
    if keys["open_errors"]:
        lines.append(unresolved_line(keys["open_errors"]))
    todos = [todo.text for todo in session.todos if todo.status != "completed" and todo.text][:MAX_TODOS]
    if todos:
        lines.append("- Open todos: " + "; ".join(feed_text(t, 100) for t in todos))
    return lines
