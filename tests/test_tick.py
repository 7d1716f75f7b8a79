"""`brain tick --no-ai` end to end on tmp vaults: moves, feed, invariants, bad input (SPEC §7, §9)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from brain.core import frontmatter
from tests.support.vaults import arc_text, run_tick_json, tree_digest, write_arc

GOLDEN = Path(__file__).parent / "golden"


def build_golden_vault(vault: Path) -> None:
    """A small vault exercising every feed rule; its feed is compared with tests/golden/."""
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-auth-broker-outage-0123456789ab",
              title="Auth broker outage | ban rate", sessions=["a", "b", "c"], tool_calls=1200,
              last_active="2026-11-21T09:00:00Z",
              body="<!-- @signal severity=critical source=auth-broker -->\nBan rate climbing since 08:00.\n<!-- @/signal -->\n"
                   "<!-- @lesson -->\nAlways write LITELLM_KEY unconditionally.\n<!-- @/lesson -->\n")
    write_arc(vault, "clusters/2026-11-19", "2026-11-19-feed-budget-work-0123456789ac",
              title="Feed budget work", status="active", sessions=["d"], tool_calls=60,
              last_active="2026-11-20T18:00:00Z",
              body="<!-- @inject target=claude.md -->\nBrain MVP is the top priority.\n<!-- @/inject -->\n"
                   "<!-- @signal severity=warning source=nfs -->\nNFS latency spikes.\n<!-- @/signal -->\n")
    write_arc(vault, "frontal-lobe/conscious", "2026-11-01-old-hot-arc-0123456789ad", title="Old hot arc",
              status="complete", sessions=["e"], created="2026-11-01T10:00:00Z", last_active="2026-11-10T10:00:00Z",
              heat=8)
    write_arc(vault, "clusters/2026-10-01", "2026-10-01-forgotten-idea-0123456789ae", title="Forgotten idea",
              region="right-hemisphere", status="complete", sessions=["f"], created="2026-10-01T10:00:00Z",
              last_active="2026-10-01T12:00:00Z", heat=2,
              body="<!-- @inject target=all -->\nExpired inject.\n<!-- @/inject -->\n")
    write_arc(vault, "clusters/2026-11-18", "2026-11-18-cleared-signal-0123456789af", title="Cleared signal arc",
              status="resolved", sessions=["g"], created="2026-11-18T10:00:00Z", last_active="2026-11-18T12:00:00Z",
              body="<!-- @signal severity=resolved source=db cleared_at=2026-11-20T00:00:00Z -->\n"
                   "DB failover. (CLEARED: replica promoted)\n<!-- @/signal -->\n\nOperator text stays.\n")
    (vault / "daily").mkdir(exist_ok=True)
    (vault / "daily" / "2026-11-21.md").write_text(
        "# Daily\n<!-- @signal severity=info source=standup -->\nStandup moved.\n<!-- @/signal -->\n")


def test_golden_feed_and_moves(vault: Path) -> None:
    build_golden_vault(vault)
    code, report = run_tick_json(vault)
    assert code == 0, report
    moved = {tuple(pair) for pair in report["changes"]["moved"]}
    assert ("clusters/2026-11-20/2026-11-20-auth-broker-outage-0123456789ab.md",
            "frontal-lobe/conscious/2026-11-20-auth-broker-outage-0123456789ab.md") in moved
    assert ("frontal-lobe/conscious/2026-11-01-old-hot-arc-0123456789ad.md",
            "frontal-lobe/unconscious/2026-11-01-old-hot-arc-0123456789ad.md") in moved
    assert ("clusters/2026-10-01/2026-10-01-forgotten-idea-0123456789ae.md",
            "right/ideas/2026-10-01-forgotten-idea-0123456789ae.md") in moved
    graduated = (vault / "right/ideas/2026-10-01-forgotten-idea-0123456789ae.md").read_text()
    assert "status: graduated" in graduated
    cleared = (vault / "clusters/2026-11-18/2026-11-18-cleared-signal-0123456789af.md").read_text()
    assert "@signal" not in cleared and "Operator text stays." in cleared
    for name in ("hot-arcs.md", "signals.md", "inject.md", "last-tick-diff.md"):
        actual = (vault / "brain-feed" / name).read_text()
        golden = GOLDEN / "feed" / name
        if os.environ.get("UPDATE_GOLDEN"):
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(actual)
        assert actual == golden.read_text(), f"{name} differs from {golden} (make golden to refresh after review)"
    dashboard = (vault / "clusters/2026-11-20/_dashboard.md").read_text()
    assert "[[2026-11-20-auth-broker-outage-0123456789ab]]" in dashboard and "frontal-lobe/conscious" in dashboard
    oct_dash = (vault / "clusters/2026-10-01/_dashboard.md").read_text()
    assert "right/ideas" in oct_dash  # listed wherever it lives now
    assert report["stats"]["promoted"] == 2 and report["stats"]["graduated"] == 1
    assert report["stats"]["lessons"] == 1 and report["stats"]["signals_active"] == 3


def test_feed_files_have_the_adapter_frontmatter(vault: Path) -> None:
    build_golden_vault(vault)
    run_tick_json(vault)
    for name, priority in (("hot-arcs.md", 10), ("inject.md", 9), ("signals.md", 8), ("last-tick-diff.md", 5)):
        doc = frontmatter.split((vault / "brain-feed" / name).read_text())
        meta = frontmatter.load(doc.frontmatter or "")
        assert set(meta) == {"id", "title", "priority", "ttl", "severity"}
        assert meta["priority"] == priority and meta["ttl"] == 7200
    signals = frontmatter.load(frontmatter.split((vault / "brain-feed/signals.md").read_text()).frontmatter or "")
    assert signals["severity"] == "critical"


def test_second_tick_at_the_same_now_changes_nothing(vault: Path) -> None:
    build_golden_vault(vault)
    run_tick_json(vault)
    before = tree_digest(vault, include_state=False)
    code, report = run_tick_json(vault)
    assert code == 0
    assert report["changes"] == {"written": [], "moved": [], "deleted": []}
    after = tree_digest(vault, include_state=False)
    after.pop("brain-feed/health.jsonl"), before.pop("brain-feed/health.jsonl")
    assert after == before


def test_dry_run_writes_nothing_at_all(vault: Path) -> None:
    build_golden_vault(vault)
    before = tree_digest(vault)
    code, report = run_tick_json(vault, "--dry-run")
    assert code == 0 and report["dry_run"] is True
    assert report["changes"]["moved"]  # it does plan the moves
    assert tree_digest(vault) == before
    assert not (vault / ".brain").exists() or not any((vault / ".brain").iterdir())


def test_conscious_cap_keeps_the_hottest(vault: Path) -> None:
    for i in range(25):
        write_arc(vault, "clusters/2026-11-21", f"2026-11-21-hot-{i:02d}-0123456789{i:02d}",
                  sessions=[f"s{i}-{k}" for k in range(3)], tool_calls=60 + i * 100, last_active="2026-11-21T11:00:00Z")
    code, report = run_tick_json(vault)
    assert code == 0
    conscious = sorted(p.name for p in (vault / "frontal-lobe/conscious").glob("*.md"))
    assert len(conscious) == 20 and report["stats"]["conscious"] == 20
    # the five with the fewest tool calls (lowest heat) stay behind
    assert all(f"hot-{i:02d}" not in " ".join(conscious) for i in range(2))


def test_one_file_per_arc_duplicates_are_reported_never_deleted(vault: Path) -> None:
    a = write_arc(vault, "clusters/2026-11-21", "2026-11-21-dup-0123456789ab", sessions=["a", "b", "c"],
                  tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    b = vault / "left/projects/2026-11-21-dup-0123456789ab.md"
    b.write_bytes(a.read_bytes())
    code, report = run_tick_json(vault)
    assert code == 1  # verify fails: one file per arc
    assert a.exists() and b.exists()
    assert any("held by 2 files" in p["message"] for p in report["problems"])


def test_bad_files_are_reported_and_left_byte_for_byte(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-good-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=500, last_active="2026-11-21T11:00:00Z")
    bad = {
        "clusters/2026-11-21/bad-yaml.md": b"---\ncluster_id: x\ntitle: [unclosed\n---\nbody\n",
        "clusters/2026-11-21/bad-utf8.md": b"---\ncluster_id: y\n---\n\xff\xfe broken bytes\n",
        "clusters/2026-11-21/unterminated.md": (
            arc_text("2026-11-21-unterminated-0123456789ac", sessions=["u1", "u2", "u3"], tool_calls=900,
                     last_active="2026-11-21T11:00:00Z",
                     body="<!-- @signal severity=critical source=x -->\nnever closed\n")
        ).encode(),
        "notes/huge.md": b"# big\n" + b"x" * (5 * 1024 * 1024),
        "notes/no-end.md": b"---\ntitle: no closing line\n",
    }
    for rel, data in bad.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    code, report = run_tick_json(vault)
    assert code == 0, report["problems"]
    paths = {p["path"] for p in report["problems"]}
    for rel in ("clusters/2026-11-21/bad-yaml.md", "clusters/2026-11-21/bad-utf8.md", "notes/no-end.md"):
        assert rel in paths, rel
    for rel in bad:  # a 5 MB note is parsed since notes up to max_note_bytes (64 MB) are (issue 12 item 14)
        if rel != "clusters/2026-11-21/unterminated.md":
            assert (vault / rel).read_bytes() == bad[rel], rel
    unterminated = [p for p in report["problems"] if "unterminated @signal" in p["message"]]
    assert unterminated and unterminated[0]["line"] is not None
    # the arc with the broken marker is still an arc: it moves, and its text survives byte for byte past the frontmatter
    moved = vault / "frontal-lobe/conscious/2026-11-21-unterminated-0123456789ac.md"
    assert moved.exists() and moved.read_bytes().endswith(b"<!-- @signal severity=critical source=x -->\nnever closed\n")


def test_a_file_edited_between_scan_and_write_is_not_overwritten(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_arc(vault, "clusters/2026-11-21", "2026-11-21-edited-0123456789ab", sessions=["a"], heat=0,
                     tool_calls=10, last_active="2026-11-21T11:00:00Z")
    import brain.io.writer as writer_module

    real_apply = writer_module.apply_plan

    def edit_then_apply(*args: object, **kwargs: object) -> object:
        path.write_text(path.read_text() + "\nOperator wrote this mid-tick.\n")
        monkeypatch.setattr(writer_module, "apply_plan", real_apply)
        return real_apply(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "apply_plan", edit_then_apply)
    code, report = run_tick_json(vault)
    assert "Operator wrote this mid-tick." in path.read_text()
    assert any(p["path"] == "clusters/2026-11-21/2026-11-21-edited-0123456789ab.md" and "changed since" in p["message"]
               for p in report["problems"])
    assert code == 0
    code, report = run_tick_json(vault)  # the next tick takes it up
    assert code == 0 and "heat: 6" in path.read_text() and "Operator wrote this mid-tick." in path.read_text()


def test_symlinks_out_of_the_vault_are_not_followed(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "2026-11-21-secret-0123456789ab.md").write_text(
        arc_text("2026-11-21-secret-0123456789ab", sessions=["a", "b", "c"], tool_calls=2000,
                 last_active="2026-11-21T11:00:00Z"))
    (vault / "clusters" / "link").symlink_to(outside)
    (vault / "clusters" / "file-link.md").symlink_to(outside / "2026-11-21-secret-0123456789ab.md")
    before = tree_digest(outside)
    code, report = run_tick_json(vault)
    assert code == 0 and report["stats"]["arcs"] == 0
    assert tree_digest(outside) == before


def test_a_vault_reached_through_a_link_is_read_and_ticked(vault: Path, tmp_path: Path) -> None:
    """The vault folder itself may be a link (to a synced folder): it is followed, the links inside
    it still are not."""
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-linked-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    linked = tmp_path / "linked-vault"
    linked.symlink_to(vault)
    code, report = run_tick_json(linked)
    assert code == 0 and report["stats"]["arcs"] == 1, report
    assert (vault / "frontal-lobe/conscious/2026-11-21-linked-0123456789ab.md").is_file()


def test_dot_folders_and_obsidian_are_skipped(vault: Path) -> None:
    for folder in (".obsidian", ".trash", ".hidden/deep"):
        write_arc(vault, folder, f"2026-11-21-{folder.strip('.').replace('/', '-')}-0123456789ab",
                  sessions=["a", "b", "c"], tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    code, report = run_tick_json(vault)
    assert code == 0 and report["stats"]["arcs"] == 0


def test_unchanged_files_are_not_parsed_again(vault: Path) -> None:
    for i in range(5):
        write_arc(vault, "clusters/2026-11-01", f"2026-11-01-quiet-{i}-0123456789ab", sessions=["a"],
                  created="2026-11-01T00:00:00Z", last_active="2026-11-01T00:00:00Z", status="complete")
    for path in vault.rglob("*.md"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    run_tick_json(vault)
    for path in vault.rglob("*.md"):
        if "brain-feed" not in path.parts:
            os.utime(path, (1_700_000_000, 1_700_000_000))
    run_tick_json(vault)
    touched = next(vault.rglob("2026-11-01-quiet-0-0123456789ab.md"))
    touched.write_text(touched.read_text() + "\nmore\n")
    os.utime(touched, (1_700_000_100, 1_700_000_100))
    _, report = run_tick_json(vault)
    keeper = report["phases"]["keeper"]
    assert keeper["parsed"] == 1 and keeper["cached"] == keeper["files"] - 1 > 0
    (vault / ".brain/parse-cache").write_text("{corrupt")
    os.utime(touched, (1_700_000_200, 1_700_000_200))
    _, report = run_tick_json(vault)
    assert report["phases"]["keeper"]["parsed"] == report["phases"]["keeper"]["files"]


def test_a_later_tick_takes_unchanged_arcs_heat_from_the_memo(vault: Path) -> None:
    build_golden_vault(vault)
    _, first = run_tick_json(vault)
    arcs = first["stats"]["arcs"]
    assert first["phases"]["keeper"]["remembered"] == 0  # nothing to remember yet
    # An hour later: one arc crosses its 72 h boundary and is decided afresh, the rest come from the memo.
    _, later = run_tick_json(vault, now="2026-11-21T13:00:00Z")
    assert later["stats"]["heat_changed"] == 1
    assert 0 < later["phases"]["keeper"]["remembered"] < arcs
    # An edited arc is never taken from the memo (its bytes are not the ones remembered); every other
    # arc is (those written or decided afresh an hour ago were remembered then).
    edited = next(p for p in vault.rglob("*.md") if "brain-feed" not in p.parts and not p.name.startswith("_")
                  and "cluster_id:" in p.read_text())
    edited.write_text(edited.read_text() + "\nOperator line.\n")
    _, after_edit = run_tick_json(vault, now="2026-11-21T14:00:00Z")
    assert after_edit["phases"]["keeper"]["remembered"] == arcs - 1
    # A corrupt memo is ignored: every arc decided afresh, and no arc file changes for it.
    (vault / ".brain/heat-memo").write_bytes(b"\x00garbage")
    edited.write_text(edited.read_text() + "\nAnother operator line.\n")
    code, again = run_tick_json(vault, now="2026-11-21T14:30:00Z")
    assert code == 0 and again["phases"]["keeper"]["remembered"] == 0
    assert again["stats"]["arcs"] == arcs
    assert all(p.startswith("brain-feed/") for p in again["changes"]["written"]), again["changes"]


def test_steady_state_stops_after_listing_until_something_changes(vault: Path) -> None:
    build_golden_vault(vault)
    _, first = run_tick_json(vault)
    _, steady = run_tick_json(vault)
    assert steady["phases"]["keeper"]["unchanged_since"] == first["tick_id"]
    assert steady["changes"] == {"written": [], "moved": [], "deleted": []}
    assert steady["stats"] == first["stats"]
    assert set(steady["phases"]) == set(first["phases"])  # same report shape on the fast path
    assert steady["phases"]["prompt"] == first["phases"]["prompt"]  # candidates included
    # a deleted feed file breaks the fingerprint: the tick rebuilds it
    (vault / "brain-feed/hot-arcs.md").unlink()
    _, rebuilt = run_tick_json(vault)
    assert "brain-feed/hot-arcs.md" in rebuilt["changes"]["written"]
    # an hour later one arc crosses its 72 h recency boundary: the window ended, real work again
    _, later = run_tick_json(vault, now="2026-11-21T13:00:00Z")
    assert "unchanged_since" not in later["phases"]["keeper"] and later["stats"]["heat_changed"] == 1
    # the next day is past the validity window (the feed id carries the date): full work again
    _, next_day = run_tick_json(vault, now="2026-11-22T01:00:00Z")
    assert "unchanged_since" not in next_day["phases"]["keeper"]
    assert "brain-feed/hot-arcs.md" in next_day["changes"]["written"]
    # a setting change also breaks it
    os.environ["BRAIN_HOT_ARCS_LIMIT"] = "1"
    try:
        _, limited = run_tick_json(vault, now="2026-11-22T01:00:00Z")
    finally:
        del os.environ["BRAIN_HOT_ARCS_LIMIT"]
    assert "brain-feed/hot-arcs.md" in limited["changes"]["written"]


def test_signal_tombstone_lifecycle(vault: Path) -> None:
    body = ("<!-- @signal severity=resolved source=db owner=ops cleared_at=2026-11-21T12:00:00Z -->\n"
            "DB failover. (CLEARED: replica promoted)\n<!-- @/signal -->\n")
    path = write_arc(vault, "clusters/2026-11-21", "2026-11-21-db-0123456789ab", body=body, status="resolved")
    _, _report = run_tick_json(vault, now="2026-11-21T12:00:00Z")
    assert "@signal" in path.read_text()  # the tick that cleared it: absent from the feed, block kept
    assert "DB failover" not in (vault / "brain-feed/signals.md").read_text()
    tick_report = run_tick_json(vault, now="2026-11-21T14:00:00Z")[1]
    assert "@signal" not in path.read_text()  # the next tick removes the block ...
    assert any("removed cleared signal" in line for line in (vault / "brain-feed/last-tick-diff.md").read_text().splitlines())
    from typer.testing import CliRunner

    from brain.cli import app

    result = CliRunner().invoke(app, ["undo", "--vault", str(vault), "--tick", tick_report["tick_id"]])
    assert result.exit_code == 0, result.output
    assert "@signal" in path.read_text()  # ... recoverably


def test_operator_notes_are_never_moved_or_edited(vault: Path) -> None:
    note = vault / "projects" / "plan.md"
    note.parent.mkdir()
    original = "---\ntitle: plan\nheat: 3\n---\n<!-- @hot heat=9 -->\n<!-- @lesson -->\nx\n<!-- @/lesson -->\n"
    note.write_text(original)
    pinned = write_arc(vault, "projects", "2026-11-21-pinned-0123456789ab", sessions=["a", "b", "c"],
                       tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    code, report = run_tick_json(vault)
    assert code == 0 and note.read_text() == original
    assert pinned.exists()  # an arc the operator filed outside the compartments stays where it is
    assert report["stats"]["lessons"] == 1


def test_feed_stays_within_budget_and_keeps_critical_signals(vault: Path) -> None:
    for i in range(40):
        body = "".join(
            f"<!-- @signal severity={sev} source=src-{i}-{sev} -->\n{'long text ' * 20}\n<!-- @/signal -->\n"
            for sev in ("info", "warning")
        )
        body += f"<!-- @inject target=all -->\n{'inject text ' * 30}\n<!-- @/inject -->\n"
        write_arc(vault, "clusters/2026-11-21", f"2026-11-21-busy-{i:02d}-0123456789ab", body=body,
                  sessions=["a", "b"], last_active="2026-11-21T11:00:00Z")
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-fire-0123456789ab", sessions=["z"],
              body="<!-- @signal severity=nuclear source=prod-db -->\nProduction DB is down.\n<!-- @/signal -->\n"
                   "<!-- @signal severity=critical source=auth -->\nAuth failing.\n<!-- @/signal -->\n")
    code, report = run_tick_json(vault)
    assert code == 0, report["phases"]["verify"]
    total = sum(len(p.read_text()) for p in (vault / "brain-feed").glob("*.md"))
    assert total / 4 <= 2000
    signals = (vault / "brain-feed/signals.md").read_text()
    assert "Production DB is down." in signals and "Auth failing." in signals
    assert "more not shown (feed budget)" in signals
    hot = (vault / "brain-feed/hot-arcs.md").read_text()
    assert hot.count("| [[") >= 3


def test_tick_id_and_report_shape(vault: Path) -> None:
    build_golden_vault(vault)
    _code, report = run_tick_json(vault)
    assert set(report) == {"tick_id", "now", "dry_run", "no_ai", "phases", "stats", "changes", "rejected",
                           "problems", "exit_code"}
    assert set(report["phases"]) == {"keeper", "prompt", "llm", "apply", "verify"}
    assert report["phases"]["llm"] == {"skipped": "--no-ai"}
    for key in ("arcs", "promoted", "demoted", "graduated", "heat_changed", "signals_active", "inject_blocks",
                "lessons", "edges"):
        assert isinstance(report["stats"][key], int)
    rows = [json.loads(line) for line in (vault / "brain-feed/health.jsonl").read_text().splitlines()]
    assert rows[-1]["tick_id"] == report["tick_id"] and rows[-1]["arcs"] == report["stats"]["arcs"]
    assert rows[-1]["score"] is None and rows[-1]["cost_usd"] is None
    assert report["changes"]["written"] and not any(".brain" in p or "health.jsonl" in p
                                                    for p in report["changes"]["written"])


def edit_right_after_a_tick_keeping_size_and_mtime(vault: Path) -> None:
    """A tick, then its signal's source edited from ``aaaa`` to ``bbbb`` with the file's size and
    mtime as the tick left them (an edit within the file system's timestamp granularity)."""
    path = write_arc(vault, "clusters/2026-11-21", "2026-11-21-racy-0123456789ab", sessions=["a"],
                     status="complete", body="<!-- @signal severity=warning source=aaaa -->\nx\n<!-- @/signal -->\n")
    run_tick_json(vault)
    path = next(vault.rglob("2026-11-21-racy-0123456789ab.md"))
    st = path.stat()
    path.write_text(path.read_text().replace("source=aaaa", "source=bbbb"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_a_same_size_same_mtime_edit_right_after_a_tick_is_still_seen(vault: Path) -> None:
    """Racily clean cache entries (mtime as new as the cache) are confirmed by a content hash."""
    edit_right_after_a_tick_keeping_size_and_mtime(vault)
    (vault / ".brain/tick-state.json").unlink()  # take the full path, to exercise the parse cache
    run_tick_json(vault)
    assert "`bbbb`" in (vault / "brain-feed/signals.md").read_text()


def test_a_same_size_same_mtime_edit_right_after_a_tick_is_seen_by_the_quiet_tick_too(vault: Path) -> None:
    """The quiet tick's view (no full scan) confirms its racily clean notes by a content hash as well."""
    edit_right_after_a_tick_keeping_size_and_mtime(vault)
    _, report = run_tick_json(vault, now="2026-11-23T12:00:00Z")  # past the last plan's validity: no fast path
    assert "`bbbb`" in (vault / "brain-feed/signals.md").read_text()
    assert report["stats"]["signals_active"] == 1


# --- issue 12: confinement of the tick's own folders, dates out of range, operator folders ----------

def test_a_brain_feed_folder_linking_out_of_the_vault_is_refused_not_followed(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "signals.md").write_text("someone else's file\n")
    (outside / "health.jsonl").write_text('{"row": 1}\n')
    before = tree_digest(outside)
    (vault / "brain-feed").rmdir()
    (vault / "brain-feed").symlink_to(outside)
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-hot-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=2000, last_active="2026-11-21T11:00:00Z",
              body="<!-- @signal severity=critical source=x -->\nfire\n<!-- @/signal -->\n")
    code, report = run_tick_json(vault)
    assert tree_digest(outside) == before  # not a byte written through the link, health.jsonl included
    refused = [p for p in report["problems"] if p["path"].startswith("brain-feed/")]
    assert any("refused" in p["message"] for p in refused), report["problems"]
    assert any("health.jsonl" in p["path"] for p in report["problems"])
    assert report["changes"]["moved"]  # the arcs themselves are still kept
    assert code == 0


def test_a_state_folder_linking_out_of_the_vault_is_refused(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "state-elsewhere"
    outside.mkdir()
    shutil.rmtree(vault / ".brain")
    (vault / ".brain").symlink_to(outside)
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-hot-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    before = tree_digest(vault)
    code, _ = run_tick_json(vault)
    assert code == 2  # a usage error naming the unsafe folder, not an unexpected crash
    assert not any(outside.iterdir())  # no lock, journal or cache outside the vault
    assert tree_digest(vault) == before


def test_a_dated_cluster_folder_linking_out_of_the_vault_is_never_written(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path / "dated-elsewhere"
    outside.mkdir()
    (outside / "_dashboard.md").write_text("not the brain's\n")
    before = tree_digest(outside)
    (vault / "clusters" / "2026-11-21").symlink_to(outside)
    # an arc of that date living elsewhere makes the keeper want clusters/2026-11-21/_dashboard.md
    write_arc(vault, "left/projects", "2026-11-21-filed-0123456789ab", sessions=["a"], status="graduated",
              created="2026-11-21T01:00:00Z", last_active="2026-11-21T02:00:00Z")
    code, report = run_tick_json(vault)
    assert tree_digest(outside) == before
    assert any(p["path"] == "clusters/2026-11-21/_dashboard.md" and "refused" in p["message"]
               for p in report["problems"]), report["problems"]
    assert code == 0


def test_a_date_in_year_9999_is_reported_never_an_overflow(vault: Path) -> None:
    path = write_arc(vault, "clusters/2026-11-21", "2026-11-21-far-0123456789ab", sessions=["a", "b"],
                     created="2026-11-21T01:00:00Z", last_active="9999-12-31T23:59:59Z")
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-near-0123456789ab", sessions=["a"],
              created="9999-12-31T00:00:00Z", last_active="2026-11-21T10:00:00Z")
    code, report = run_tick_json(vault)
    assert code == 0, report["problems"]
    far = [p for p in report["problems"] if p["path"].endswith("2026-11-21-far-0123456789ab.md")]
    assert far and "last_active '9999-12-31T23:59:59Z' is outside the years" in far[0]["message"]
    assert any("created '9999-12-31T00:00:00Z'" in p["message"] for p in report["problems"])
    # the far arc falls back to its created date: 11 h old, recent heat, not "just now forever"
    moved = next(vault.rglob(path.name))
    assert frontmatter.load(frontmatter.split(moved.read_text()).frontmatter or "")["heat"] == 7
    code, again = run_tick_json(vault, now="2026-11-23T12:00:00Z")
    assert code == 0 and again["stats"]["arcs"] == 2


def test_a_cluster_id_note_outside_the_compartments_is_the_operators(vault: Path) -> None:
    """Issue 12 item 11 (SPEC §3): markers count, never edited, moved or listed as an arc."""
    template = vault / "templates" / "arc-template.md"
    template.parent.mkdir()
    template.write_text(arc_text("2026-11-21-template-0123456789ab", heat=0, sessions=["a", "b", "c"],
                                 tool_calls=2000, last_active="2026-11-21T11:00:00Z",
                                 body="<!-- @lesson -->\nTemplates teach.\n<!-- @/lesson -->\n"))
    original = template.read_bytes()
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-template-0123456789ab", sessions=["x"],
              last_active="2026-11-21T11:00:00Z")  # the same id in a compartment: not a duplicate
    for now in ("2026-11-21T12:00:00Z", "2026-11-25T12:00:00Z"):
        code, report = run_tick_json(vault, now=now)
        assert code == 0, report["problems"]
        assert template.read_bytes() == original
        assert report["stats"]["arcs"] == 1 and report["stats"]["lessons"] == 1
        assert not any("templates/" in p for p in report["changes"]["written"])


def test_the_scan_delta_names_changed_and_removed_notes(vault: Path) -> None:
    """What a post-scan step (the search index) refreshes: notes new or edited since the last scan, and gone."""
    from brain.core.timeutil import require_instant
    from brain.pipeline.tick import run_tick
    from brain.settings import Settings

    keep = write_arc(vault, "clusters/2026-11-01", "2026-11-01-keep-0123456789ab", sessions=["a"],
                     status="complete", created="2026-11-01T00:00:00Z", last_active="2026-11-01T00:00:00Z")
    gone = write_arc(vault, "clusters/2026-11-01", "2026-11-01-gone-0123456789ab", sessions=["b"],
                     status="complete", created="2026-11-01T00:00:00Z", last_active="2026-11-01T00:00:00Z")
    s = Settings(vault=vault)
    now = require_instant("2026-11-02T00:00:00Z")
    first = run_tick(s, now, no_ai=True, dry_run=False)
    assert {keep.relative_to(vault).as_posix(), gone.relative_to(vault).as_posix()} <= set(first.delta.changed)
    gone.unlink()
    note = vault / "daily" / "today.md"
    note.parent.mkdir()
    note.write_text("# today\n")
    (vault / ".brain" / "tick-state.json").unlink()
    second = run_tick(s, now, no_ai=True, dry_run=False)
    assert second.delta.changed == ("daily/today.md",)
    assert second.delta.removed == (gone.relative_to(vault).as_posix(),)
    # with what the tick itself wrote: the dashboard that no longer lists the gone arc; no feed file
    whole = second.notes_changed()
    assert "clusters/2026-11-01/_dashboard.md" in whole.changed and "daily/today.md" in whole.changed
    assert not any(p.startswith("brain-feed/") for p in whole.changed)
    assert whole.removed == (gone.relative_to(vault).as_posix(),)


def test_an_arc_edited_between_the_scan_and_its_read_is_left_for_the_next_tick(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_arc(vault, "clusters/2026-11-21", "2026-11-21-late-0123456789ab", sessions=["a"], heat=0,
                     tool_calls=10, last_active="2026-11-21T11:00:00Z", status="complete")
    os.utime(path, (1_700_000_000, 1_700_000_000))
    code, _ = run_tick_json(vault, now="2026-11-21T11:30:00Z")  # the parse cache knows the file now
    assert code == 0
    import brain.pipeline.tick as tick_module

    real = tick_module.read_texts

    def edit_then_read(*args: object, **kwargs: object) -> object:
        path.write_text(path.read_text() + "\nOperator wrote this after the scan.\n")
        monkeypatch.setattr(tick_module, "read_texts", real)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tick_module, "read_texts", edit_then_read)
    code, report = run_tick_json(vault, now="2026-11-25T12:00:00Z")
    assert code == 0, report["problems"]  # verify does not count it as a failed second pass
    assert any(p["path"] == "clusters/2026-11-21/2026-11-21-late-0123456789ab.md"
               and "changed since the scan" in p["message"] for p in report["problems"])
    assert "Operator wrote this after the scan." in path.read_text()
    code, report = run_tick_json(vault, now="2026-11-25T12:00:00Z")  # the next tick takes it up
    assert code == 0 and "Operator wrote this after the scan." in path.read_text()
    assert "heat: 0" not in path.read_text()


def test_the_parse_cache_gives_back_exactly_what_a_parse_gives(vault: Path) -> None:
    from brain.io.vault import scan

    build_golden_vault(vault)
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-odd-0123456789ab", sessions=["a"],
              extra={"files": ["a.py", "b.py"], "last_prompt": "go on"},
              body="<!-- @todo priority=2 -->\nx\n<!-- @/todo -->\n<!-- @signal severity=warning -->\nunterminated\n")
    for path in vault.rglob("*.md"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    parsed = scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=10**8, write_cache=True)
    cached = scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=10**8, write_cache=False)
    assert parsed.stats.parsed == len(parsed.notes) and cached.stats.cached == len(cached.notes) > 5
    assert dict(cached.notes) == dict(parsed.notes)
    assert [hash(m) for n in cached.notes.values() for m in n.markers] == [
        hash(m) for n in parsed.notes.values() for m in n.markers]


