"""Prompt-time recall carries the concrete work of earlier arcs: their files, commands, errors and
identifiers are indexed, and a prompt that names one recalls the arc with the items it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain.io.vault import scan
from brain.search import index
from brain.search.recall import named_projects, recall_for_prompt
from brain.settings import Settings
from tests.support.vaults import write_arc

EXPORT = "2026-11-18-export-cccccccccccc"


def _arc(vault: Path, cluster_id: str, project: str, title: str, work: dict[str, list[str]], when: str) -> None:
    write_arc(vault, "clusters/" + cluster_id[:10], cluster_id, title=title, last_active=when,
              extra={"project": project, "cwd": f"/src/{project}", **work},
              body="## Timeline\n\n- one session, nothing else said here\n")


@pytest.fixture
def worked(vault: Path) -> Path:
    """Three arcs whose bodies say little; what they did is in their frontmatter work fields."""
    _arc(vault, EXPORT, "billing", "Nightly run fails", {
        "files": ["/src/billing/jobs/invoice_export.py", "/src/billing/jobs/ledger_sync.py"],
        "commands": ["uv run pytest", "python jobs/invoice_export.py --all"],
        "open_errors": ["LedgerLockTimeout"], "errors_met": ["LedgerLockTimeout", "SchemaDriftError"],
        "identifiers": ["INVOICE_BATCH_SIZE"],
    }, "2026-11-18T12:00:00Z")
    _arc(vault, "2026-11-19-webhooks-dddddddddddd", "gateway", "Webhook delivery", {
        "files": ["/src/gateway/hooks/deliver.py", "/src/gateway/hooks/retry_policy.py"],
        "commands": ["make test"],
    }, "2026-11-19T12:00:00Z")
    _arc(vault, "2026-11-20-webhooks-eeeeeeeeeeee", "gateway", "Webhook signatures", {
        "files": ["/src/gateway/hooks/deliver.py", "/src/gateway/hooks/signing.py"],
    }, "2026-11-20T12:00:00Z")
    index.rebuild(vault, scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=2_000_000,
                              write_cache=False).notes.values())
    return vault


def recall_on(vault: Path, **changes: object) -> Settings:
    """Recall on, no score floor: BM25 scores in a three-arc vault are far below an ordinary vault's."""
    return Settings(vault=vault).replace(**{"recall_on_prompt": True, "recall_min_score": 0.0, **changes})


def test_the_index_carries_an_arcs_files_commands_errors_and_identifiers(worked: Path) -> None:
    for query in ("ledger_sync.py", "LedgerLockTimeout", "SchemaDriftError", "INVOICE_BATCH_SIZE", "invoice_export"):
        hits = index.search(worked, query)
        assert hits and hits[0].cluster_id == EXPORT, query  # only the frontmatter names them
    work = dict(index.search(worked, "ledger_sync.py")[0].work)
    assert work["files"] == ("jobs/invoice_export.py", "jobs/ledger_sync.py")  # relative to the arc's cwd
    assert work["commands"] == ("uv run pytest", "python jobs/invoice_export.py --all")
    assert work["errors"] == ("LedgerLockTimeout", "SchemaDriftError")  # open first, then met (resolved)
    assert work["ids"] == ("INVOICE_BATCH_SIZE",)


def test_a_prompt_naming_a_file_recalls_the_arc_that_edited_it_with_its_work(worked: Path) -> None:
    text = recall_for_prompt(worked, "the ledger_sync step hangs again tonight", set(), recall_on(worked),
                             cwd="/src/billing")
    line = next(x for x in text.splitlines() if f"[[{EXPORT}]]" in x)
    # The concrete items an agent needs next, the prompt-named file first; not the arc's prose.
    assert line.index("`jobs/ledger_sync.py`") < line.index("`jobs/invoice_export.py`")
    assert "`python jobs/invoice_export.py --all`" in line and "`LedgerLockTimeout`" in line
    assert "nothing else said" not in text


def test_a_prompt_naming_another_project_gets_its_most_worked_on_files(worked: Path) -> None:
    prompt = "compare this with how /src/gateway does it"
    text = recall_for_prompt(worked, prompt, set(), recall_on(worked), cwd="/src/billing")
    line = next(x for x in text.splitlines() if x.startswith("- project gateway"))
    assert "(2 arcs, last 2026-11-20)" in line
    assert line.index("`hooks/deliver.py`") < line.index("`hooks/retry_policy.py`")  # two arcs before one
    # Its own project is the boot feed's business, and a shown project is not shown again.
    assert "- project gateway" not in recall_for_prompt(worked, prompt, set(), recall_on(worked), cwd="/src/gateway")
    seen: set[str] = set()
    recall_for_prompt(worked, prompt, seen, recall_on(worked), cwd="/src/billing")
    assert "- project gateway" not in recall_for_prompt(worked, prompt, seen, recall_on(worked), cwd="/src/billing")


def test_projects_are_named_by_a_separated_token_or_a_path_segment() -> None:
    known = ["claude-code-log", "project", "gateway", "site.me"]
    assert named_projects("overview of the /workspace/claude-code-log project", known) == ["claude-code-log"]
    assert named_projects("look at `gateway` and site.me", known) == ["gateway", "site.me"]
    assert named_projects("the gateway project, claude-code-logger", known) == []  # English words, other names
    assert named_projects("run test/test_cache.py in ./gateway", ["test", "gateway"]) == []  # this repo's folders
    assert named_projects("see ~/src/gateway/README.md", ["gateway"]) == ["gateway"]


def test_the_hook_recalls_work_items_through_real_sqlite(worked: Path, tmp_path: Path) -> None:
    env = {**os.environ, "BRAIN_VAULT": str(worked), "BRAIN_RECALL_ON_PROMPT": "true",
           "BRAIN_RECALL_MIN_SCORE": "0", "BRAIN_HOOK_STATE_DIR": str(tmp_path / "state"), "BRAIN_REFRESH_INTERVAL": "1000"}
    payload = json.dumps({"session_id": "s1", "cwd": "/src/billing", "prompt": "LedgerLockTimeout in ledger_sync again"})
    done = subprocess.run([sys.executable, "-m", "brain", "hook", "prompt-submit"], input=payload, text=True,
                          capture_output=True, env=env, check=True)
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"[[{EXPORT}]]" in context and "`jobs/ledger_sync.py`" in context
    assert len(context) <= Settings().recall_token_budget * 4
