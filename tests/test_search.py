"""brain search: the FTS5 index (build, refresh by change, rebuild when corrupt), ranking, escaping, recall."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from brain.cli import app
from brain.io.vault import scan
from brain.search import index
from brain.search.query import fts_query
from brain.search.recall import recall_for_prompt
from brain.settings import Settings
from tests.support.vaults import write_arc

SECRET = "sk-ant-api03-" + "Q" * 60
LESSON = "<!-- @lesson -->\nWebhook retries need jitter or the gateway melts.\n<!-- @/lesson -->\n"


def notes(vault: Path) -> list:
    return list(scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=2_000_000, write_cache=False).notes.values())


def build(vault: Path) -> index.IndexStats:
    return index.rebuild(vault, notes(vault))


@pytest.fixture
def small(vault: Path) -> Path:
    (vault / ".brain").mkdir(exist_ok=True)
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-webhooks-aaaaaaaaaaaa", title="Webhook delivery",
              extra={"project": "gateway"}, body=f"## Lessons\n\n{LESSON}\n## Resolution\n\nShipped.\n")
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-billing-bbbbbbbbbbbb", title="Billing export",
              extra={"project": "billing"},
              body="<!-- @decision date=2026-11-20 -->\nExport invoices nightly, not hourly.\n<!-- @/decision -->\n")
    return vault


def test_search_finds_a_lesson_with_its_arc_file_line_and_project(small: Path) -> None:
    build(small)
    hits = index.search(small, "webhook jitter")
    assert hits[0].kind == "lesson"
    assert hits[0].cluster_id == "2026-11-20-webhooks-aaaaaaaaaaaa"
    assert hits[0].path == "clusters/2026-11-20/2026-11-20-webhooks-aaaaaaaaaaaa.md"
    assert hits[0].project == "gateway"
    text = (small / hits[0].path).read_text().splitlines()
    assert text[hits[0].line - 1] == "<!-- @lesson -->"
    assert "jitter" in hits[0].snippet


def test_kind_and_project_filters(small: Path) -> None:
    build(small)
    assert {h.kind for h in index.search(small, "webhook", kind="arc")} == {"arc"}
    assert index.search(small, "invoices", project="gateway") == []
    assert [h.kind for h in index.search(small, "invoices", project="billing", kind="decision")] == ["decision"]


def test_only_redacted_text_reaches_the_index(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-leak-cccccccccccc", extra={"project": "p"},
              body=f"Deploy used token {SECRET} today.\n<!-- @lesson -->\nRotate {SECRET} weekly.\n<!-- @/lesson -->\n")
    build(vault)
    raw = index.db_path(vault).read_bytes()
    assert b"QQQQQQQQQQ" not in raw
    hits = index.search(vault, "rotate weekly")
    assert hits and "[REDACTED]" in hits[0].snippet


def test_tombstones_point_to_their_successors(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-old-dddddddddddd", status="merged", body="Quokka migration.\n",
              extra={"merged_into": "2026-11-20-new-eeeeeeeeeeee"})
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-split-ffffffffffff", status="split", body="Quokka parser.\n",
              extra={"split_into": ["2026-11-20-a-111111111111", "2026-11-20-b-222222222222"]})
    build(vault)
    by_id = {h.cluster_id: h for h in index.search(vault, "quokka")}
    assert by_id["2026-11-20-old-dddddddddddd"].successors == ("2026-11-20-new-eeeeeeeeeeee",)
    assert by_id["2026-11-20-split-ffffffffffff"].successors == ("2026-11-20-a-111111111111",
                                                                 "2026-11-20-b-222222222222")
    result = CliRunner().invoke(app, ["search", "quokka migration", "--vault", str(vault)])
    assert "→ [[2026-11-20-new-eeeeeeeeeeee]]" in result.stdout


def test_equal_text_ranks_hotter_then_more_recent_first(vault: Path) -> None:
    for cid, heat, last in (("2026-11-01-cold-000000000001", 1, "2026-11-20T00:00:00Z"),
                            ("2026-11-01-hot-000000000002", 8, "2026-11-01T00:00:00Z"),
                            ("2026-11-01-warm-000000000003", 1, "2026-11-21T00:00:00Z")):
        write_arc(vault, "clusters/2026-11-01", cid, title="Same words", heat=heat, last_active=last,
                  body="Identical narwhal text.\n")
    build(vault)
    assert [h.cluster_id for h in index.search(vault, "narwhal", kind="arc")] == [
        "2026-11-01-hot-000000000002", "2026-11-01-warm-000000000003", "2026-11-01-cold-000000000001"]


def test_refresh_reads_only_the_changed_files(small: Path) -> None:
    build(small)
    before = notes(small)
    path = small / "clusters/2026-11-20/2026-11-20-webhooks-aaaaaaaaaaaa.md"
    path.write_text(path.read_text().replace("jitter", "exponential backoff"))
    gone = small / "clusters/2026-11-20/2026-11-20-billing-bbbbbbbbbbbb.md"
    gone.unlink()
    stats = index.refresh(small, before, [path.relative_to(small).as_posix()],
                          [gone.relative_to(small).as_posix()])
    assert (stats.files_read, stats.files_removed, stats.rebuilt) == (1, 1, False)
    assert index.search(small, "jitter", kind="lesson") == []
    assert index.search(small, "exponential backoff", kind="lesson")
    assert index.search(small, "invoices") == []


def test_a_refresh_in_several_batches_drops_each_old_row_before_its_new_one(small: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Old rows go in bulk before each batch of new ones is written: with one file a batch, every
    edited file keeps exactly its new rows (an old row dropped after the new ones went in would take
    them too), and the index holds what a rebuild of the same files holds."""
    build(small)
    monkeypatch.setattr(index, "FLUSH_FILES", 1)
    edited = sorted(small.glob("clusters/*/*.md"))[:2]
    assert len(edited) == 2
    for path in edited:
        path.write_text(path.read_text() + "\nNarwhal sightings logged.\n")
    stats = index.refresh(small, notes(small), [p.relative_to(small).as_posix() for p in edited], [])
    assert stats.files_read == 2 and not stats.rebuilt
    found = {hit.path for hit in index.search(small, "narwhal", limit=10)}
    assert found == {p.relative_to(small).as_posix() for p in edited}

    def rows(vault: Path) -> list[tuple[str, int]]:
        with sqlite3.connect(index.db_path(vault)) as conn:
            return conn.execute("SELECT path, count(*) FROM docs GROUP BY path ORDER BY path").fetchall()

    def fts_rows(vault: Path) -> int:
        with sqlite3.connect(index.db_path(vault)) as conn:
            return int(conn.execute("SELECT count(*) FROM fts").fetchone()[0])

    refreshed, refreshed_fts = rows(small), fts_rows(small)
    index.rebuild(small, notes(small))
    assert (refreshed, refreshed_fts) == (rows(small), fts_rows(small))


