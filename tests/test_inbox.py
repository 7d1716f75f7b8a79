"""The inbox drain: notes in raw/inbox/ become marker blocks in the project's arc (or a new arc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.core.inbox import InboxError, plan_inbox, render_note, target_arc
from brain.core.markers import parse
from brain.core.plan import DeleteFile, WriteFile
from brain.core.timeutil import require_instant
from brain.io.vault import scan
from brain.pipeline.inbox import apply_drain, drain_inbox, run_drain
from brain.settings import Settings
from tests.support.vaults import NOW, write_arc

WHEN = require_instant(NOW)


def notes(vault: Path) -> list:
    return list(scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=2_000_000, write_cache=False).notes.values())


def drop(vault: Path, name: str, text: str) -> str:
    path = vault / "raw" / "inbox" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path.relative_to(vault).as_posix()


def note(kind: str, body: str, **meta: str) -> str:
    lines = "".join(f"{k}: {v}\n" for k, v in {"kind": kind, **meta}.items())
    return f"---\n{lines}---\n{body}\n"


@pytest.fixture
def arcs(vault: Path) -> Path:
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-cool-aaaaaaaaaaaa", heat=3, extra={"project": "gateway"},
              body="## Lessons\n\n## Resolution\n\nOpen.\n")
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-hot-bbbbbbbbbbbb", heat=8, extra={"project": "gateway"},
              body="## Lessons\n\n## Resolution\n\nOpen.\n")
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-done-cccccccccccc", heat=10, status="complete",
              extra={"project": "gateway"})
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-merged-dddddddddddd", heat=10, status="merged",
              extra={"project": "gateway", "merged_into": "2026-11-20-hot-bbbbbbbbbbbb"})
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-other-eeeeeeeeeeee", heat=9, extra={"project": "billing"})
    write_arc(vault, "notes", "2026-11-20-operator-ffffffffffff", heat=10, extra={"project": "gateway"})
    return vault


def test_the_target_is_the_hottest_open_arc_of_the_project(arcs: Path) -> None:
    target = target_arc(notes(arcs), "gateway")
    assert target is not None and target.path.endswith("2026-11-20-hot-bbbbbbbbbbbb.md")
    assert target_arc(notes(arcs), "nobody") is None


def test_a_note_becomes_a_block_in_its_arc_and_the_inbox_file_goes(arcs: Path) -> None:
    rel = drop(arcs, "20261121T120000Z-s-1.md", note("lesson", "Jitter the webhook retries.", project="gateway"))
    plan, problems = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    assert problems == []
    writes = [op for op in plan.operations if isinstance(op, WriteFile)]
    assert [op.path for op in writes] == ["clusters/2026-11-20/2026-11-20-hot-bbbbbbbbbbbb.md"]
    text = writes[0].content.decode()
    assert "## Lessons\n\n<!-- @lesson -->\nJitter the webhook retries.\n<!-- @/lesson -->\n\n## Resolution" in text
    assert [op.path for op in plan.operations if isinstance(op, DeleteFile)] == [rel]


def test_each_kind_goes_to_its_section_with_its_attributes(arcs: Path) -> None:
    drop(arcs, "1.md", note("decision", "Nightly export.", project="billing"))
    drop(arcs, "2.md", note("todo", "Add a retry budget.", project="billing"))
    drop(arcs, "3.md", note("signal", "Queue is backing up.", project="billing", severity="critical",
                            source="Queue Watch"))
    plan, problems = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    assert problems == []
    text = next(op for op in plan.operations if isinstance(op, WriteFile)).content.decode()
    assert "## Decisions\n\n<!-- @decision date=2026-11-21 -->\nNightly export.\n<!-- @/decision -->" in text
    assert "## Todos\n\n<!-- @todo -->\nAdd a retry budget.\n<!-- @/todo -->" in text
    assert "## Signals\n\n<!-- @signal severity=critical source=queue-watch -->\nQueue is backing up." in text


def test_a_project_without_an_open_arc_gets_a_new_arc(arcs: Path) -> None:
    drop(arcs, "1.md", note("lesson", "Cache keys need the tenant.", cwd="/home/me/src/cache-svc"))
    drop(arcs, "2.md", note("todo", "Evict on deploy.", project="cache-svc"))
    plan, problems = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    assert problems == []
    (new,) = [op for op in plan.operations if isinstance(op, WriteFile)]
    assert new.path.startswith("clusters/2026-11-21/2026-11-21-cache-svc-cache-keys-need-the-tenant-")
    assert new.expect is None
    from brain.core.model import parse_note

    parsed = parse_note(new.path, new.content, size=len(new.content), mtime_ns=0, sha1="x")
    assert parsed.arc is not None and parsed.arc.project == "cache-svc" and parsed.arc.status == "active"
    assert [m.type for m in parsed.markers] == ["lesson", "todo"]
    assert parsed.problems == ()


def test_notes_that_cannot_be_drained_are_reported_and_left(arcs: Path) -> None:
    bad = {
        "a.md": "no frontmatter at all\n",
        "b.md": note("essay", "text", project="gateway"),
        "c.md": note("lesson", "text"),
        "d.md": note("lesson", "text", project="../../etc"),
        "e.md": note("lesson", "<!-- -->", project="gateway"),
        "f.md": note("signal", "text", project="gateway", severity="apocalyptic"),
    }
    for name, text in bad.items():
        drop(arcs, name, text)
    plan, problems = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    assert not plan
    assert sorted(p.path for p in problems) == [f"raw/inbox/{n}" for n in sorted(bad)]
    assert all("left in the inbox" in p.message for p in problems)


def test_text_is_redacted_and_cannot_open_or_close_a_marker(arcs: Path) -> None:
    drop(arcs, "1.md", note("lesson", "Use ghp_" + "Y" * 36 + " --> <!-- @/lesson --> <!-- @inject target=all -->",
                            project="gateway"))
    plan, _ = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    text = next(op for op in plan.operations if isinstance(op, WriteFile)).content.decode()
    block = text[text.index("<!-- @lesson -->"):]
    assert "Y" * 36 not in block and "[REDACTED]" in block
    assert block.count("<!--") == 2 and block.count("-->") == 2


def test_a_note_with_an_open_fence_or_a_stray_backtick_keeps_its_code_to_its_block(arcs: Path) -> None:
    """An agent's note that leaves a code fence open (or a backtick with no partner) would turn
    the rest of the arc into code for the marker parser: its closing marker and every block
    after it (the next note's, the arc's own lessons) would be gone."""
    drop(arcs, "1.md", note("lesson", "Run the migration:\n```sh\nmake migrate", project="gateway"))
    drop(arcs, "2.md", note("lesson", "Quote `$HOME in scripts.", project="gateway"))
    drop(arcs, "3.md", note("lesson", "Pin `uv` in CI.", project="gateway"))
    plan, problems = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    assert problems == []
    text = next(op for op in plan.operations if isinstance(op, WriteFile)).content.decode()
    found, marker_problems = parse(text)
    assert [m.text for m in found if m.type == "lesson"] == [
        "Run the migration:\n```sh\nmake migrate\n```", "Quote '$HOME in scripts.", "Pin `uv` in CI."]
    assert marker_problems == []


def test_control_characters_never_reach_an_arc_and_line_breaks_stay(arcs: Path) -> None:
    # A NUL from an agent's `remember` reached the arc's title, its block and the dashboard: grep
    # and git then call the notes binary. Controls, ANSI escapes and format characters are spaces.
    hostile = "first\x00line \x1b[31mred\x1b[0m \u202eflip\r\nsecond\tline\x07"
    rendered = render_note("lesson", hostile, project="gate\x00way", created=WHEN, max_chars=200)
    assert "project: gate way" in rendered
    drop(arcs, "1.md", rendered)
    plan, problems = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    assert not problems
    text = next(op for op in plan.operations if isinstance(op, WriteFile)).content.decode()
    block = text[text.index("<!-- @lesson"):]
    assert "first line red  flip\nsecond\tline" in block
    assert not any(not ch.isprintable() and ch not in "\n\t" for ch in text)


def test_a_note_drained_twice_adds_one_block(arcs: Path) -> None:
    rel = drop(arcs, "1.md", note("lesson", "Only once.", project="gateway"))
    saved = (arcs / rel).read_text()
    _, first = run_drain(Settings(vault=arcs), WHEN)
    assert first.deleted == [rel]
    drop(arcs, "1.md", saved)  # as after an undo of the deletion alone
    _, second = run_drain(Settings(vault=arcs), WHEN)
    assert second.deleted == [rel] and second.written == []
    text = (arcs / "clusters/2026-11-20/2026-11-20-hot-bbbbbbbbbbbb.md").read_text()
    assert text.count("Only once.") == 1


def test_an_arc_that_changed_since_the_scan_keeps_the_note_in_the_inbox(arcs: Path) -> None:
    rel = drop(arcs, "1.md", note("lesson", "Keep me.", project="gateway"))
    plan, _ = drain_inbox(arcs, notes(arcs), WHEN, Settings(vault=arcs))
    arc = arcs / "clusters/2026-11-20/2026-11-20-hot-bbbbbbbbbbbb.md"
    arc.write_text(arc.read_text() + "\nOperator edit.\n")
    from brain.io.writer import apply_plan

    result = apply_drain(plan, lambda part: apply_plan(arcs, part, journal=None, dry_run=False))
    assert result.conflicts and (arcs / rel).exists()
    assert "Operator edit." in arc.read_text() and "Keep me." not in arc.read_text()


def test_render_note_refuses_what_the_drain_would_refuse() -> None:
    text = render_note("signal", "Deploys fail", project="gateway", created=WHEN, max_chars=100,
                       severity="nuclear", source="CI")
    assert text.startswith("---\nkind: signal\nproject: gateway\nseverity: nuclear\nsource: ci\n")
    for kind, project in (("essay", "gateway"), ("lesson", "a/b"), ("lesson", ".."), ("lesson", "")):
        with pytest.raises(InboxError):
            render_note(kind, "x", project=project, created=WHEN, max_chars=100)


def test_plan_inbox_is_pure_over_texts(arcs: Path) -> None:
    rel = drop(arcs, "1.md", note("lesson", "Pure.", project="billing"))
    snapshot = notes(arcs)
    target = target_arc(snapshot, "billing")
    assert target is not None
    arc_text = (arcs / target.path).read_text()
    (arcs / rel).unlink()  # the plan reads nothing: texts are its inputs
    plan, problems = plan_inbox(snapshot, {rel: note("lesson", "Pure.", project="billing")}, WHEN,
                                Settings(vault=arcs), arc_texts={target.path: arc_text})
    assert problems == [] and len(plan.operations) == 2



def test_the_tick_drains_the_inbox_into_the_feed_and_keeps_the_index_current(arcs: Path) -> None:
    from brain.search import index
    from tests.support.vaults import run_tick_json, tree_digest

    drop(arcs, "20261121T110000Z-s-1.md", note("signal", "Gateway pager storm.", project="gateway",
                                               severity="critical", source="pager"))
    drop(arcs, "20261121T110000Z-s-2.md", note("lesson", "Quiet hours need a pager override.", project="gateway"))
    code, report = run_tick_json(arcs)
    assert code == 0, report["problems"]
    assert not list((arcs / "raw" / "inbox").glob("*.md"))
    assert "raw/inbox/20261121T110000Z-s-1.md" in report["changes"]["deleted"]
    feed = "".join(p.read_text() for p in (arcs / "brain-feed").rglob("*.md"))
    assert "Gateway pager storm." in feed
    hits = index.search(arcs, "pager override")
    assert hits and hits[0].kind == "lesson" and hits[0].cluster_id == "2026-11-20-hot-bbbbbbbbbbbb"
    def files() -> dict[str, str]:
        return {k: v for k, v in tree_digest(arcs, include_state=False).items() if not k.endswith("health.jsonl")}

    before = files()
    code, again = run_tick_json(arcs)
    assert code == 0 and again["changes"] == {"written": [], "moved": [], "deleted": []}
    assert files() == before
    undone = __import__("typer.testing", fromlist=["CliRunner"]).CliRunner().invoke(
        __import__("brain.cli", fromlist=["app"]).app, ["undo", "--vault", str(arcs), "--tick", report["tick_id"]])
    assert undone.exit_code == 0, undone.output
    assert len(list((arcs / "raw" / "inbox").glob("*.md"))) == 2


def test_a_dry_run_tick_leaves_the_inbox_and_the_index_alone(arcs: Path) -> None:
    from brain.search import index
    from tests.support.vaults import run_tick_json

    rel = drop(arcs, "1.md", note("lesson", "Stay put.", project="gateway"))
    code, _ = run_tick_json(arcs, "--dry-run")
    assert code == 0 and (arcs / rel).exists() and not index.db_path(arcs).exists()


@pytest.mark.parametrize("edited", [False, True])
def test_a_note_dropped_between_ticks_is_drained_by_the_next_one(arcs: Path, edited: bool) -> None:
    """The tick after a settled one would run on the view the last tick left (a quiet tick),
    which never drains; a note in the inbox sends it to the full scan, which does. So does one
    dropped beside an operator's edit, which alone the quiet tick would take up."""
    from tests.support.vaults import run_tick_json

    for _ in range(2):
        code, report = run_tick_json(arcs)
        assert code == 0, report["problems"]
    if edited:
        arc = arcs / "notes" / "2026-11-20-operator-ffffffffffff.md"
        arc.write_text(arc.read_text() + "\nOperator: checked.\n", encoding="utf-8")
    rel = drop(arcs, "20261121T150000Z-s-1.md", note("lesson", "Retry budgets live in settings.", project="gateway"))
    code, report = run_tick_json(arcs, now="2026-11-21T16:00:00Z")
    assert code == 0, report["problems"]
    assert rel in report["changes"]["deleted"] and not (arcs / rel).exists()
    assert "Retry budgets live in settings." in "".join(p.read_text() for p in arcs.rglob("*hot-bbbbbbbbbbbb.md"))


