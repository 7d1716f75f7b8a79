"""Phase 4 (SPEC §8): validated recommendations applied to real files, idempotently, recoverably."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from brain.cli import app
from brain.core import frontmatter
from brain.core.apply import CurrentArc, append_to_section, body_markers, fenced, plan_answer, share
from brain.core.markers import parse
from brain.core.plan import Expect
from brain.core.recommendations import NewEdge, Split, SplitPart, Validated
from brain.io.transaction import transaction
from brain.pipeline.ai import apply_answer
from brain.settings import Settings
from tests.support.vaults import NOW, run_tick_json, tree_digest, write_arc

WHEN = datetime(2026, 11, 21, 12, tzinfo=UTC)
A = "2026-11-10-login-bug-0123456789aa"
B = "2026-11-10-login-again-0123456789ab"
C = "2026-11-09-auth-rewrite-0123456789ac"
D = "2026-11-08-docs-0123456789ad"

A_BODY = f"""## Ignition

> The login page answers 500 after the deploy

## Timeline

- 2026-11-10 09:00 → 10:00 UTC · claude-code · 3 turns · 6 tool calls <!-- brain:session id=s1 end=2026-11-10T10:00:00Z turns=3 tools=6 errors=0 joy=0 compactions=0 -->
- 2026-11-10 11:00 → 12:00 UTC · claude-code · 2 turns · 4 tool calls <!-- brain:session id=s2 end=2026-11-10T12:00:00Z turns=2 tools=4 errors=0 joy=0 compactions=0 -->

## Lessons

<!-- @lesson -->
Check the session store.
<!-- @/lesson -->

## Edges

<!-- @edge type=related target={C} --> [[{C}]]

## Source sessions

- `s1` · claude-code
- `s2` · claude-code
"""

B_BODY = f"""## Ignition

> login page 500s again

Operator note: the retry fixed it for now.

<!-- @signal severity=warning source=ci owner=ops -->
CI red on login tests.
<!-- @/signal -->

<!-- @lesson -->
Check the session store.
<!-- @/lesson -->

<!-- @lesson -->
Pin the redis client.
<!-- @/lesson -->

```python
# a fence inside the absorbed arc
print("<!-- @lesson --> not a marker")
```

## Edges