def test_sync_works_out_the_change_by_content_hash(small: Path) -> None:
    build(small)
    write_arc(small, "clusters/2026-11-21", "2026-11-21-new-333333333333", body="Brand new walrus.\n")
    stats = index.sync(small, notes(small))
    assert stats.files_read == 1 and not stats.rebuilt
    assert index.search(small, "walrus")
    assert index.sync(small, notes(small)).files_read == 0  # nothing changed: nothing read


@pytest.mark.parametrize("damage", ["garbage", "truncated", "old_schema"])
def test_a_corrupt_or_outdated_index_is_rebuilt(small: Path, damage: str) -> None:
    build(small)
    db = index.db_path(small)
    if damage == "garbage":
        db.write_bytes(b"this is not sqlite" * 100)
    elif damage == "truncated":
        db.write_bytes(db.read_bytes()[:2048])
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    assert not index.exists(small)
    assert index.refresh(small, notes(small), [], []).rebuilt
    assert index.search(small, "webhook jitter")[0].kind == "lesson"


def test_brain_search_builds_a_missing_index_and_prints_rows(small: Path) -> None:
    assert not index.db_path(small).exists()
    result = CliRunner().invoke(app, ["search", "webhook jitter", "--vault", str(small)])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("[[2026-11-20-webhooks-aaaaaaaaaaaa]]  clusters/2026-11-20/2026-11-20-webhooks-aaaaaaaaaaaa.md:")
    assert "  lesson  gateway  " in first
    data = json.loads(CliRunner().invoke(app, ["search", "jitter", "--vault", str(small), "--json"]).stdout)
    assert data["hits"][0]["kind"] == "lesson"


def test_brain_search_refuses_a_bad_kind_and_limit(small: Path) -> None:
    result = CliRunner().invoke(app, ["search", "x", "--vault", str(small), "--kind", "essay"])
    assert result.exit_code == 2 and "bad --kind" in result.output
    assert CliRunner().invoke(app, ["search", "x", "--vault", str(small), "--limit", "0"]).exit_code == 2


