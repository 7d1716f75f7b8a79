"""``brain search``: full-text recall over the vault (SPEC §15)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from brain.commands._common import UsageError, VaultOpt, require_vault, run, settings_from


def register(app: typer.Typer) -> None:
    app.command("search")(search)


def search(
    query: str = typer.Argument(..., help="Free text; quotes, dashes and colons are taken as words, "
                                "a trailing * as a prefix."),
    vault: Path = VaultOpt,
    project: str = typer.Option(None, "--project", help="Only hits from this project."),
    kind: str = typer.Option(None, "--kind", help="arc, lesson, decision, signal, todo or inject."),
    limit: int = typer.Option(10, "--limit", help="At most this many hits."),
    as_json: bool = typer.Option(False, "--json", help="Print the hits as one JSON object."),
    refresh: bool = typer.Option(False, "--refresh", help="Bring the index up to date with the vault first "
                                 "(the tick normally does)."),
) -> None:
    """Search arcs and their lessons, decisions, signals, todos and injects (BM25; heat and recency break ties).

    Each hit is one line: the arc as an Obsidian link to its cluster_id, path:line, kind, project and a snippet. A merged or split arc points to its successors. The index lives in V/.brain/search.sqlite; it is built on first use and kept current by the tick.

    Example: brain search "webhook retries" --vault ~/vault --kind lesson
    """

    def body() -> int:
        from brain.search.query import KINDS
        from brain.search.service import find

        s = settings_from(vault=vault)
        require_vault(s)
        if kind is not None and kind not in KINDS:
            raise UsageError("bad --kind", f"{kind!r}: use one of {', '.join(KINDS)}")
        if limit < 1:
            raise UsageError("bad --limit", "must be at least 1")
        hits = find(s, query, project=project, kind=kind, limit=limit, refresh=refresh)
        if as_json:
            sys.stdout.write(json.dumps({"query": query, "hits": [h.as_dict() for h in hits]}, ensure_ascii=False,
                                        indent=2) + "\n")
            return 0
        for hit in hits:
            name = f"[[{hit.cluster_id}]]" if hit.cluster_id else "-"
            after = f"  → {', '.join(f'[[{s}]]' for s in hit.successors)}" if hit.successors else ""
            sys.stdout.write(f"{name}  {hit.path}:{hit.line}  {hit.kind}  {hit.project or '-'}  {hit.snippet}{after}\n")
        return 0

    run(body)