<!-- @edge type=sibling target={A} --> [[{A}]]
<!-- @edge type=related target={C} --> [[{C}]]
<!-- @edge type=unblocks target={D} --> [[{D}]]
"""


def build(vault: Path) -> None:
    """Four quiet arcs (no moves at NOW), so files stay where the test looks for them."""
    old = {"created": "2026-11-10T09:00:00Z", "last_active": "2026-11-10T12:00:00Z", "status": "complete"}
    write_arc(vault, "clusters/2026-11-10", A, title="Fix the login bug", sessions=["s1", "s2"], body=A_BODY,
              extra={"agents": ["claude-code"]}, **old)  # type: ignore[arg-type]
    write_arc(vault, "clusters/2026-11-10", B, title="Fix the login bug again", sessions=["s3"], body=B_BODY,
              extra={"agents": ["codex"]}, tool_calls=7, created="2026-11-10T13:00:00Z",
              last_active="2026-11-11T08:00:00Z", status="complete")
    write_arc(vault, "clusters/2026-11-09", C, title="Rewrite auth", sessions=["s4"], status="complete",
              created="2026-11-09T09:00:00Z", last_active="2026-11-09T12:00:00Z",
              body="<!-- @signal severity=info source=perf owner=sre since=2026-11-01 -->\nslow logins\n<!-- @/signal -->\n")
    write_arc(vault, "clusters/2026-11-08", D, title="Docs", sessions=["s5"], status="complete",
              created="2026-11-08T09:00:00Z", last_active="2026-11-08T12:00:00Z",
              extra={"summary": "Existing summary"})


def find(vault: Path, cid: str) -> Path:
    found = list(vault.rglob(f"{cid}.md"))
    assert len(found) == 1, found
    return found[0]


def meta_of(path: Path) -> dict[str, Any]:
    return frontmatter.load(frontmatter.split(path.read_text()).frontmatter or "")


def live_markers(vault: Path, kind: str) -> list[tuple[str, dict[str, str], str]]:
    """(cluster file, attrs, text) of every ``kind`` marker the scanner would count, vault-wide."""
    out = []
    for path in sorted(vault.rglob("*.md")):
        if "brain-feed" in path.parts:
            continue
        for marker in body_markers(path.read_text()):
            if marker.type == kind:
                out.append((path.stem, dict(marker.attrs), marker.text))
    return out


def apply_cli(vault: Path, answer: dict[str, Any] | str, *args: str, now: str = NOW) -> tuple[int, dict[str, Any]]:
    path = vault.parent / "answer.json"
    path.write_text(answer if isinstance(answer, str) else json.dumps(answer))
    result = CliRunner().invoke(app, ["apply", "--vault", str(vault), "--recommendations", str(path), "--json",
                                      "--now", now, *args])
    assert result.stdout.startswith("{"), result.stderr
    return result.exit_code, json.loads(result.stdout)


def test_brain_apply_refuses_a_replayed_answer_with_an_unknown_field_naming_it(vault: Path) -> None:
    before = tree_digest(vault)
    path = vault.parent / "answer.json"
    path.write_text(json.dumps({"edges": [], "frobnicate": [1]}))
    result = CliRunner().invoke(app, ["apply", "--vault", str(vault), "--recommendations", str(path), "--now", NOW])
    assert result.exit_code == 2, result.stderr
    assert "unknown field 'frobnicate'" in result.stderr and "known fields: edges" in result.stderr
    assert tree_digest(vault) == before  # nothing applied, nothing journaled


def settled(vault: Path) -> dict[str, str]:
    """Digest of the vault without machine state and the health log."""
    digest = tree_digest(vault, include_state=False)
    digest.pop("brain-feed/health.jsonl", None)
    return digest


# --- edges ------------------------------------------------------------------------------------------

def test_edge_is_a_marker_and_a_visible_link_on_one_line_under_edges(vault: Path) -> None:
    build(vault)
    code, report = apply_cli(vault, {"edges": [
        {"source": C, "target": A, "type": "parent", "reason": "both touch the login path"},
        {"source": A, "target": D, "type": "unblocks", "reason": "docs wait for the fix"},
    ]})
    assert code == 0 and report["phases"]["apply"]["applied"]["edges"] == 2, report
    c_text = find(vault, C).read_text()
    line = f"<!-- @edge type=parent target={A} --> [[{A}]] — both touch the login path"
    assert c_text.endswith(f"## Edges\n\n{line}\n")  # section created at the end
    a_text = find(vault, A).read_text()
    edges_section = a_text.split("## Edges\n", 1)[1].split("## Source sessions", 1)[0]
    assert f"<!-- @edge type=unblocks target={D} --> [[{D}]] — docs wait for the fix\n" in edges_section
    assert report["stats"]["edges_added"] == 2
    diff = (vault / "brain-feed/last-tick-diff.md").read_text()
    assert f"edge [[{C}]] → [[{A}]] (parent): both touch the login path" in diff


def test_one_edge_per_pair_even_when_the_answer_comes_again() -> None:
    text = f"---\ncluster_id: {C}\ntitle: x\n---\n# x\n\n## Edges\n\n<!-- @edge type=parent target={A} --> [[{A}]]\n"
    current = {C: CurrentArc(C, f"clusters/{C}.md", text, Expect(len(text), 0, "x"))}
    planned = plan_answer(Validated(edges=(NewEdge(C, A, "related", "again"),)), current, now=WHEN)
    assert not planned.plan and planned.rejected[0].reason == "already exists (applied before)"


# --- merges -----------------------------------------------------------------------------------------

def test_merge_keeps_every_line_and_each_distinct_marker_once(vault: Path) -> None:
    build(vault)
    b_before = find(vault, B).read_text()
    code, report = apply_cli(vault, {"merges": [
        {"keep": A, "absorb": B, "title": "Fix the login bug for good", "reason": "same bug, two days"}]})
    assert code == 0 and report["phases"]["verify"]["ok"], report
    kept = find(vault, A).read_text()
    for line in frontmatter.split(b_before).body.splitlines():
        assert line in kept.splitlines(), f"lost: {line!r}"
    meta = meta_of(find(vault, A))
    assert meta["title"] == "Fix the login bug for good" and "# Fix the login bug for good\n" in kept
    assert meta["source_sessions"] == ["s1", "s2", "s3"] and meta["agents"] == ["claude-code", "codex"]
    assert meta["activity"]["sessions"] == 3 and meta["activity"]["tool_calls"] == 17
    assert meta["activity"]["user_turns"] == 10 and meta["last_active"] == "2026-11-11T08:00:00Z"
    # live markers: each distinct one once, none from the fenced copy
    lessons = [text for stem, _, text in live_markers(vault, "lesson")]
    assert sorted(lessons) == ["Check the session store.", "Pin the redis client."]
    signals = live_markers(vault, "signal")
    assert [(stem, attrs.get("owner")) for stem, attrs, _ in signals if attrs["source"] == "ci"] == [(A, "ops")]
    edges = [(stem, attrs["target"]) for stem, attrs, _ in live_markers(vault, "edge")]
    assert sorted(e for e in edges if e[0] == A) == sorted([(A, C), (A, D)])  # no self-loop, no second A→C
    assert f"<!-- @edge type=unblocks target={D} --> [[{D}]]" in kept.split("## Merged from")[0]
    assert f"## Merged from [[{B}]]" in kept and "Merged into this arc on 2026-11-21: same bug, two days" in kept
    tomb = find(vault, B)
    tomb_meta = meta_of(tomb)
    assert tomb_meta["status"] == "merged" and tomb_meta["merged_into"] == A and tomb_meta["heat"] == 0
    assert tomb_meta["source_sessions"] == ["s3"]  # extraction follows merged_into from here
    assert f"Merged into [[{A}]] on 2026-11-21: same bug, two days" in tomb.read_text()
    assert not body_markers(tomb.read_text())
    hot = (vault / "brain-feed/hot-arcs.md").read_text()
    assert B not in hot


def test_fence_is_longer_than_any_fence_inside() -> None:
    body = "a\n~~~~~\ninside\n~~~~~\n"
    lines = fenced(body)
    assert lines[0] == "~~~~~~markdown" and lines[-1] == "~~~~~~" and lines[1:-1] == ["a", "~~~~~", "inside", "~~~~~"]
    markers, _ = parse("\n".join(["x", *fenced("<!-- @lesson -->\nhidden\n<!-- @/lesson -->"), "y"]))
    assert markers == []


# --- splits -----------------------------------------------------------------------------------------

def test_split_partitions_the_sessions_into_new_arcs_and_leaves_a_tombstone(vault: Path) -> None:
    build(vault)
    code, report = apply_cli(vault, {"splits": [{"arc": A, "reason": "two unrelated stories", "parts": [
        {"title": "Login 500 after deploy", "sessions": ["s1"]},
        {"title": "Session store tuning", "sessions": ["s2"]},
    ]}]})
    assert code == 0 and report["phases"]["verify"]["ok"], report
    tomb = find(vault, A)
    meta = meta_of(tomb)
    assert meta["status"] == "split" and len(meta["split_into"]) == 2
    first, second = (find(vault, pid) for pid in meta["split_into"])
    assert first.parent == tomb.parent == second.parent  # next to the original
    assert meta["split_into"][0].startswith("2026-11-10-login-500-after-deploy-")
    one, two = meta_of(first), meta_of(second)
    assert one["source_sessions"] == ["s1"] and two["source_sessions"] == ["s2"]
    assert one["activity"]["tool_calls"] == 6 and two["activity"]["tool_calls"] == 4  # from the Timeline records
    assert one["synthesized"] is False and one["cluster_id"] == first.stem and one["title"] == "Login 500 after deploy"
    assert f"Split from [[{A}]]" in first.read_text() and "id=s1 " in first.read_text()
    assert "id=s2 " not in first.read_text() and "id=s2 " in second.read_text()
    # the original's text stays, fenced, in the tombstone; its markers live on once, in the first part
    for line in A_BODY.splitlines():
        assert line in tomb.read_text().splitlines()
    assert [stem for stem, _, _ in live_markers(vault, "lesson") if stem != B] == [first.stem]
    assert [(stem, attrs["target"]) for stem, attrs, _ in live_markers(vault, "edge") if stem != B] == [(first.stem, C)]
    assert not body_markers(tomb.read_text())
    before = settled(vault)
    code, tick = run_tick_json(vault)  # the parts were placed and heated in the same tick
    assert code == 0 and tick["changes"] == {"written": [], "moved": [], "deleted": []} and settled(vault) == before


def test_split_whose_part_id_is_taken_is_rejected_whole() -> None:
    text = f"---\ncluster_id: {A}\ntitle: x\ncreated: '2026-11-10T09:00:00Z'\nsource_sessions:\n- s1\n- s2\n---\n# x\n"
    current = {A: CurrentArc(A, f"clusters/{A}.md", text, Expect(len(text), 0, "x"))}
    split = Split(A, (SplitPart("One", ("s1",)), SplitPart("Two", ("s2",))), "why")
    free = plan_answer(Validated(splits=(split,)), current, now=WHEN)
    taken = free.created[0].rsplit("/", 1)[1].removesuffix(".md")
    planned = plan_answer(Validated(splits=(split,)), current, now=WHEN, taken_ids={taken})
    assert not planned.plan and "already taken" in planned.rejected[0].reason


def test_split_figures_are_shared_in_proportion_without_timeline_records() -> None:
    assert share(10, [1, 1, 1]) == [4, 3, 3] and sum(share(7, [2, 1])) == 7 and share(0, [1, 2]) == [0, 0]


# --- signals and summaries -----------------------------------------------------------------------------

def test_escalate_and_clear_keep_every_other_attribute(vault: Path) -> None:
    build(vault)
    code, report = apply_cli(vault, {"signals": [
        {"arc": C, "source": "perf", "action": "escalate", "severity": "critical", "reason": "p99 doubled"},
        {"arc": B, "source": "ci", "action": "clear", "severity": "nuclear", "reason": "fixed by the retry"},
    ]})
    assert code == 0, report
    assert "<!-- @signal severity=critical source=perf owner=sre since=2026-11-01 -->\nslow logins\n<!-- @/signal -->" \
        in find(vault, C).read_text()
    cleared = ("<!-- @signal severity=resolved source=ci owner=ops cleared_at=2026-11-21T12:00:00Z -->\n"
               "CI red on login tests. (CLEARED: fixed by the retry)\n<!-- @/signal -->")
    assert cleared in find(vault, B).read_text()
    signals = (vault / "brain-feed/signals.md").read_text()
    assert "**CRITICAL** `perf`" in signals and "CI red" not in signals
    diff = (vault / "brain-feed/last-tick-diff.md").read_text()
    assert "escalated signal `perf` in" in diff and "info → critical: p99 doubled" in diff
    assert f"cleared signal `ci` in [[{B}]]: fixed by the retry" in diff
    # the cleared block goes on the first tick after cleared_at, recoverably
    run_tick_json(vault, now="2026-11-21T14:00:00Z")
    assert "@signal" not in find(vault, B).read_text() and "Pin the redis client." in find(vault, B).read_text()


def test_summary_is_written_once_and_never_overwritten(vault: Path) -> None:
    build(vault)
    d_before = find(vault, D).read_bytes()
    code, report = apply_cli(vault, {"summaries": [
        {"arc": C, "summary": "Auth rewrite to make logins boring"},
        {"arc": D, "summary": "A better summary"},
    ]})
    assert code == 0
    meta = meta_of(find(vault, C))
    assert meta["summary"] == "Auth rewrite to make logins boring" and meta["synthesized"] is True
    assert find(vault, D).read_bytes() == d_before
    assert [r["reason"] for r in report["rejected"]] == ["the arc already has a summary (never overwritten)"]
    assert f"summary for [[{C}]]" in (vault / "brain-feed/last-tick-diff.md").read_text()


# --- idempotence, undo, concurrency ----------------------------------------------------------------------

FULL = {
    "merges": [{"keep": A, "absorb": B, "title": "", "reason": "same bug"}],
    "signals": [{"arc": C, "source": "perf", "action": "clear", "reason": "rewrite shipped"}],
    "edges": [{"source": C, "target": D, "type": "unblocks", "reason": "docs describe the rewrite"}],
    "summaries": [{"arc": C, "summary": "Auth rewrite"}],
    "intent": "Make logins boring",
    "health": {"score": 7.5, "reason": "one open incident"},
}


def test_reapplying_changes_nothing_and_a_tick_after_changes_nothing(vault: Path) -> None:
    build(vault)
    code, first = apply_cli(vault, FULL)
    assert code == 0 and first["changes"]["written"] and not first["rejected"], first
    after_first = settled(vault)
    code, second = apply_cli(vault, FULL)
    assert code == 0 and second["changes"] == {"written": [], "moved": [], "deleted": []}, second
    assert {r["kind"] for r in second["rejected"]} == {"merge", "signal", "edge", "summary"}
    assert settled(vault) == after_first
    code, tick = run_tick_json(vault)
    assert code == 0 and tick["changes"] == {"written": [], "moved": [], "deleted": []}, tick["changes"]
    assert settled(vault) == after_first
    assert (vault / "brain-feed/intent.md").read_text().rstrip().endswith("Make logins boring")
    row = json.loads((vault / "brain-feed/health.jsonl").read_text().splitlines()[0])
    assert row["score"] == 7.5 and row["reason"] == "one open incident" and row["input_tokens"] is None


def test_undo_restores_what_apply_changed(vault: Path) -> None:
    build(vault)
    run_tick_json(vault)  # settle the deterministic part first
    before = settled(vault)
    code, report = apply_cli(vault, {
        **FULL,
        "merges": [{"keep": B, "absorb": D, "title": "", "reason": "x"}],
        "splits": [{"arc": A, "reason": "x", "parts": [{"title": "one", "sessions": ["s1"]},
                                                       {"title": "two", "sessions": ["s2"]}]}],
        "edges": [],
    })
    assert code == 0 and not report["rejected"] and report["phases"]["apply"]["created"] == 2, report
    assert settled(vault) != before
    result = CliRunner().invoke(app, ["undo", "--vault", str(vault), "--tick", report["tick_id"]])
    assert result.exit_code == 0, result.stderr
    assert settled(vault) == before


def test_dry_run_applies_nothing(vault: Path) -> None:
    build(vault)
    before = tree_digest(vault)
    code, report = apply_cli(vault, FULL, "--dry-run")
    assert code == 0 and report["dry_run"] and report["phases"]["apply"]["applied"]["merges"] == 1
    assert tree_digest(vault) == before


def test_an_arc_changed_since_the_scan_keeps_its_edit(vault: Path) -> None:
    from brain.io.vault import scan

    build(vault)
    s = Settings(vault=vault)
    snapshot = scan(vault, feed_dir=s.feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False)
    path = find(vault, C)
    path.write_text(path.read_text() + "\nOperator wrote this after the scan.\n")
    edited = path.read_bytes()
    with transaction(vault, "apply", "t-race", WHEN) as tx:
        outcome = apply_answer(s, vault, json.dumps({"summaries": [{"arc": C, "summary": "x"}, {"arc": A, "summary": "y"}]}),
                               WHEN, target=tx, snapshot=snapshot)
    assert path.read_bytes() == edited
    assert outcome.rejected == [{"kind": "summary", "item": C, "reason": "changed since the scan; the next tick takes it up"}]
    assert meta_of(find(vault, A))["summary"] == "y"


def test_unusable_file_is_exit_4_with_a_fresh_feed(vault: Path) -> None:
    build(vault)
    code, report = apply_cli(vault, "the model rambled and gave no JSON")
    assert code == 4 and report["exit_code"] == 4 and report["phases"]["verify"]["ok"]
    assert "unusable answer" in report["phases"]["apply"]["error"]
    assert (vault / "brain-feed/hot-arcs.md").exists()
    result = CliRunner().invoke(app, ["apply", "--vault", str(vault), "--recommendations", str(vault / "nope.json")])
    assert result.exit_code == 2 and "Error: cannot read the recommendations" in result.stderr


def test_append_to_section_respects_fences_and_following_sections() -> None:
    body = "# t\n\n```\n## Edges\n```\n\n## Edges\n\nold\n\n## Source sessions\n\n- s1\n"
    out = append_to_section(body, "Edges", ["new"])
    assert out == "# t\n\n```\n## Edges\n```\n\n## Edges\n\nold\nnew\n\n## Source sessions\n\n- s1\n"
    assert append_to_section("# t\n", "Edges", ["e"]) == "# t\n\n## Edges\n\ne\n"
    assert append_to_section("# t\n\n## Edges\n", "Edges", ["e"]) == "# t\n\n## Edges\n\ne\n"