@pytest.mark.parametrize("query", ['"', "-", "*", ":", "a:b", "NEAR(x y", "x AND", "(", "col:*", '""*"', "^x", "\x00"])
def test_fts_syntax_in_a_query_is_text(small: Path, query: str) -> None:
    build(small)
    index.search(small, query)
    index.search(small, query, any_term=True, drop_stopwords=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60))
def test_search_never_raises_on_any_text(small: Path, text: str) -> None:
    if not index.db_path(small).exists():
        build(small)
    index.search(small, text, limit=3)
    index.search(small, text, limit=3, any_term=True, drop_stopwords=True, kind="lesson", project=text or None)
    query = fts_query(text)
    assert query is None or query.count('"') % 2 == 0


def test_a_trailing_star_is_a_prefix_query(small: Path) -> None:
    build(small)
    assert index.search(small, "invoic*")
    assert index.search(small, "invoic") == [] or all("invoic" in h.snippet.lower() for h in index.search(small, "invoic"))


# --- recall at the moment of need ---------------------------------------------------------


def recall_settings(vault: Path, **changes: object) -> Settings:
    return Settings(vault=vault).replace(**{"recall_on_prompt": True, "recall_min_score": 0.0, **changes})


def test_recall_is_off_by_default(small: Path) -> None:
    build(small)
    assert recall_for_prompt(small, "why do webhook retries melt the gateway?", set(), Settings(vault=small)) == ""


def test_recall_shows_the_relevant_item_once_per_session(small: Path) -> None:
    build(small)
    seen: set[str] = set()
    s = recall_settings(small)
    first = recall_for_prompt(small, "Why do our webhook retries melt the gateway again?", seen, s)
    assert "Webhook retries need jitter" in first
    assert "[[2026-11-20-webhooks-aaaaaaaaaaaa]]" in first
    assert seen
    assert "Webhook retries need jitter" not in recall_for_prompt(small, "webhook retries gateway jitter", seen, s)


def test_recall_respects_threshold_budget_and_count(small: Path) -> None:
    build(small)
    prompt = "webhook retries jitter gateway invoices nightly"
    assert recall_for_prompt(small, prompt, set(), recall_settings(small, recall_min_score=1e9)) == ""
    assert recall_for_prompt(small, prompt, set(), recall_settings(small, recall_token_budget=10)) == ""
    one = recall_for_prompt(small, prompt, set(), recall_settings(small, recall_max_hits=1))
    assert one.count("\n- ") == 1
    assert len(recall_for_prompt(small, prompt, set(), recall_settings(small, recall_token_budget=120))) <= 480


def test_recall_without_an_index_is_silent(small: Path) -> None:
    assert recall_for_prompt(small, "webhook retries", set(), recall_settings(small)) == ""


