"""Type confusion in session logs: every field of every kind of record, replaced by a value of
another type, never stops an extraction (each reader, on records taken from the real fixtures).

A log is written by another program, and one record of an unexpected shape (a ``type`` that is a
list, a ``content`` that is a number) must cost that record at most, never the whole run: the
first version of the Codex reader stopped ``brain extract`` on a response item whose ``type`` was
not a string (``unhashable type: 'list'``), so nothing of any agent reached the vault.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from brain.pipeline.extract import extract
from brain.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
NOW = datetime(2026, 11, 27, tzinfo=UTC)
#: Values of every JSON type but the one a field usually holds, and an empty string.
HOSTILE: tuple[Any, ...] = (None, 7, "", ["x"], {"k": 1})
PER_KIND = 2  # records of each kind kept in a specimen

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared session fixtures not present")

Shape = tuple[str, ...]


def _jsonl(paths: list[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        for raw in path.read_bytes().splitlines():
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def _kind(record: dict[str, Any]) -> tuple[Any, ...]:
    """What tells records apart for a reader: their type, their payload's or message's type and
    role, and the types of their content blocks."""
    inner = record.get("payload") if isinstance(record.get("payload"), dict) else record.get("message")
    inner = inner if isinstance(inner, dict) else {}
    content = inner.get("content")
    blocks = tuple(sorted({str(b.get("type")) for b in content if isinstance(b, dict)})) if isinstance(content, list) else ()
    return record.get("type"), inner.get("type"), inner.get("role"), blocks


def _specimen(records: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    kept: dict[tuple[Any, ...], int] = {}
    out = []
    for record in records:
        key = _kind(record)
        if kept.get(key, 0) < PER_KIND:
            kept[key] = kept.get(key, 0) + 1
            out.append(record)
    return out


def _shapes(value: Any, prefix: Shape = ()) -> Iterator[Shape]:
    """Every key path below ``value``, list positions written ``*``."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*prefix, key)
            yield from _shapes(inner, (*prefix, key))
    elif isinstance(value, list):
        for inner in value:
            yield (*prefix, "*")
            yield from _shapes(inner, (*prefix, "*"))


def _replaced(value: Any, shape: Shape, new: Any) -> Any:
    """``value`` with every field at ``shape`` set to ``new``."""
    if not shape:
        return copy.deepcopy(new)
    head, rest = shape[0], shape[1:]
    if head == "*" and isinstance(value, list):
        return [_replaced(inner, rest, new) for inner in value]
    if isinstance(value, dict) and head in value:
        return {k: (_replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return value


def _claude_specimen() -> list[dict[str, Any]]:
    """The records of the main session file with the most kinds of record (one session: the
    reader groups records by session and drops those it has seen in another file)."""
    files = [p for p in sorted((FIXTURES / "claude-code").glob("*/*.jsonl")) if not p.name.startswith("agent-")]
    richest = max(files, key=lambda path: len({_kind(r) for r in _jsonl([path])}))
    return _specimen(_jsonl([richest]))


def _claude(root: Path, records: list[dict[str, Any]]) -> Settings:
    folder = root / "projects" / "-home-dev-src-app"
    folder.mkdir(parents=True)
    session = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)
                    and re.fullmatch(r"[0-9a-f-]{36}", r["sessionId"])), "0f0e0d0c-0b0a-4000-8000-000000000001")
    (folder / f"{session}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return Settings(projects_dir=root / "projects", codex_dir=root / "none", gemini_dir=root / "none",
                    opencode_dir=root / "none")