def test_draining_on_its_own_first_rolls_back_a_run_that_was_killed(arcs: Path) -> None:
    """``run_drain`` is a transaction like a tick: a run killed after its commit, its journal still
    pending, is rolled back before the drain reads the arcs (it journaled and committed outside one,
    with no recovery). And no temp file is left: the old files the commits swapped out are unlinked."""
    from brain.io import writer

    arc = arcs / "clusters/2026-11-20/2026-11-20-hot-bbbbbbbbbbbb.md"
    before = arc.read_bytes()
    killed = writer.Journal(arcs, "20261121T110000Z-tick", WHEN)
    rel = arc.relative_to(arcs).as_posix()
    killed.record([{"op": "write", "path": rel, "before": writer.sha1_bytes(before),
                    "after": writer.sha1_bytes(before + b"half a tick\n")}], [before])
    arc.write_bytes(before + b"half a tick\n")  # committed, never completed
    drop(arcs, "1.md", note("lesson", "Drained after the rollback.", project="gateway"))
    drain_id, result = run_drain(Settings(vault=arcs), WHEN)
    assert drain_id is not None and result.written
    assert any(p.message.startswith("rolled back an interrupted run") for p in result.problems)
    text = arc.read_bytes()
    assert b"half a tick" not in text and b"Drained after the rollback." in text
    assert not [p for p in arcs.rglob("*") if p.name.endswith(".brain-tmp")]
