"""Hypothesis: whatever the vault, a second tick at the same --now plans nothing, and nothing is lost."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.vaults import arc_text, init_vault, run_tick_json, tree_digest, write_arc

FOLDERS = ["clusters/2026-11-01", "clusters/2026-11-20", "frontal-lobe/conscious", "frontal-lobe/unconscious",
           "left/projects", "right/ideas", "pineal", "projects"]
STATUSES = ["active", "complete", "stalled", "resolved", "graduated", "merged", "abandoned"]
BODIES = [
    "",
    "<!-- @hot heat=8 -->\n",
    "<!-- @signal severity=critical source=a -->\nx\n<!-- @/signal -->\n",
    "<!-- @signal severity=resolved source=b -->\ny (CLEARED: z)\n<!-- @/signal -->\n",
    "<!-- @inject target=all -->\nremember\n<!-- @/inject -->\n",
    "<!-- @lesson -->\nl\n<!-- @/lesson -->\n<!-- @edge type=related target=q --> [[q]]\n",
    "<!-- @signal severity=warning source=c -->\nunterminated\n",
]
DATES = ["2026-11-21T11:00:00Z", "2026-11-19T00:00:00Z", "2026-11-10T00:00:00Z", "2026-09-01T00:00:00Z", None]

arc = st.fixed_dictionaries({
    "folder": st.sampled_from(FOLDERS),
    "status": st.sampled_from(STATUSES),
    "region": st.sampled_from(["left-hemisphere", "right-hemisphere", "pineal", "amygdala", "frontal-lobe", ""]),
    "sessions": st.integers(0, 5),
    "tool_calls": st.sampled_from([0, 49, 50, 200, 1000]),
    "joy": st.integers(0, 1),
    "heat": st.integers(0, 10),
    "last_active": st.sampled_from(DATES),
    "body": st.sampled_from(BODIES),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arcs=st.lists(arc, min_size=1, max_size=30), cap=st.integers(1, 5))
def test_second_tick_plans_nothing_and_arcs_are_never_lost(arcs: list[dict], cap: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        vault = init_vault(Path(tmp) / "v")
        for i, spec in enumerate(arcs):
            write_arc(vault, spec["folder"], f"2026-11-{1 + i % 28:02d}-arc-{i}-0123456789ab",
                      status=spec["status"], region=spec["region"], heat=spec["heat"],
                      sessions=[f"s{i}-{k}" for k in range(spec["sessions"])], tool_calls=spec["tool_calls"],
                      joy=spec["joy"], last_active=spec["last_active"], created=spec["last_active"],
                      body=spec["body"])
        import os

        os.environ["BRAIN_CONSCIOUS_CAP"] = str(cap)
        try:
            code, first = run_tick_json(vault)
            assert code == 0, first["problems"]
            # arcs are the cluster_id notes in the compartment folders; one in projects/ is the operator's
            # (issue 12 item 11): counted as a note, never as an arc, never edited
            assert first["stats"]["arcs"] == sum(1 for spec in arcs if spec["folder"] != "projects")
            for i, spec in enumerate(arcs):
                if spec["folder"] == "projects":
                    name = f"2026-11-{1 + i % 28:02d}-arc-{i}-0123456789ab"
                    assert (vault / "projects" / f"{name}.md").read_text() == arc_text(
                        name, status=spec["status"], region=spec["region"], heat=spec["heat"],
                        sessions=[f"s{i}-{k}" for k in range(spec["sessions"])], tool_calls=spec["tool_calls"],
                        joy=spec["joy"], last_active=spec["last_active"], created=spec["last_active"],
                        body=spec["body"])
            assert first["stats"]["conscious"] <= cap
            before = tree_digest(vault, include_state=False)
            code, second = run_tick_json(vault)
            assert code == 0
            assert second["changes"] == {"written": [], "moved": [], "deleted": []}
            after = tree_digest(vault, include_state=False)
            after.pop("brain-feed/health.jsonl"), before.pop("brain-feed/health.jsonl")
            assert after == before
            arc_files = [p for p in vault.rglob("*-0123456789ab.md")]
            assert len(arc_files) == len(arcs)
        finally:
            del os.environ["BRAIN_CONSCIOUS_CAP"]


@settings(max_examples=150, deadline=None)
@given(spec=arc, now_hours=st.integers(0, 24 * 60), frontmatter_comment=st.booleans())
def test_the_keepers_predicted_note_equals_a_real_parse(spec: dict, now_hours: int,
                                                        frontmatter_comment: bool) -> None:
    """verify trusts predicted notes for the files the keeper wrote; they must match a parse exactly."""
    import hashlib
    from datetime import UTC, datetime, timedelta

    from brain.core import keeper
    from brain.core.model import parse_note
    from brain.settings import DEFAULTS
    from tests.support.vaults import arc_text

    text = arc_text("2026-11-01-arc-0123456789ab", status=spec["status"], region=spec["region"],
                    heat=spec["heat"], sessions=[f"s{k}" for k in range(spec["sessions"])],
                    tool_calls=spec["tool_calls"], joy=spec["joy"], last_active=spec["last_active"],
                    created=spec["last_active"], body=spec["body"] + "tail text\n")
    if frontmatter_comment:
        text = text.replace("\nregion:", "\n# operator comment\nregion:", 1)
    path = f"{spec['folder']}/2026-11-01-arc-0123456789ab.md"
    data = text.encode()
    note = parse_note(path, data, size=len(data), mtime_ns=0, sha1=hashlib.sha1(data).hexdigest())
    now = datetime(2026, 9, 1, tzinfo=UTC) + timedelta(hours=now_hours)
    decision = keeper.decide([note], now, DEFAULTS).arcs.get("2026-11-01-arc-0123456789ab")
    if decision is None or not decision.changes_file:
        return
    new = keeper.render(text, decision)
    new_data = new.encode()
    predicted = keeper.predict(note, decision, text, new, new_data)
    if predicted is None:
        return
    real = parse_note(decision.path, new_data, size=len(new_data), mtime_ns=0,
                      sha1=hashlib.sha1(new_data).hexdigest())
    assert predicted == real