def _codex(root: Path, records: list[dict[str, Any]]) -> Settings:
    folder = root / "codex" / "2026" / "05" / "11"
    folder.mkdir(parents=True)
    (folder / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return Settings(projects_dir=root / "none", codex_dir=root / "codex", gemini_dir=root / "none",
                    opencode_dir=root / "none")


def _gemini(root: Path, records: list[dict[str, Any]]) -> Settings:
    chats = root / "gemini" / "fb8e242a6fbbb5c48a1d0be57a8a4cc934d33e0a1caf73ab5d4ecaa17269960c" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-2025-12-01T21-45-5b959dae.json").write_text(json.dumps(records[0]), encoding="utf-8")
    return Settings(projects_dir=root / "none", codex_dir=root / "none", gemini_dir=root / "gemini",
                    opencode_dir=root / "none")


def _gemini_specimen() -> list[dict[str, Any]]:
    """One chat file (an object holding a list of messages), its messages cut to a few of each type."""
    chats = sorted((FIXTURES / "gemini-cli" / "tmp").glob("*/chats/*.json"))
    chat = json.loads(chats[0].read_text(encoding="utf-8"))
    messages = [m for path in chats for m in json.loads(path.read_text(encoding="utf-8")).get("messages", [])]
    return [{**chat, "messages": _specimen(iter(messages))}]


def _opencode_specimen() -> list[dict[str, Any]]:
    """One OpenCode session (tests/test_readers_opencode.py): its info, then each message with its parts."""
    from tests.test_readers_opencode import conversation

    info, messages = conversation()
    return [info, *({"message": message, "parts": parts} for message, parts in messages)]


def _opencode(root: Path, records: list[dict[str, Any]]) -> Settings:
    """The JSON storage tree, every file named by the ids of the unchanged session."""
    original = _opencode_specimen()
    storage = root / "opencode" / "storage"
    sid = original[0]["id"]
    files = [(storage / "session" / "global" / f"{sid}.json", records[0])]
    for before, after in zip(original[1:], records[1:], strict=True):
        mid = before["message"]["id"]
        files.append((storage / "message" / sid / f"{mid}.json", after.get("message")))
        parts = after.get("parts") if isinstance(after.get("parts"), list) else []
        files += [(storage / "part" / mid / f"{part['id']}.json", value)
                  for part, value in zip(before["parts"], parts, strict=False)]
    for path, value in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")
    return Settings(projects_dir=root / "none", codex_dir=root / "none", gemini_dir=root / "none",
                    opencode_dir=root / "opencode")


READERS: dict[str, tuple[Callable[[], list[dict[str, Any]]], Callable[[Path, list[dict[str, Any]]], Settings]]] = {
    "claude-code": (_claude_specimen, _claude),
    "codex": (lambda: _specimen(_jsonl(sorted((FIXTURES / "codex").rglob("*.jsonl")))), _codex),
    "gemini-cli": (_gemini_specimen, _gemini),
    "opencode": (_opencode_specimen, _opencode),
}


@pytest.mark.parametrize("agent", sorted(READERS))
def test_a_field_of_another_type_never_stops_an_extraction(agent: str, tmp_path: Path) -> None:
    specimen, layout = READERS[agent]
    records = specimen()
    clean = extract(layout(tmp_path / "clean", records), NOW, since="4000d", min_turns=0, agent=agent)
    assert clean.sessions, "the specimen itself holds a session"
    shapes = sorted({shape for record in records for shape in _shapes(record)})
    assert len(shapes) > 40  # the specimen covers the records' many fields
    failures = []
    for index, shape in enumerate(shapes):
        for number, value in enumerate(HOSTILE):
            mutated = [_replaced(record, shape, value) for record in records]
            if mutated == records:
                continue
            try:
                bundle = extract(layout(tmp_path / f"{index}-{number}", mutated), NOW, since="4000d", min_turns=0,
                                 agent=agent)
            except Exception as exc:  # every failure is collected and reported below
                failures.append(f"{'.'.join(shape)} = {value!r}: {type(exc).__name__}: {exc}")
                continue
            if bundle.stats["skipped_records"]:  # the reader's own checks, not the safety net, take it
                failures.append(f"{'.'.join(shape)} = {value!r}: {bundle.warnings}")
    assert not failures, f"{len(failures)} hostile fields stop the {agent} reader:\n" + "\n".join(failures[:20])


def test_a_record_no_reader_expected_is_skipped_and_named_and_the_file_goes_on(tmp_path: Path) -> None:
    from brain.io.sessions import ReadStats
    from brain.io.sessions.incremental import read_numbered

    log = tmp_path / "rollout.jsonl"
    log.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(4)), encoding="utf-8")
    taken = []

    def handle(record: dict[str, Any], line: int) -> None:
        if record["n"] == 1:
            raise TypeError("unhashable type: 'list'")  # what an unforeseen shape did to the Codex reader
        taken.append(line)

    stats = ReadStats()
    read_numbered(log, handle, stats)
    assert taken == [1, 3, 4]
    assert stats.skipped_records == 1 and stats.damaged_lines == 1
    [problem] = stats.problems
    assert problem.startswith(f"{log}:2: record skipped, a value of an unexpected shape (TypeError in "
                              "test_hostile_logs.py:")  # where the reader stopped, for a bug report
    assert problem.endswith(": unhashable type: 'list')")


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_the_evals_own_reader_takes_a_field_of_another_type_too(agent: str, tmp_path: Path) -> None:
    """`brain eval feed` judges with its own reading of the logs (FEED-METRIC): one odd record
    must not stop an operator's replay either (a tool_use whose name was a list did)."""
    from brain.evaluation import needs

    specimen, layout = READERS[agent]
    records = specimen()
    failures = []
    for index, shape in enumerate(sorted({shape for record in records for shape in _shapes(record)})):
        for number, value in enumerate(HOSTILE):
            settings = layout(tmp_path / f"{index}-{number}", [_replaced(record, shape, value) for record in records])
            found = needs.locate_claude(settings.projects_dir) if agent == "claude-code" else \
                needs.locate_codex(settings.codex_dir)
            try:
                for files in found.values():
                    needs.read_needs(files)
            except Exception as exc:  # every failure is collected and reported below
                failures.append(f"{'.'.join(shape)} = {value!r}: {type(exc).__name__}: {exc}")
    assert not failures, f"{len(failures)} hostile fields stop the eval's {agent} reader:\n" + "\n".join(failures[:20])