def test_the_parse_cache_is_written_in_frames_and_one_cut_short_is_parsed_again(
        vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from brain.io import vault as vault_module
    from brain.io.vault import scan

    monkeypatch.setattr(vault_module, "FRAME_ROWS", 2)  # several frames from a few notes
    build_golden_vault(vault)
    for path in vault.rglob("*.md"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    parsed = scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=10**8, write_cache=True)
    cache = vault / vault_module.CACHE_FILE
    data = cache.read_bytes()
    assert len(parsed.notes) > 5 and data.count(vault_module.CACHE_KEY.encode()) == 1
    cached = scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=10**8, write_cache=False)
    assert cached.stats.cached == len(cached.notes) and dict(cached.notes) == dict(parsed.notes)
    # The last frame lost (a disk full, a copy cut short), or the file cut inside a frame:
    # nothing is taken from it, every note is parsed again, nothing raises.
    frames, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at:at + 8], "little")
        frames.append(data[at:at + 8 + size])
        at += 8 + size
    assert len(frames) > 3
    for damaged in (b"".join(frames[:-1]), data[: len(data) // 2], data + b"\x01"):
        cache.write_bytes(damaged)
        again = scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=10**8, write_cache=False)
        assert again.stats.cached == 0 and dict(again.notes) == dict(parsed.notes)


def test_the_old_rows_of_a_few_edited_files_are_read_from_their_frames_alone(
        vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from brain.io import vault as vault_module
    from brain.io.vault import cached_notes, scan

    monkeypatch.setattr(vault_module, "FRAME_ROWS", 2)
    build_golden_vault(vault)
    for path in vault.rglob("*.md"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    parsed = scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=10**8, write_cache=True)
    paths = sorted(parsed.notes)
    wanted = {paths[0]: (parsed.notes[paths[0]].size, parsed.notes[paths[0]].mtime_ns)}
    cache = vault / vault_module.CACHE_FILE
    data = bytearray(cache.read_bytes())
    # The last frame damaged (its marshal bytes, not its length): a full load refuses the file, the
    # first path's row still comes back, read from the first frame only.
    data[-2:] = b"\xff\xff"
    cache.write_bytes(bytes(data))
    assert vault_module._read_cache(vault) == ({}, 0)
    assert cached_notes(vault, wanted) == {paths[0]: parsed.notes[paths[0]]}
    # A path whose frame holds another version: no note rather than a wrong one.
    assert cached_notes(vault, {paths[0]: (1, 2)}) is None


def test_a_deleted_or_edited_dashboard_is_rebuilt_though_its_arcs_are_unchanged(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-01", "2026-11-01-quiet-0123456789ab", sessions=["a"], status="complete",
              created="2026-11-01T00:00:00Z", last_active="2026-11-01T00:00:00Z")
    run_tick_json(vault)
    dashboard = vault / "clusters/2026-11-01/_dashboard.md"
    good = dashboard.read_text()
    dashboard.unlink()
    _, report = run_tick_json(vault, now="2026-11-21T12:30:00Z")
    assert dashboard.read_text() == good and "clusters/2026-11-01/_dashboard.md" in report["changes"]["written"]
    dashboard.write_text("scribbled\n")
    run_tick_json(vault, now="2026-11-21T13:00:00Z")
    assert dashboard.read_text() == good


def test_a_few_changed_notes_go_to_the_cache_overlay_and_load_back_exactly(vault: Path) -> None:
    from brain.io import vault as vault_module
    from brain.io.vault import scan

    build_golden_vault(vault)
    for path in vault.rglob("*.md"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    feed_dir = vault / "brain-feed"
    scan(vault, feed_dir=feed_dir, max_note_bytes=10**8, write_cache=True)
    base = (vault / vault_module.CACHE_FILE).read_bytes()
    edited = next(p for p in vault.rglob("*.md") if "cluster_id:" in p.read_text())
    edited.write_text(edited.read_text() + "\n<!-- @lesson -->\nAn operator lesson.\n<!-- @/lesson -->\n")
    os.utime(edited, (1_700_000_100, 1_700_000_100))
    first = scan(vault, feed_dir=feed_dir, max_note_bytes=10**8, write_cache=True)
    assert first.stats.parsed == 1
    assert (vault / vault_module.CACHE_FILE).read_bytes() == base  # the base is not rewritten for one note
    assert (vault / vault_module.OVERLAY_FILE).exists()
    again = scan(vault, feed_dir=feed_dir, max_note_bytes=10**8, write_cache=False)
    assert again.stats.parsed == 0 and dict(again.notes) == dict(first.notes)
    # A corrupt overlay costs only a re-parse of what it held.
    (vault / vault_module.OVERLAY_FILE).write_bytes(b"\x00not marshal")
    damaged = scan(vault, feed_dir=feed_dir, max_note_bytes=10**8, write_cache=False)
    assert damaged.stats.parsed == 1 and dict(damaged.notes) == dict(first.notes)


def test_the_cache_overlay_never_applies_one_vaults_base_to_another(tmp_path: Path) -> None:
    from brain.io import vault as vault_module
    from brain.io.vault import save_cache, scan
    from tests.support.vaults import init_vault

    first, second = init_vault(tmp_path / "a"), init_vault(tmp_path / "b")
    for root in (first, second):
        write_arc(root, "clusters/2026-11-20", "2026-11-20-one-0123456789ab", sessions=["a"])
    other = scan(second, feed_dir=second / "brain-feed", max_note_bytes=10**8, write_cache=False)  # B: no cache
    scan(first, feed_dir=first / "brain-feed", max_note_bytes=10**8, write_cache=True)
    scan(first, feed_dir=first / "brain-feed", max_note_bytes=10**8, write_cache=False)  # A's base is the one loaded
    save_cache(second, other.notes)
    assert not (second / vault_module.OVERLAY_FILE).exists()  # a base of its own, never an overlay on A's
    again = scan(second, feed_dir=second / "brain-feed", max_note_bytes=10**8, write_cache=False)
    assert again.stats.cached == len(again.notes) > 0


def test_confinement_holds_for_every_file_bound_for_a_folder_not_made_yet(tmp_path: Path) -> None:
    """The writer caches a proven folder for the rest of a plan, a missing one too (a cold tick
    moves thousands of arcs into left/projects/): each file is still checked and refused alike."""
    from brain.io.atomic import ConfinementError, confined

    vault, outside = tmp_path / "vault", tmp_path / "outside"
    (vault / "left").mkdir(parents=True)
    outside.mkdir()
    (vault / "right").symlink_to(outside)
    verified: set[str] = set()
    for name in ("a.md", "b.md"):  # the second comes from the cache
        assert confined(vault, f"left/projects/{name}", verified) == vault / "left" / "projects" / name
        with pytest.raises(ConfinementError):
            confined(vault, f"right/ideas/{name}", verified)
    (vault / "left" / "projects").mkdir()
    (vault / "left" / "projects" / "c.md").symlink_to(outside / "c.md")
    with pytest.raises(ConfinementError, match="symbolic link"):
        confined(vault, "left/projects/c.md", verified)
    for bad in ("left/../../x.md", "../x.md", "/etc/x.md", "left/\x00.md", ""):
        with pytest.raises(ConfinementError):
            confined(vault, bad, verified)
    assert confined(vault, "left/./projects/d.md", verified) == vault / "left" / "projects" / "d.md"


def test_verify_reads_back_what_is_on_disk_not_what_the_tick_meant_to_write(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verify keeps its in-memory note only for a file whose bytes are the ones written: a file
    changed right after the write is parsed as it is (a broken one fails verify), and the search
    index, built from the bytes verify read, holds what the disk holds."""
    from brain.search import index

    edited = write_arc(vault, "clusters/2026-11-21", "2026-11-21-edited-after-0123456789ab", sessions=["a"],
                       heat=0, tool_calls=10, last_active="2026-11-21T11:00:00Z")
    broken = write_arc(vault, "clusters/2026-11-21", "2026-11-21-broken-after-0123456789ac", sessions=["b"],
                       heat=0, tool_calls=10, last_active="2026-11-21T11:00:00Z")
    import brain.io.writer as writer_module

    real_apply = writer_module.apply_plan

    def apply_then_edit(*args: object, **kwargs: object) -> object:
        result = real_apply(*args, **kwargs)  # type: ignore[arg-type]
        assert edited.read_text().count("heat: 6") == 1  # the tick's own bytes went in
        edited.write_text(edited.read_text() + "\n<!-- @lesson -->\nZanzibar quokkas prefer late ticks.\n"
                                                "<!-- @/lesson -->\n")
        broken.write_text("---\ncluster_id: 2026-11-21-broken-after-0123456789ac\ntitle: [unclosed\n---\nBody.\n")
        monkeypatch.setattr(writer_module, "apply_plan", real_apply)
        return result

    monkeypatch.setattr(writer_module, "apply_plan", apply_then_edit)
    code, report = run_tick_json(vault)
    assert code == 1
    assert any(p["path"] == "clusters/2026-11-21/2026-11-21-broken-after-0123456789ac.md"
               and "does not parse" in p["message"] for p in report["phases"]["verify"]["failures"])
    hits = index.search(vault, "Zanzibar quokkas")
    assert [(h.path, h.kind) for h in hits] == [("clusters/2026-11-21/2026-11-21-edited-after-0123456789ab.md",
                                                 "lesson")]


def _indexed(vault: Path) -> dict[str, str]:
    import sqlite3

    with sqlite3.connect(vault / ".brain" / "search.sqlite") as conn:
        return dict(conn.execute("SELECT path, sha1 FROM files").fetchall())


def _on_disk(vault: Path) -> dict[str, str]:
    import hashlib

    return {p.relative_to(vault).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in vault.rglob("*.md") if not any(part.startswith(".") or part == "brain-feed"
                                                     for part in p.relative_to(vault).parts)}


def test_the_search_index_follows_a_later_tick_from_its_changes_alone_unless_it_was_touched(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick on the files the last one left, with the index it left, refreshes only what it
    changed (no pass over every indexed path); an index someone else changed since is compared
    whole, so nothing it lost stays lost."""
    import sqlite3

    import brain.search.index as index_module

    for n, day in enumerate(("2026-11-21", "2026-11-18", "2026-11-10")):
        write_arc(vault, f"clusters/{day}", f"{day}-work-{n}-0123456789a{n}", sessions=[f"s{n}"], heat=0,
                  tool_calls=10, last_active=f"{day}T11:00:00Z")
    (vault / "daily").mkdir()
    (vault / "daily" / "notes.md").write_text("# Notes\n<!-- @lesson -->\nPin the resolver.\n<!-- @/lesson -->\n")
    assert run_tick_json(vault)[0] == 0
    assert _indexed(vault) == _on_disk(vault)

    def no_full_pass(*args: object, **kwargs: object) -> object:
        raise AssertionError("the index was compared whole")

    with monkeypatch.context() as patched:
        patched.setattr(index_module, "sync", no_full_pass)
        code, report = run_tick_json(vault, now="2026-11-23T12:00:00Z")  # heat falls: arcs are rewritten
    assert code == 0 and report["changes"]["written"]
    assert _indexed(vault) == _on_disk(vault)

    lost = "daily/notes.md"  # the operator's: no tick rewrites it
    assert lost in _indexed(vault)
    with sqlite3.connect(vault / ".brain" / "search.sqlite") as conn:  # another writer drops a file's rows
        conn.execute("DELETE FROM files WHERE path = ?", (lost,))
    code, _ = run_tick_json(vault, now="2026-11-26T12:00:00Z")
    assert code == 0 and _indexed(vault) == _on_disk(vault)


def test_a_tick_that_rewrote_feed_files_leaves_a_state_the_next_tick_recognises(vault: Path) -> None:
    """The fingerprint of the state leaves out the writer's temp files (an old image of
    projects/index.json waiting to be unlinked): the next tick on the same files stops after
    listing them, as an unchanged vault should."""
    for n, day in enumerate(("2026-11-21", "2026-11-18")):
        write_arc(vault, f"clusters/{day}", f"{day}-work-{n}-0123456789a{n}", sessions=[f"s{n}"], heat=0,
                  tool_calls=10, last_active=f"{day}T11:00:00Z", extra={"project": "gateway"})
    assert run_tick_json(vault)[0] == 0
    code, report = run_tick_json(vault, now="2026-11-23T12:00:00Z")  # heat falls: the feed is rewritten
    assert code == 0 and report["changes"]["written"]
    code, report = run_tick_json(vault, now="2026-11-23T12:00:00Z")
    assert code == 0 and report["phases"]["keeper"].get("unchanged_since") is not None


@pytest.mark.timeout(30)
def test_a_named_pipe_in_the_feed_folder_never_holds_the_tick(vault: Path) -> None:
    """The tick counts the tokens of every file in brain-feed/, and verify reads them again:
    a named pipe there waited for a writer forever (the CronJob's tick with it)."""
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-hot-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    os.mkfifo(vault / "brain-feed" / "extra.md")
    code, report = run_tick_json(vault)
    assert code == 0, report.get("problems")
    assert (vault / "brain-feed" / "hot-arcs.md").is_file()


@pytest.mark.timeout(30)
def test_named_pipes_in_place_of_the_state_files_never_hold_a_run(vault: Path) -> None:
    from datetime import UTC, datetime

    from brain.pipeline.extract import extract
    from brain.settings import Settings

    write_arc(vault, "clusters/2026-11-21", "2026-11-21-hot-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    assert run_tick_json(vault)[0] == 0
    for name in ("tick-state.json", "parse-cache", "heat-memo", "tick-view", "extract-cursor.json"):
        (vault / ".brain" / name).unlink(missing_ok=True)
        os.mkfifo(vault / ".brain" / name)
    journal = vault / ".brain" / "journal" / "20250101T000000Z-tick"
    journal.mkdir(parents=True)
    os.mkfifo(journal / "manifest.json")
    code, report = run_tick_json(vault, now="2026-11-21T14:00:00Z")
    assert code == 0, report.get("problems")  # each state file is a cache: recomputed, never waited on
    assert any(p["path"] == ".brain/journal/20250101T000000Z-tick" and "not a regular file" in p["message"]
               for p in report["problems"]), report["problems"]  # a journal's manifest: damage, reported
    settings = Settings(projects_dir=vault / "none", codex_dir=vault / "none", gemini_dir=vault / "none",
                        opencode_dir=vault / "none")
    extract(settings, datetime(2026, 11, 21, 14, tzinfo=UTC), cursor=vault / ".brain" / "extract-cursor.json")



@pytest.mark.parametrize("name", ["tick-state.json", "tick-listing"])
def test_a_folder_in_place_of_the_tick_state_is_reported_and_the_tick_goes_on(vault: Path, name: str) -> None:
    """The state a tick leaves for the next is a cache: a folder where it goes (it cannot be
    replaced) costs the next tick its shortcut, reported with its path, never the tick itself."""
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-hot-0123456789ab", sessions=["a", "b", "c"],
              tool_calls=2000, last_active="2026-11-21T11:00:00Z")
    assert run_tick_json(vault)[0] == 0
    state = vault / ".brain" / name
    state.unlink()
    state.mkdir()
    code, report = run_tick_json(vault, now="2026-11-21T14:00:00Z")
    assert code == 0, report["problems"]
    assert [p for p in report["problems"] if "state not saved" in p["message"]] == [
        {"path": f".brain/{name}", "line": None,
         "message": "tick state not saved (Is a directory); the next tick does the whole work"}]
    assert report["changes"]["written"]  # the heat change and the feed were written all the same
    assert state.is_dir()  # never removed: not the tick's to delete
    state.rmdir()
    code, report = run_tick_json(vault, now="2026-11-21T16:00:00Z")
    assert code == 0 and not report["problems"], report["problems"]
    assert (vault / ".brain" / name).is_file()


def test_the_writers_worker_threads_try_every_item_and_raise_the_first_failure() -> None:
    """Parallel fsyncs and background unlinks run on plain threads (no concurrent.futures and
    the logging it imports in every tick process), with ThreadPoolExecutor.map's contract."""
    import threading

    from brain.io.workers import Workers, run_all

    done: list[int] = []
    lock = threading.Lock()

    def step(item: int) -> None:
        with lock:
            done.append(item)
        if item in (7, 3):
            raise OSError(f"item {item}")

    with pytest.raises(OSError, match="item 3"):
        run_all(step, list(range(20)), 4)
    assert sorted(done) == list(range(20))
    workers = Workers(2, "test")
    for item in range(10):
        workers.submit(step, item)
    errors = workers.wait()
    assert sorted(str(e) for e in errors) == ["item 3", "item 7"] and sorted(done) == sorted([*range(20), *range(10)])
    assert workers.wait() == []
