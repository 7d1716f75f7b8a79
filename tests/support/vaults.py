"""Small helpers that build vaults in tmp_path for tests and the bench."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import yaml

from brain.core.vocab import COMPARTMENTS

NOW = "2026-11-21T12:00:00Z"


def init_vault(root: Path) -> Path:
    for rel in (*COMPARTMENTS, ".brain"):  # what `brain init` creates; commands refuse a folder without it
        (root / rel).mkdir(parents=True, exist_ok=True)
    return root


def arc_text(
    cluster_id: str,
    *,
    title: str | None = None,
    region: str = "left-hemisphere",
    status: str = "active",
    heat: int = 0,
    created: str | None = "2026-11-20T10:00:00Z",
    last_active: str | None = "2026-11-20T12:00:00Z",
    sessions: list[str] | None = None,
    tool_calls: int = 10,
    joy: int = 0,
    body: str = "",
    extra: dict[str, Any] | None = None,
    legacy: bool = False,
) -> str:
    meta: dict[str, Any] = {"cluster_id": cluster_id, "title": title or cluster_id, "region": region,
                            "status": status, "heat": heat}
    if created is not None:
        meta["created"] = created
    if last_active is not None:
        meta["last_active"] = last_active
    meta["source_sessions"] = sessions if sessions is not None else [f"{cluster_id}-s1"]
    if legacy:
        meta["signals"] = {"errors": 0, "joy": joy, "tools": tool_calls}
    else:
        meta["activity"] = {"sessions": len(meta["source_sessions"]), "user_turns": 5, "tool_calls": tool_calls,
                            "errors": 0, "joy": joy, "compactions": 0}
    meta.update(extra or {})
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    return f"---\n{front}---\n# {meta['title']}\n\n{body}"


def write_arc(vault: Path, folder: str, cluster_id: str, **kwargs: Any) -> Path:
    path = vault / folder / f"{cluster_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(arc_text(cluster_id, **kwargs), encoding="utf-8")
    return path


def tree_digest(root: Path, *, include_state: bool = True) -> dict[str, str]:
    """path -> sha1 of every file under ``root`` (``.brain`` included unless told otherwise)."""
    out: dict[str, str] = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        if not include_state and ".brain" in Path(dirpath).relative_to(root).parts[:1]:
            continue
        for name in filenames:
            path = Path(dirpath) / name
            out[path.relative_to(root).as_posix()] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def run_tick_json(vault: Path, *args: str, now: str = NOW) -> tuple[int, dict[str, Any]]:
    from typer.testing import CliRunner

    from brain.cli import app

    result = CliRunner().invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--json", "--now", now, *args])
    data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, data


def write_mixed_arcs(vault: Path, count: int = 24) -> None:
    """``count`` arcs in ``clusters/``, every sixth hot (a tick promotes it: moved and rewritten), each with a lesson."""
    for i in range(count):
        hot = i % 6 == 0  # promoted: moved to frontal-lobe/conscious and rewritten
        write_arc(vault, f"clusters/2026-11-{1 + i % 20:02d}", f"2026-11-01-lean-{i:03d}-0123456789ab",
                  sessions=[f"s{i}-{k}" for k in range(4 if hot else 1)], tool_calls=900 if hot else 10 + i,
                  last_active="2026-11-21T11:00:00Z" if hot else f"2026-11-{1 + i % 20:02d}T09:00:00Z",
                  body=f"Work {i}.\n\n<!-- @lesson -->\nLesson {i}.\n<!-- @/lesson -->\n")