def test_gemini_and_opencode_skip_a_record_or_session_they_cannot_take(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The same safety net in the readers that do not read line by line: one message of a Gemini
    chat, one OpenCode session; the rest of the run comes out."""
    from brain.io.sessions import gemini, opencode
    from tests.test_readers_opencode import conversation, write_storage

    upsert = gemini._Chat.upsert
    seen: list[int] = []

    def failing_upsert(chat: Any, message: dict[str, Any]) -> None:
        seen.append(1)
        if len(seen) == 2:
            raise TypeError("unhashable type: 'list'")
        upsert(chat, message)

    monkeypatch.setattr(gemini._Chat, "upsert", failing_upsert)
    settings = Settings(projects_dir=tmp_path / "none", codex_dir=tmp_path / "none",
                        gemini_dir=FIXTURES / "gemini-cli" / "tmp", opencode_dir=tmp_path / "none")
    bundle = extract(settings, NOW, since="4000d", min_turns=0, agent="gemini-cli")
    assert bundle.sessions and bundle.stats["skipped_records"] == 1
    assert any(":2: record skipped, a value of an unexpected shape (TypeError in" in w for w in bundle.warnings)

    for sid in ("ses_1aaaaaaaaaaaaaaaaaaaaaaaaa", "ses_2bbbbbbbbbbbbbbbbbbbbbbbbb"):
        write_storage(tmp_path / "opencode", *conversation(sid))
    from_storage = opencode._from_storage

    def failing_storage(storage: Path, path: Path, *args: Any) -> Any:
        if path.stem.startswith("ses_1"):
            raise AttributeError("'list' object has no attribute 'get'")
        return from_storage(storage, path, *args)

    monkeypatch.setattr(opencode, "_from_storage", failing_storage)
    settings = Settings(projects_dir=tmp_path / "none", codex_dir=tmp_path / "none", gemini_dir=tmp_path / "none",
                        opencode_dir=tmp_path / "opencode")
    bundle = extract(settings, NOW, since="4000d", min_turns=0, agent="opencode")
    assert [s.session_id for s in bundle.sessions] == ["ses_2bbbbbbbbbbbbbbbbbbbbbbbbb"]
    assert bundle.stats["skipped_records"] == 1 and "ses_1aaaaaaaaaaaaaaaaaaaaaaaaa" in " ".join(bundle.warnings)


@pytest.mark.timeout(30)
def test_a_named_pipe_named_like_a_log_is_passed_over_never_waited_on(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer: `brain eval feed` hung on one named like a
    session log. The extraction and the eval's own reader pass over anything but a regular file."""
    import os

    from brain.evaluation import needs

    project = tmp_path / "projects" / "-home-dev-src-app"
    project.mkdir(parents=True)
    records = _claude_specimen()
    real = project / f"{records[0]['sessionId']}.jsonl"
    real.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    os.mkfifo(project / "0f0e0d0c-0b0a-4000-8000-000000000009.jsonl")
    os.mkfifo(project / "agent-0f0e0d0c.jsonl")
    (project / records[0]["sessionId"] / "subagents").mkdir(parents=True)
    os.mkfifo(project / records[0]["sessionId"] / "subagents" / "agent-a1.jsonl")
    rollouts = tmp_path / "codex" / "2026" / "05" / "11"
    rollouts.mkdir(parents=True)
    os.mkfifo(rollouts / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl")
    assert list(needs.locate_claude(tmp_path / "projects")) == [records[0]["sessionId"]]
    assert needs.locate_claude(tmp_path / "projects")[records[0]["sessionId"]].subagents == ()
    assert needs.locate_codex(tmp_path / "codex") == {}
    settings = Settings(projects_dir=tmp_path / "projects", codex_dir=tmp_path / "codex",
                        gemini_dir=tmp_path / "none", opencode_dir=tmp_path / "none")
    bundle = extract(settings, NOW, since="4000d", min_turns=0)
    assert [s.session_id for s in bundle.sessions] == [records[0]["sessionId"]]