@pytest.mark.parametrize("count", [2_000, pytest.param(10_000, marks=pytest.mark.slow)])
def test_planted_lesson_ranks_first_among_synthetic_arcs(tmp_path: Path, count: int) -> None:
    from brain.bench_search import PLANTED, PLANTED_QUERY, generate

    vault = tmp_path / "vault"
    generate(vault, count, planted_at=count * 43 // 100)
    build(vault)
    hits = index.search(vault, PLANTED_QUERY)
    assert hits[0].kind == "lesson" and hits[0].snippet == PLANTED
    assert f"-{count * 43 // 100:05d}-" in (hits[0].cluster_id or "")
    # Heat 0 on the planted arc: it wins on text alone, also as prompt-time recall.
    text = recall_for_prompt(vault, f"Is the {PLANTED_QUERY} problem known?", set(),
                             Settings(vault=vault).replace(recall_on_prompt=True))
    assert PLANTED in text



def test_prompt_submit_adds_recall_once_per_session(small: Path, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    build(small)
    env = {**os.environ, "BRAIN_VAULT": str(small), "BRAIN_RECALL_ON_PROMPT": "true", "BRAIN_RECALL_MIN_SCORE": "0",
           "BRAIN_HOOK_STATE_DIR": str(tmp_path / "state"), "BRAIN_REFRESH_INTERVAL": "1000"}

    def submit(prompt: str, session: str = "s1") -> str:
        payload = json.dumps({"session_id": session, "cwd": str(tmp_path), "prompt": prompt})
        done = subprocess.run([sys.executable, "-m", "brain", "hook", "prompt-submit"], input=payload, text=True,
                              capture_output=True, env=env, check=True)
        return done.stdout

    first = json.loads(submit("why do webhook retries melt the gateway?"))
    assert "Webhook retries need jitter" in first["hookSpecificOutput"]["additionalContext"]
    assert submit("webhook retries gateway jitter again") == ""  # already shown this session
    assert "Webhook retries need jitter" in submit("webhook retries gateway", session="s2")
    env.pop("BRAIN_RECALL_ON_PROMPT")
    assert submit("webhook retries gateway", session="s3") == ""  # off by default


def test_refresh_indexes_only_what_the_scan_calls_a_note(small: Path) -> None:
    build(small)
    feed = small / "brain-feed" / "hot-arcs.md"
    feed.parent.mkdir(exist_ok=True)
    feed.write_text("---\nid: hot\n---\n<!-- @lesson -->\nPlatypus in the feed.\n<!-- @/lesson -->\n")
    stats = index.refresh(small, notes(small), ["brain-feed/hot-arcs.md"], [])
    assert stats.files_read == 0 and index.search(small, "platypus") == []


def test_recall_lines_keep_strong_unseen_live_hits_within_the_budget() -> None:
    from brain.search.query import Hit, recall_lines

    def hit(n: int, score: float, **kw: object) -> Hit:
        return Hit(f"arc-{n}", f"clusters/a/arc-{n}.md", 3, f"snippet {n}", "lesson", "p", score, **kw)  # type: ignore[arg-type]

    hits = [hit(1, 30.0), hit(2, 20.0, successors=("arc-9",)), hit(3, 16.0), hit(4, 14.0), hit(5, 12.0)]
    lines, keys = recall_lines(hits, {"clusters/a/arc-3.md:3:lesson"}, max_hits=3, budget_chars=10_000, min_score=1.0)
    assert [k.split(":")[0] for k in keys] == ["clusters/a/arc-1.md"]  # 2 tombstone, 3 seen, 4-5 under half of 30
    assert lines == ["- lesson [[arc-1]] (clusters/a/arc-1.md:3): snippet 1"]
    four = [hit(1, 10.0), hit(2, 9.0), hit(3, 8.0), hit(4, 7.0)]
    assert len(recall_lines(four, set(), max_hits=3, budget_chars=10_000, min_score=7.5)[0]) == 3
    assert len(recall_lines(four, set(), max_hits=2, budget_chars=10_000, min_score=0.0)[0]) == 2
    assert len(recall_lines(four, set(), max_hits=9, budget_chars=10_000, min_score=8.5)[0]) == 2
    assert recall_lines([hit(1, 10.0)], set(), max_hits=3, budget_chars=20, min_score=0.0) == ([], [])


def test_a_busy_index_is_reported_not_rebuilt(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(small)
    monkeypatch.setattr(index, "BUSY_TIMEOUT_SECONDS", 0.05)
    holder = sqlite3.connect(index.db_path(small), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            index.refresh(small, notes(small), ["clusters/2026-11-20/2026-11-20-webhooks-aaaaaaaaaaaa.md"], [])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert index.search(small, "webhook jitter")  # the index it kept still answers


def test_damage_found_only_by_a_query_rebuilds_through_brain_search(small: Path) -> None:
    build(small)
    with sqlite3.connect(index.db_path(small)) as conn:
        conn.execute("DROP TABLE fts_data")  # the schema check passes; the first query fails
    assert index.exists(small)
    with pytest.raises(index.SearchIndexError):
        index.search(small, "webhook")
    result = CliRunner().invoke(app, ["search", "webhook jitter", "--vault", str(small)])
    assert result.exit_code == 0, result.output
    assert "  lesson  gateway  " in result.stdout


def test_a_heat_and_status_edit_is_retagged_in_place_not_read_again(small: Path) -> None:
    """The keeper's own heat/status edits update the index rows where they are; any other
    version of the file (someone edited it after the keeper) is read and indexed as it is."""
    build(small)
    rel = "clusters/2026-11-20/2026-11-20-webhooks-aaaaaaaaaaaa.md"
    before = {n.path: n for n in notes(small)}[rel]
    path = small / rel
    path.write_text(path.read_text().replace("heat: 0", "heat: 7").replace("status: active", "status: paused"))
    after = {n.path: n for n in notes(small)}[rel]
    stats = index.refresh(small, [after], [rel], [], retagged={rel: (before.sha1, after.sha1)})
    assert stats.files_read == 0
    with sqlite3.connect(small / ".brain" / "search.sqlite") as conn:
        assert set(conn.execute("SELECT heat, status FROM docs WHERE path = ?", (rel,))) == {(7, "paused")}
        assert conn.execute("SELECT sha1 FROM files WHERE path = ?", (rel,)).fetchone() == (after.sha1,)
    assert index.search(small, "jitter", kind="lesson")
    # edited again since: the retag does not apply, the file is read
    path.write_text(path.read_text().replace("jitter", "exponential backoff"))
    again = {n.path: n for n in notes(small)}[rel]
    stats = index.refresh(small, [again], [rel], [], retagged={rel: (after.sha1, after.sha1)})
    assert stats.files_read == 1
    assert index.search(small, "exponential backoff", kind="lesson")


MOVED_FROM = "clusters/2026-11-20/2026-11-20-webhooks-aaaaaaaaaaaa.md"
MOVED_TO = "frontal-lobe/conscious/2026-11-20-webhooks-aaaaaaaaaaaa.md"


def _promoted(vault: Path, heat: str | None) -> tuple[str, str]:
    """The index built, then an arc moved as the keeper promotes it (its heat line rewritten to
    ``heat``, or left as it is): the sha1 of its note before and after."""
    build(vault)
    before = {n.path: n for n in notes(vault)}[MOVED_FROM]
    (vault / MOVED_TO).parent.mkdir(parents=True, exist_ok=True)
    (vault / MOVED_FROM).rename(vault / MOVED_TO)
    if heat is not None:
        path = vault / MOVED_TO
        path.write_text(path.read_text().replace("heat: 0", f"heat: {heat}"))
    return before.sha1, {n.path: n for n in notes(vault)}[MOVED_TO].sha1


def test_an_arc_the_keeper_moved_keeps_its_rows_at_its_new_path_not_read_again(small: Path) -> None:
    """An arc moved with only its heat and status rewritten takes its rows to the new path (the
    old path holds none); a moved arc edited otherwise since is read and indexed as it is."""
    rel, dst, path = MOVED_FROM, MOVED_TO, small / MOVED_TO
    before, after = _promoted(small, "8")
    stats = index.refresh(small, notes(small), [dst], [rel], moved={dst: (rel, before, after)})
    assert stats.files_read == 0 and stats.files_removed == 0
    with sqlite3.connect(small / ".brain" / "search.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM docs WHERE path = ?", (rel,)).fetchone() == (0,)
        assert set(conn.execute("SELECT heat FROM docs WHERE path = ?", (dst,))) == {(8,)}
        assert dict(conn.execute("SELECT path, sha1 FROM files WHERE path IN (?, ?)", (rel, dst))) == {dst: after}
    assert {hit.path for hit in index.search(small, "jitter", kind="lesson")} == {dst}
    # moved back, and edited beyond its heat since: read, not moved in the index
    path.write_text(path.read_text().replace("jitter", "exponential backoff"))
    (small / dst).rename(small / rel)  # the keeper meant to move it back as it was (a pure move)
    stats = index.refresh(small, notes(small), [rel], [dst], moved={rel: (dst, after, after)})
    assert stats.files_read == 1
    assert {hit.path for hit in index.search(small, "exponential backoff", kind="lesson")} == {rel}


def test_a_move_the_index_cannot_follow_in_place_is_read_at_its_new_path(small: Path) -> None:
    """The old path is not among those removed (its rows are not the refresh's to move), or the
    new path already has rows: the moved file is read and indexed like any change, its rows
    never duplicated or left behind."""
    rel, dst = MOVED_FROM, MOVED_TO
    moved = {dst: (rel, *_promoted(small, None))}
    assert index.refresh(small, notes(small), [dst], [], moved=moved).files_read == 1
    with sqlite3.connect(small / ".brain" / "search.sqlite") as conn:
        rows = conn.execute("SELECT count(*) FROM docs WHERE path = ?", (dst,)).fetchone()[0]
        assert rows > 0 and conn.execute("SELECT count(*) FROM docs WHERE path = ?", (rel,)).fetchone() == (rows,)
    assert index.refresh(small, notes(small), [dst], [rel], moved=moved).files_read == 1
    with sqlite3.connect(small / ".brain" / "search.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM docs WHERE path = ?", (dst,)).fetchone() == (rows,)
        assert conn.execute("SELECT count(*) FROM docs WHERE path = ?", (rel,)).fetchone() == (0,)
