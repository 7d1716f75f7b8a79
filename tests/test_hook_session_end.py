"""``brain hook session-end``: a session that ended after the last extraction is handed to the
next session in its project (docs/hooks.md), on a real Claude Code transcript and a real Gemini
CLI chat from the fixtures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brain import launcher
from brain.cli import app
from tests.test_readers_gemini import GEMINI, jsonl_copy, line

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
SPOTTER = FIXTURES / "claude-code" / "-home-marco-projects-spotter"
#: 2026-02-10 22:57:54 → 22:59:46: starts Phoenix (`mix phx.server`), then at 22:59:22 asks about
#: xterm.js scrolling, reads assets/js/app.js.
ENDED = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
CWD = "/home/marco/projects/spotter"
AFTER = "2026-02-10T23:05:00Z"


def index(last_active: str | None) -> dict[str, Any]:
    projects: dict[str, Any] = {"spotter": {"file": "projects/spotter.md"}, "beta": {"file": "projects/beta.md"}}
    if last_active is not None:
        projects["spotter"]["last_active"] = last_active
    return {"version": 1, "generated": "2026-02-10T22:55:00Z", "ttl": 7200, "projects": projects,
            "roots": {CWD: "spotter", "/srv/beta": "beta"}}


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    folder = tmp_path / "vault" / "brain-feed"
    (folder / "projects").mkdir(parents=True)
    for name, body in (("spotter", "# spotter: where we left off\n\n- Last session (2026-02-10 21:16): "
                                   "mix phx.server doesnt seem to start"),
                       ("beta", "# beta: where we left off\n\n- Last session: outage")):
        (folder / "projects" / f"{name}.md").write_text(f"---\nid: {name}\npriority: 50\n---\n{body}\n")
    (folder / "projects" / "index.json").write_text(json.dumps(index("2026-02-10T21:16:12Z")))
    return folder


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """The spotter transcripts where Claude Code keeps them (the hook reads the file it is named)."""
    folder = tmp_path / "claude" / "projects" / SPOTTER.name
    shutil.copytree(SPOTTER, folder)
    return folder


def hook(command: str, feed: Path, state: Path, payload: dict[str, Any], now: str) -> str:
    result = CliRunner().invoke(app, ["hook", command, "--brain-feed", str(feed), *(
        ["--format", "text"] if command == "session-start" else [])], input=json.dumps(payload),
        env={"BRAIN_HOOK_STATE_DIR": str(state), "BRAIN_NOW": now})
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    out: str = result.stdout
    return out


def end(feed: Path, state: Path, logs: Path, session: str = ENDED, now: str = AFTER) -> str:
    return hook("session-end", feed, state, {"session_id": session, "transcript_path": str(logs / f"{session}.jsonl"),
                                             "cwd": CWD, "hook_event_name": "SessionEnd", "reason": "clear"}, now)


def start(feed: Path, state: Path, cwd: str = CWD, session: str = "next-session", now: str = AFTER) -> str:
    return hook("session-start", feed, state, {"session_id": session, "cwd": cwd, "source": "clear"}, now)


def test_the_session_that_just_ended_leads_the_next_sessions_context(feed: Path, logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert end(feed, state, logs) == ""  # SessionEnd output is not shown to anyone
    context = start(feed, state)
    ended, _, project = context.partition("\n\n# spotter: where we left off")
    assert project, context  # the project's own feed follows, whole
    assert ended.splitlines()[:3] == [
        "# A session here ended 5 min ago (not in the feed below yet)",
        "",
        "- start phoenix in background on branch `master` — stopped at: \"scrolling back in xterm.js still does "
        "not work (maybe because outer web catches it)? websearch xterm.js tmux interactions\"",
    ]
    assert "- Files in play: `assets/js/app.js`" in ended
    assert "- Commands: `mix phx.server`; identifiers: `xterm.js`" in ended
    assert "is new" not in context


def test_once_a_tick_has_the_session_the_feed_carries_it_alone(feed: Path, logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    end(feed, state, logs)
    (feed / "projects" / "index.json").write_text(json.dumps(index("2026-02-10T22:59:46Z")))  # its arc's last activity
    assert "A session here ended" not in start(feed, state)


def test_a_new_project_whose_first_session_just_ended_is_not_called_new(feed: Path, logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    end(feed, state, logs)
    (feed / "projects" / "index.json").write_text(json.dumps({**index(None), "projects": {
        "beta": {"file": "projects/beta.md"}}, "roots": {"/srv/beta": "beta"}}))
    context = start(feed, state)
    assert context.startswith("# `spotter`: its sessions are not in the feed yet; the one that just ended follows\n\n"
                              "# A session here ended 5 min ago")
    (feed / "recent-work.md").write_text("---\npriority: 20\n---\n# Recent work across projects\n\n- beta: outage\n")
    context = start(feed, state)
    assert context.startswith("# `spotter`: its sessions are not in the feed yet; the one that just ended follows, "
                              "then the other projects' recent work\n\n# A session here ended 5 min ago")
    assert context.index("# A session here ended") < context.index("# Recent work across projects")
    assert "is new" not in context


@pytest.mark.parametrize(("cwd", "session", "now"), [
    ("/srv/beta", "next-session", AFTER),  # another project
    (CWD, ENDED, AFTER),  # the session itself (resumed)
    (CWD, "next-session", "2026-02-10T22:59:00Z"),  # before it ended
    (CWD, "next-session", "2026-02-13T23:05:00Z"),  # days later: the tick has long had it
])
def test_it_is_shown_only_after_it_ended_to_another_session_of_its_project(
        feed: Path, logs: Path, tmp_path: Path, cwd: str, session: str, now: str) -> None:
    state = tmp_path / "state"
    end(feed, state, logs)
    assert "A session here ended" not in start(feed, state, cwd, session, now)


def test_records_after_now_are_never_read(feed: Path, logs: Path, tmp_path: Path) -> None:
    """At 22:59:00 the xterm.js prompt (22:59:22) and what followed had not happened yet."""
    state = tmp_path / "state"
    end(feed, state, logs, now="2026-02-10T22:59:00Z")
    context = start(feed, state, now="2026-02-10T22:59:10Z")
    assert context.startswith("# A session here ended 1 min ago")
    assert "mix phx.server" in context and "xterm" not in context and "app.js" not in context


def test_the_two_latest_ended_sessions_are_shown_newest_first(feed: Path, logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    end(feed, state, logs, "55604662-cf2a-4331-851a-ec234028f8ca")  # 21:11 → 21:16
    end(feed, state, logs)
    (feed / "projects" / "index.json").write_text(json.dumps(index("2026-02-10T20:00:00Z")))
    context = start(feed, state)
    assert context.index("start phoenix in background") < context.index("mix phx.server doesnt seem to start")
    assert context.count("# A session here ended") == 2


def test_a_session_nobody_typed_a_prompt_in_leaves_nothing(feed: Path, logs: Path, tmp_path: Path) -> None:
    """``/model`` and out, or text that is no command (xuwentao: "Commands are in the form
    `/command [args]`"): no work to pick up, so no "A session here ended" block."""
    from tests.eval_logs import SessionLog
    state, idle = tmp_path / "state", "1d6e0bad-1959-4eec-a9d2-0bfade768d8f"
    log = SessionLog(idle, CWD, "2026-02-10T22:00")
    log.prompt("<command-name>/model</command-name>\n<command-message>model</command-message>")
    log.prompt("Commands are in the form `/command [args]`")
    (logs / f"{idle}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log.records))
    end(feed, state, logs, idle)
    (feed / "projects" / "index.json").write_text(json.dumps(index("2026-02-10T20:00:00Z")))
    assert "# A session here ended" not in start(feed, state)
    end(feed, state, logs)  # one with a prompt still leads
    assert "# A session here ended" in start(feed, state)


def test_a_session_that_ended_without_any_work_is_not_shown(feed: Path, logs: Path, tmp_path: Path) -> None:
    """dotfile/paas-controller and M-Claude (real logs): a session opened and left after a prompt
    or two and a reply ("hi", "How can I help you?"), no file, command or error, took two or three
    lines above the project's feed that named nothing the next session needed. One that did any
    work still leads."""
    from tests.eval_logs import SessionLog
    state, idle = tmp_path / "state", "1d6e0bad-1959-4eec-a9d2-0bfade768d8f"
    log = SessionLog(idle, CWD, "2026-02-10T22:00").prompt("hi").prompt("look at the importer")
    (logs / f"{idle}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log.records))
    end(feed, state, logs, idle)
    (feed / "projects" / "index.json").write_text(json.dumps(index("2026-02-10T20:00:00Z")))
    assert "# A session here ended" not in start(feed, state)
    entry = json.loads((state / "ended" / f"{idle}.json").read_text())
    assert "look at the importer" in entry["lines"][0] and entry["lines"][1:] == ['- Its last reply: "On it."']

    end(feed, state, logs)  # one that did work leads
    context = start(feed, state)
    assert context.count("# A session here ended") == 1 and "start phoenix in background" in context
    assert "look at the importer" not in context


def test_two_sessions_that_left_the_same_lines_are_shown_once(feed: Path, logs: Path, tmp_path: Path) -> None:
    """A session and the copy its resume starts with (another id, the same records) both end:
    the next session reads what they left once (xuwentao/paas-controller had it twice)."""
    state = tmp_path / "state"
    copy = "0d6e0bad-1959-4eec-a9d2-0bfade768d8f"
    (logs / f"{copy}.jsonl").write_text((logs / f"{ENDED}.jsonl").read_text().replace(ENDED, copy))
    end(feed, state, logs)
    end(feed, state, logs, copy)
    (feed / "projects" / "index.json").write_text(json.dumps(index("2026-02-10T20:00:00Z")))
    context = start(feed, state)
    assert context.count("# A session here ended") == 1
    assert context.count("mix phx.server doesnt seem to start") == 1


@pytest.mark.parametrize("payload", [
    {"session_id": ENDED},  # no transcript named
    {"session_id": ENDED, "transcript_path": "/nowhere/x.jsonl"},
    {"session_id": ENDED, "transcript_path": "bad\x00path.jsonl"},
    {"session_id": ENDED, "transcript_path": 42},
    {"transcript_path": "TRANSCRIPT"},  # no session id
])
def test_a_hook_input_it_cannot_use_leaves_nothing_and_never_fails(
        feed: Path, logs: Path, tmp_path: Path, payload: dict[str, Any]) -> None:
    state = tmp_path / "state"
    if payload.get("transcript_path") == "TRANSCRIPT":
        payload = {"transcript_path": str(logs / f"{ENDED}.jsonl")}
    assert hook("session-end", feed, state, payload, AFTER) == ""
    assert not (state / "ended").exists() or not list((state / "ended").iterdir())


def test_a_transcript_that_is_a_folder_or_a_named_pipe_is_passed_over(feed: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    for path in (tmp_path, pipe):
        assert hook("session-end", feed, state, {"session_id": "s", "transcript_path": str(path)}, AFTER) == ""
    assert not (state / "ended").exists()


def test_damaged_entries_are_passed_over(feed: Path, logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    end(feed, state, logs)
    folder = state / "ended"
    (folder / "a.json").write_text("{not json")
    (folder / "b.json").write_text(json.dumps({"session_id": "b", "cwd": CWD, "end": "yesterday", "lines": ["- x"]}))
    (folder / "c.json").write_text(json.dumps({"session_id": "c", "cwd": CWD, "end": "2026-02-10T23:00:00Z",
                                               "lines": "- not a list"}))
    (folder / "d.json").write_text(json.dumps([1, 2]))
    context = start(feed, state)
    assert context.count("# A session here ended") == 1 and "start phoenix" in context


def test_the_fast_path_keeps_the_same_entry(feed: Path, logs: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    end(feed, state, logs)
    typer_entry = (state / "ended" / f"{ENDED}.json").read_text()
    shutil.rmtree(state)
    payload = {"session_id": ENDED, "transcript_path": str(logs / f"{ENDED}.jsonl")}
    monkeypatch.setattr(sys, "stdin", _Stdin(json.dumps(payload)))
    monkeypatch.setenv("BRAIN_HOOK_STATE_DIR", str(state))
    assert launcher.fast_main(["session-end", "--brain-feed", str(feed), "--now", AFTER]) == 0
    assert capsys.readouterr().out == ""
    assert (state / "ended" / f"{ENDED}.json").read_text() == typer_entry


def test_session_start_with_entries_still_imports_nothing_heavy(feed: Path, logs: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    end(feed, state, logs)
    probe = (
        "import sys\n"
        "from brain.launcher import fast_main\n"
        f"fast_main(['session-start', '--brain-feed', {str(feed)!r}, '--format', 'text', '--now', {AFTER!r}])\n"
        "heavy = {'yaml', 'redis', 'httpx', 'typer', 'frontmatter', 'dataclasses', 'inspect', 'brain.io.sessions'}\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy), file=sys.stderr)\n"
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}, "BRAIN_HOOK_STATE_DIR": str(state)}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=env, timeout=60,
                            input=json.dumps({"session_id": "next", "cwd": CWD}).encode())
    assert result.returncode == 0 and result.stderr.decode().strip() == "[]"
    assert "# A session here ended 5 min ago" in result.stdout.decode()


# --- Gemini CLI: the same hooks, its chat file as the transcript ------------------------------

#: 2026-01-16 11:01:22 → 12:34:29: explores the repository (todos, reads), then from 12:33:35 writes
#: and edits hello.md.
GEMINI_CHAT = "session-2026-01-16T11-01-file-ops-37b7abef.json"
GEMINI_SESSION = "37b7abef-713d-4522-85f0-8ff15a4e6d17"
#: The folder the chat's recorded paths point to, where Gemini CLI ran.
GEMINI_CWD = "/Users/Nikita_Levyankov/repos/EPMCDME/codemie-ai/codemie-code"
GEMINI_AFTER = "2026-01-16T12:39:30Z"


@pytest.fixture
def gemini_chat(tmp_path: Path) -> Path:
    """The chat where Gemini CLI keeps it (``~/.gemini/tmp/<project>/chats/``)."""
    root = tmp_path / "gemini" / "tmp"
    shutil.copytree(GEMINI, root)
    return next(root.glob(f"*/chats/{GEMINI_CHAT}"))


def gemini_end(feed: Path, state: Path, transcript: Path, now: str = GEMINI_AFTER, **fields: Any) -> str:
    payload = {"session_id": GEMINI_SESSION, "transcript_path": str(transcript), "cwd": GEMINI_CWD,
               "hook_event_name": "SessionEnd", "reason": "exit", "timestamp": now, **fields}
    return hook("session-end", feed, state, payload, now)


def test_a_gemini_session_that_just_ended_leads_the_next_sessions_context(
        feed: Path, gemini_chat: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert gemini_end(feed, state, gemini_chat) == ""
    context = start(feed, state, GEMINI_CWD, now=GEMINI_AFTER)
    assert context.splitlines()[:4] == [
        "# `codemie-code`: its sessions are not in the feed yet; the one that just ended follows",
        "",
        "# A session here ended 5 min ago (not in the feed below yet)",
        "",
    ]
    assert "- expore repository and figure out issues. focus on adaptability and… — stopped at: " \
           "\"remove 2 and 3 line\"" in context
    assert "- Its last reply: \"I have removed the 2nd and 3rd lines from `hello.md`.\"" in context
    assert "- Files in play: `hello.md`, `.husky/pre-commit`, `SECURITY.md`" in context
    assert "- Open todos: Check usages of CredentialStore and pre-commit hooks" in context


def test_a_gemini_chat_log_is_read_by_the_gemini_reader(feed: Path, tmp_path: Path) -> None:
    """A ``chats/session-*.jsonl`` is Gemini CLI's, though Claude Code's transcripts are ``.jsonl`` too."""
    path, data = jsonl_copy(tmp_path)
    meta = {k: data[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    path.write_bytes(line(meta) + b"".join(line(m) for m in data["messages"]))
    state = tmp_path / "state"
    gemini_end(feed, state, path)
    entry = json.loads((state / "ended" / f"{GEMINI_SESSION}.json").read_text())
    assert (entry["project"], entry["cwd"], entry["end"]) == ("codemie-code", GEMINI_CWD, "2026-01-16T12:34:29Z")
    assert "`hello.md`" in entry["lines"][2]


def test_records_after_now_are_never_read_from_a_gemini_chat(feed: Path, gemini_chat: Path, tmp_path: Path) -> None:
    """At 12:00 the exploration was over and hello.md not written yet."""
    state = tmp_path / "state"
    gemini_end(feed, state, gemini_chat, now="2026-01-16T12:00:00Z")
    context = start(feed, state, GEMINI_CWD, now="2026-01-16T12:00:10Z")
    assert "# A session here ended 55 min ago" in context
    assert "`SECURITY.md`" in context and "hello.md" not in context and "remove 2 and 3 line" not in context


def test_without_a_cwd_in_the_input_the_chats_recorded_paths_name_the_project(
        feed: Path, gemini_chat: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    gemini_end(feed, state, gemini_chat, cwd=None)
    entry = json.loads((state / "ended" / f"{GEMINI_SESSION}.json").read_text())
    assert (entry["project"], entry["cwd"]) == ("codemie-code", GEMINI_CWD)  # not where the hook ran


@pytest.mark.parametrize("name", [
    "chats/37b7abef-713d-4522-85f0-8ff15a4e6d17/agent-1.jsonl",  # a subagent's chat: its parent's work
    "logs.json",  # the prompt log: no chat
    "chats/notes.json",
    "chats/session-2026-01-16T13-00-gone.json",  # no such file
    "chats/session-2026-01-16T13-00-fifo.jsonl",  # a named pipe
])
def test_a_gemini_path_that_is_no_chat_leaves_nothing(feed: Path, gemini_chat: Path, tmp_path: Path, name: str) -> None:
    project = gemini_chat.parents[1]
    agent = project / "chats" / GEMINI_SESSION / "agent-1.jsonl"
    agent.parent.mkdir()
    agent.write_bytes(line({"sessionId": "agent-1", "kind": "subagent"}) + line(
        {"id": "s1", "type": "user", "timestamp": "2026-01-16T11:03:00.000Z", "content": "look at src/"}))
    (project / "chats" / "notes.json").write_text(json.dumps({"sessionId": GEMINI_SESSION, "messages": []}))
    os.mkfifo(project / "chats" / "session-2026-01-16T13-00-fifo.jsonl")
    state = tmp_path / "state"
    assert gemini_end(feed, state, project / name) == ""
    assert not (state / "ended").exists()


class _Stdin:
    """A stdin the fast path reads (no file descriptor: read directly)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def isatty(self) -> bool:
        return False

    def read(self, _size: int = -1) -> str:
        return self.text

    def fileno(self) -> int:
        raise OSError("no descriptor")


def test_a_session_that_just_ended_lists_the_files_its_next_session_picks_up() -> None:
    """A long session's files all go to the next one, up to thirty: the session that just ended
    is the work its continuation takes up (Tmeister/dotfiles, business-process: a compacted
    continuation needed 21 of the 33 files of the session five minutes before it, the Dusk
    suite the old cap of twelve left out)."""
    from brain.core.handoff import FILES, ended_session_lines
    from brain.core.session import Session

    edited = tuple((f"tests/Browser/Case{n:02d}Test.php", 40 - n) for n in range(36))
    ended = datetime(2025, 6, 27, 18, 46, tzinfo=UTC)
    session = Session("6d6fd97e", "claude-code", "business-process", "/Users/t/business-process", "main",
                      ended - timedelta(hours=2), ended, 12, 30, 200, (("Edit", 100),), (), "Run the Dusk suite",
                      "fix the failing browser tests", 3, 0, 1, 0, files_edited=edited)
    [line] = [x for x in ended_session_lines(session) if x.startswith("- Files in play: ")]
    listed = line.removeprefix("- Files in play: ").split(", ")
    assert FILES == 30 and listed == [f"`{path}`" for path, _ in edited[:30]]
