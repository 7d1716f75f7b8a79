"""The brain-feed a tick writes: per-project files and their index, no filler, the budget cut
of critical signals, scripted runs below real work, bad ``ttl_days`` (SPEC §7, §12; issue 11
items 3-4, issue 12 items 6 and 12)."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from brain.core import feed, keeper
from brain.core.model import WORK_LIST_ITEMS, Note, parse_note
from brain.core.project_feed import SHOWN_ARCS, decides, is_question
from brain.settings import Settings
from tests.support.vaults import run_tick_json, write_arc

GOLDEN = Path(__file__).parent / "golden" / "projects"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def work(**keys: Any) -> dict[str, Any]:
    return {"project": "alpha", "cwd": "/home/u/src/alpha", **keys}


def build_project_vault(vault: Path) -> None:
    """Two projects and an operator note: every section of a project feed, and what crosses over."""
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-fix-the-importer-0123456789a1", title="Fix the importer",
              sessions=["a1", "a2"], tool_calls=240, created="2026-11-21T08:00:00Z",
              last_active="2026-11-21T10:30:00Z",
              extra=work(branch="fix/importer",
                         files=["lib/importer.py", "lib/parse.py", "tests/test_importer.py", "/tmp/scratch.txt"],
                         commands=["uv run pytest", "uv run ruff"],
                         open_errors=["KeyError: 'rows'\\n  in parse_rows"],
                         identifiers=["parse_rows", "ALPHA-42"],
                         last_prompt="now make the CSV path handle empty files"),
              body="## Lessons\n\n<!-- @lesson source=a1:12 -->\n`uv run pytest` failed with KeyError; fixed by "
                   "editing `lib/parse.py`.\n<!-- @/lesson -->\n"
                   "<!-- @decision date=2026-11-21 -->\nKeep the importer streaming; no pandas.\n<!-- @/decision -->\n"
                   "<!-- @todo priority=2 -->\nHandle empty CSV files\n<!-- @/todo -->\n"
                   "<!-- @todo priority=1 -->\nRe-run the nightly import\n<!-- @/todo -->\n"
                   "<!-- @signal severity=warning source=ci -->\nCI is flaky on the importer tests.\n<!-- @/signal -->\n"
                   "<!-- @inject target=claude.md -->\nRun `uv run pytest -x` before committing.\n<!-- @/inject -->\n")
    write_arc(vault, "clusters/2026-11-19", "2026-11-19-importer-schema-0123456789a2", title="Importer schema",
              sessions=["a3"], tool_calls=80, created="2026-11-19T09:00:00Z", last_active="2026-11-19T11:00:00Z",
              extra=work(cwd="/home/u/src/alpha/lib", branch="main",
                         files=["lib/schema.py", "lib/importer.py"], commands=["uv run pytest", "make lint"],
                         identifiers=["SchemaV2"], open_errors=["ValidationError: bad date"]))
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-reply-with-hello-0123456789a3", title="Reply with HELLO",
              sessions=["a4"], tool_calls=1, created="2026-11-21T11:00:00Z", last_active="2026-11-21T11:00:20Z",
              extra={**work(files=["hello.txt"]),
                     "activity": {"sessions": 1, "user_turns": 1, "tool_calls": 1, "errors": 0, "joy": 0,
                                  "compactions": 0}})
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-beta-outage-0123456789b1", title="Beta outage",
              sessions=["b1", "b2", "b3"], tool_calls=600, created="2026-11-20T08:00:00Z",
              last_active="2026-11-20T20:00:00Z",
              extra={"project": "beta", "cwd": "/srv/beta", "files": ["cmd/server.go"], "commands": ["go test"]},
              body="<!-- @signal severity=critical source=beta-db -->\nBeta primary DB refuses writes.\n<!-- @/signal -->\n"
                   "<!-- @signal severity=info source=beta-ci -->\nBeta nightly build slower.\n<!-- @/signal -->\n"
                   "<!-- @inject target=all -->\nFreeze deploys until Monday.\n<!-- @/inject -->\n"
                   "<!-- @inject target=claude.md -->\nBeta only: use go 1.23.\n<!-- @/inject -->\n")
    (vault / "daily").mkdir(exist_ok=True)
    (vault / "daily" / "2026-11-21.md").write_text(
        "# Daily\n<!-- @inject target=claude.md -->\nThe operator is on call today.\n<!-- @/inject -->\n")


def test_golden_project_feeds(vault: Path) -> None:
    build_project_vault(vault)
    code, report = run_tick_json(vault)
    assert code == 0, report
    folder = vault / "brain-feed" / "projects"
    written = sorted(p.name for p in folder.iterdir())
    assert written == ["alpha.md", "beta.md", "index.json"]
    for name in written:
        actual = (folder / name).read_text()
        golden = GOLDEN / name
        if os.environ.get("UPDATE_GOLDEN"):
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(actual)
        assert actual == golden.read_text(), f"{name} differs from {golden} (make golden to refresh after review)"


def project_feed(vault: Path, name: str = "alpha") -> str:
    return (vault / "brain-feed" / "projects" / f"{name}.md").read_text()


def test_a_project_file_is_rendered_again_only_when_what_it_reads_changed() -> None:
    notes = [arc_note("2026-11-20-one-0123456789e1", "<!-- @lesson -->\nPin the CSV dialect.\n<!-- @/lesson -->\n",
                      files=["lib/a.py"]),
             arc_note("2026-11-20-two-0123456789e2", project="beta", files=["cmd/b.go"])]
    first = build(notes)
    inputs = {f.name: f.inputs for f in first.files if f.inputs}
    assert sorted(inputs) == ["projects/alpha.md", "projects/beta.md"]
    # A text the build could never make, under the same digest: taken as it is, not rendered.
    before = {name: (key, f"kept {name}\n") for name, key in inputs.items()}
    later = datetime(2026, 11, 21, 18, 0, tzinfo=UTC)  # hours later, heat decayed: nothing a project file reads
    again = feed.build_feed(feed.FeedInputs(notes=tuple(notes), decisions=keeper.decide(notes, later, Settings()).arcs,
                                            now=later, settings=Settings(), built_before=before))
    assert rendered(again, "projects/alpha.md") == "kept projects/alpha.md\n"
    # An arc's lesson changes: its project is rendered again, the other one is not.
    edited = [arc_note("2026-11-20-one-0123456789e1", "<!-- @lesson -->\nPin the CSV dialect to excel.\n"
                       "<!-- @/lesson -->\n", files=["lib/a.py"]), notes[1]]
    changed = feed.build_feed(feed.FeedInputs(notes=tuple(edited), decisions=keeper.decide(edited, NOW, Settings()).arcs,
                                              now=NOW, settings=Settings(), built_before=before))
    assert "Pin the CSV dialect to excel." in rendered(changed, "projects/alpha.md")
    assert rendered(changed, "projects/beta.md") == "kept projects/beta.md\n"
    # Another day (the file's id carries the date), or other settings: rendered again.
    for inputs_changed in (feed.FeedInputs(notes=tuple(notes), decisions=keeper.decide(notes, NOW, Settings()).arcs,
                                           now=datetime(2026, 11, 22, 9, 0, tzinfo=UTC), settings=Settings(),
                                           built_before=before),
                           feed.FeedInputs(notes=tuple(notes), decisions=keeper.decide(notes, NOW, Settings()).arcs,
                                           now=NOW, settings=Settings(feed_token_budget=900), built_before=before)):
        assert rendered(feed.build_feed(inputs_changed), "projects/beta.md").startswith("---\n")


def test_the_project_index_is_built_again_only_when_what_it_reads_changed() -> None:
    """``projects/index.json`` says when it was generated, so it is written every tick; built from
    the same inputs, the text an earlier build wrote is taken with the new time, not built again.
    What it reads of a project's first arcs (their files, cwd, branch) and of each recorded cwd's
    latest arcs (their project, last activity, branch) builds it again."""
    index = "projects/index.json"
    many = SHOWN_ARCS + 2

    def notes_with(last_cwd: str, first_files: tuple[str, ...] = ("lib/a.py",)) -> list[Note]:
        return [arc_note(f"2026-11-20-arc-{i:02d}-0123456789{i:02d}", files=list(first_files) if i == 0 else [],
                         cwd=last_cwd if i == many - 1 else "/home/u/src/alpha",
                         last_active=f"2026-11-21T{10 - i // 10:02d}:{59 - i % 60:02d}:00Z")
                for i in range(many)] + [arc_note("2026-11-20-two-0123456789e2", project="beta", cwd="/srv/beta")]

    def built(notes: list[Note], now: datetime, before: dict[str, tuple[str, str]]) -> tuple[str, str | None]:
        made = feed.build_feed(feed.FeedInputs(notes=tuple(notes), decisions=keeper.decide(notes, now, Settings()).arcs,
                                               now=now, settings=Settings(), built_before=before))
        found = next(f for f in made.files if f.name == index)
        return found.render(), found.stamped_inputs

    notes = notes_with("/home/u/src/alpha")
    text, key = built(notes, NOW, {})
    assert key is not None and json.loads(text)["generated"] == "2026-11-21T12:00:00Z"
    # A text the build could never make, under the same digest: taken, with this build's time.
    kept = json.dumps({**json.loads(text), "kept": True}, indent=1, sort_keys=True) + "\n"
    later = datetime(2026, 11, 21, 18, 0, tzinfo=UTC)  # hours later, heat decayed: nothing the index reads
    again, again_key = built(notes, later, {index: (key, kept)})
    assert again_key == key and json.loads(again) == {**json.loads(kept), "generated": "2026-11-21T18:00:00Z"}
    # The cwd of the project's last arc (past the arcs its file shows), or a file of its first: built again.
    for changed in (notes_with("/home/u/src/alpha-old"), notes_with("/home/u/src/alpha", ("lib/b.py",))):
        fresh, fresh_key = built(changed, later, {index: (key, kept)})
        assert fresh_key != key and "kept" not in json.loads(fresh)
    # Taken or built, the same index.
    assert json.loads(built(notes, later, {})[0]) == {k: v for k, v in json.loads(again).items() if k != "kept"}


def test_the_project_index_a_quiet_tick_builds_is_the_one_the_full_tick_built() -> None:
    """A quiet tick reads each project's first arcs and newest, and each recorded cwd's latest
    arcs (:func:`brain.core.project_feed.shown_arcs`): from those alone the index's inputs digest
    is the one the full build had, so the first quiet tick after a full one takes the index as
    it was. A later arc that becomes its cwd's latest builds it again."""
    index = "projects/index.json"
    many = SHOWN_ARCS + 4

    def notes_with(late: str) -> list[Note]:
        return [arc_note(f"2026-11-20-arc-{i:02d}-0123456789{i:02d}", files=["lib/a.py"] if i == 0 else [],
                         cwd="/srv/old" if i == many - 1 else "/home/u/src/alpha", branch="main" if i % 2 else None,
                         last_active=late if i == many - 2 else f"2026-11-21T{10 - i // 10:02d}:{59 - i % 60:02d}:00Z")
                for i in range(many)] + [arc_note("2026-11-20-two-0123456789e2", project="beta", cwd="/srv/old")]

    def key(notes: list[Note]) -> tuple[str | None, frozenset[str]]:
        made = build(notes)
        return next(f for f in made.files if f.name == index).stamped_inputs, made.reads

    notes = notes_with("2026-11-19T08:00:00Z")
    full, reads = key(notes)
    read = [note for note in notes if note.arc is not None and note.arc.cluster_id in reads]
    assert len(read) < len(notes)  # the quiet tick leaves arcs out
    assert key(read)[0] == full
    # The arc the quiet tick left out is now its cwd's latest (a later session there): built again.
    assert key(notes_with("2026-11-21T11:30:00Z"))[0] != full


DIGEST = """
import sys
from brain.core.project_feed import digest_of
name = sys.intern("alpha") if sys.argv[1] == "interned" else "".join(["al", "pha"])
shared = "lib/a.py"
print(digest_of((name, "projects/alpha.md", 1.5, 10**18, None, True, [(shared, shared, name)],
                 {"cwd": "/home/u", "files": (shared,)}, ("ünïcode", "\\ud800"))))
"""


def test_an_inputs_digest_is_the_same_in_every_process() -> None:
    """A feed file's inputs digest is kept in the tick state and compared by the next tick, in
    another process: the same values give the same digest whatever the process's string hashing,
    and whether equal strings are one object (interned, shared) or several."""
    import subprocess
    import sys

    from brain.core.project_feed import digest_of

    runs = {subprocess.run([sys.executable, "-c", DIGEST, how], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
            for how, seed in (("interned", "1"), ("built", "2"), ("built", "3"))}
    here = digest_of(("alpha", "projects/alpha.md", 1.5, 10**18, None, True, [("lib/a.py", "lib/a.py", "alpha")],
                      {"cwd": "/home/u", "files": ("lib/a.py",)}, ("ünïcode", "\ud800")))
    assert runs == {here}
    assert digest_of(("alpha", 1.5)) != digest_of(("alpha", 1.50001)) != digest_of(["alpha", 1.5])


def test_a_tick_reuses_project_files_it_wrote_and_never_one_edited_since(vault: Path) -> None:
    build_project_vault(vault)
    assert run_tick_json(vault)[0] == 0
    alpha = vault / "brain-feed" / "projects" / "alpha.md"
    fresh = alpha.read_text()
    state = json.loads((vault / ".brain" / "tick-state.json").read_text())
    assert state["feed_inputs"]["projects/alpha.md"][1] == hashlib.sha1(fresh.encode()).hexdigest()
    # Two hours later the same text, taken from the file, not rendered (the same bytes a full build makes).
    assert run_tick_json(vault, now="2026-11-21T14:00:00Z")[0] == 0
    assert alpha.read_text() == fresh
    # An edit to the feed file: never taken for the tick's own text; the next tick writes its own again.
    alpha.write_text(fresh.replace("where we left off", "EDITED"))
    assert run_tick_json(vault, now="2026-11-21T16:00:00Z")[0] == 0
    assert alpha.read_text() == fresh


def test_hostile_feed_entries_in_the_tick_state_are_never_read_or_taken(tmp_path: Path) -> None:
    from brain.pipeline.tick_state import feed_before

    feed_dir = tmp_path / "vault" / "brain-feed"
    (feed_dir / "projects").mkdir(parents=True)
    (feed_dir / "projects" / "a.md").write_text("mine\n")
    (tmp_path / "secret.md").write_text("outside\n")
    sha = hashlib.sha1(b"outside\n").hexdigest()
    state = {"feed_inputs": {"../../secret.md": ["k", sha], "/etc/passwd": ["k", sha], "projects/b.md": "k",
                             "projects/c.md": ["k"], "projects/a.md": ["k", hashlib.sha1(b"other\n").hexdigest()],
                             "projects/d.md": [1, 2]}}
    assert feed_before(feed_dir, state) == {}
    assert feed_before(feed_dir, {"feed_inputs": "garbage"}) == {}
    good = {"feed_inputs": {"projects/a.md": ["k", hashlib.sha1(b"mine\n").hexdigest()]}}
    assert feed_before(feed_dir, good) == {"projects/a.md": ("k", "mine\n")}


def test_project_feed_sections_in_order_and_what_crosses_projects(vault: Path) -> None:
    build_project_vault(vault)
    run_tick_json(vault)
    alpha = project_feed(vault)
    headings = ["# alpha: where we left off", "## Signals", "## Recent work here", "## Lessons and decisions",
                "## Used here recently", "## Injected context"]
    assert [alpha.index(h) for h in headings] == sorted(alpha.index(h) for h in headings)
    handoff = alpha[: alpha.index("## Signals")]
    assert "fix/importer" in handoff and "now make the CSV path handle empty files" in handoff
    assert handoff.index("Re-run the nightly import") < handoff.index("Handle empty CSV files")  # priority 1 first
    assert "KeyError: 'rows' in parse_rows" in handoff and "`lib/importer.py`" in handoff
    assert "/tmp/scratch.txt" not in alpha  # an agent's scratch file is not work
    assert "Beta primary DB refuses writes." in alpha  # critical from another project
    assert "Beta nightly build slower." not in alpha  # info from another project stays there
    assert "Freeze deploys until Monday." in alpha and "The operator is on call today." in alpha
    assert "Beta only: use go 1.23." not in alpha  # another project's own inject
    assert "`uv run pytest`" in alpha and "`make lint`" in alpha and "`SchemaV2`" in alpha
    # error names, older arcs included; KeyError is not repeated: the lesson and the handoff say it
    assert "; errors seen: `ValidationError`\n" in alpha and "KeyError`" not in alpha.split("errors seen:")[1]
    assert "Keep the importer streaming" in alpha and "fixed by editing `lib/parse.py`" in alpha
    beta = project_feed(vault, "beta")
    assert "CI is flaky" not in beta and "Fix the importer" not in beta


def test_index_maps_projects_and_recorded_cwds(vault: Path) -> None:
    build_project_vault(vault)
    run_tick_json(vault)
    index = json.loads((vault / "brain-feed/projects/index.json").read_text())
    assert index["projects"]["alpha"]["file"] == "projects/alpha.md"
    # the newest arc, the one-shot "Reply with HELLO" run listed after real work too: the vault holds it
    assert index["projects"]["alpha"]["last_active"] == "2026-11-21T11:00:20Z"
    assert index["roots"] == {"/home/u/src/alpha": "alpha", "/home/u/src/alpha/lib": "alpha", "/srv/beta": "beta"}
    assert index["holders"] == []
    assert index["generated"] == "2026-11-21T12:00:00Z" and index["ttl"] == 7200


def test_folders_a_project_worked_on_from_beside_them_are_indexed() -> None:
    from brain.core.project_feed import sibling_folder

    assert sibling_folder("X:/acg/Odoo_Docker/docker-compose.yml", "X:/acg/Odoo_Docs") == "X:/acg/Odoo_Docker"
    assert sibling_folder("/w/src/app/lib/a.py", "/w/src/docs") == "/w/src/app"
    assert sibling_folder("lib/a.py", "/w/src/docs") == ""  # inside the repository
    assert sibling_folder("/w/src/docs/lib/a.py", "/w/src/docs") == ""
    assert sibling_folder("/usr/lib/python3/os.py", "/home/u/app") == ""  # only the root is shared
    assert sibling_folder("C:/Users/me/.claude/memory/MEMORY.md", "X:/acg/Odoo_Docs") == ""  # another drive
    assert sibling_folder("/home/u/.claude/projects/x/MEMORY.md", "/home/u/app") == ""  # a hidden folder
    assert sibling_folder("/w/src/notes.md", "/w/src/docs") == ""  # a file, not a folder, beside the repo


def test_the_index_names_the_folders_of_projects() -> None:
    from brain.core.project_feed import folders_of_projects

    roots = {"/home/n/work": "work", "/home/n/work/libnn": "libnn", "/home/n/work/sim": "sim",
             "/home/n/work/sim/docs": "sim", "/w/mono": "mono", "/w/mono/packages": "packages",
             "/w/mono/packages/app": "app", "/srv/a": "a", "/srv/a/b": "b"}
    # ~/work holds two other projects and no session there was on a branch; a repository (its
    # latest session on a branch) holds its packages' projects but stays one; one other is not two
    assert folders_of_projects(roots, {"/w/mono", "/home/n/work/libnn"}) == ["/home/n/work"]
    assert folders_of_projects(roots, set()) == ["/home/n/work", "/w/mono"]


def test_a_session_in_a_new_folder_of_a_folder_of_projects_gets_the_project_its_name_names(vault: Path) -> None:
    """Ticked, then asked as Claude Code asks: a session once started in ~/work (no branch) does
    not make ~/work/libnn_baseline its project; a repository's new folder stays the repository's."""
    from typer.testing import CliRunner

    from brain.cli import app

    for cid, project, cwd, branch in (("2026-11-20-work-0123456789c1", "work", "/home/n/work", None),
                                      ("2026-11-20-libnn-0123456789c2", "libnn", "/home/n/work/libnn", "main"),
                                      ("2026-11-20-sim-0123456789c3", "sim", "/home/n/work/sim", "main")):
        write_arc(vault, "clusters/2026-11-20", cid, title=f"{project} work",
                  extra=work(cwd=cwd, branch=branch, files=[f"{project}.c"], last_prompt=f"tune {project}",
                             project=project))
    code, _ = run_tick_json(vault)
    assert code == 0
    index = json.loads((vault / "brain-feed/projects/index.json").read_text())
    assert index["holders"] == ["/home/n/work"]

    def first_line(cwd: str) -> str:
        result = CliRunner().invoke(app, ["hook", "session-start", "--brain-feed", str(vault / "brain-feed"),
                                          "--format", "text"], input=json.dumps({"session_id": "x", "cwd": cwd}),
                                    env={"BRAIN_NOW": "2026-11-21T12:30:00Z"})
        assert result.exit_code == 0, result.stderr
        return result.stdout.split("\n", 1)[0]

    assert first_line("/home/n/work/libnn_baseline").startswith("# This folder (`libnn_baseline`) looks like")
    assert "`libnn`" in first_line("/home/n/work/libnn_baseline")
    assert first_line("/home/n/work/Alioth").startswith("# `Alioth` is new")
    assert first_line("/home/n/work/libnn/tests") == "# libnn: where we left off"


def test_the_index_names_the_folders_each_project_worked_on_from_beside_them() -> None:
    from types import SimpleNamespace

    from brain.core.project_feed import touched_folders

    def arc(cwd: str, *files: str) -> Any:
        return SimpleNamespace(arc=SimpleNamespace(cwd=cwd, files=files))

    by_project = {
        "docs": [arc("X:\\acg\\docs", "X:/acg/docker/compose.yml", "X:/acg/docker/nginx/n.conf", "X:/acg/addons/a.py"),
                 arc("X:\\acg\\docs", "X:/acg/addons/a.py", "X:/acg/beta/x.py", "X:/acg/beta/y.py")],
        "beta": [arc("X:\\acg\\beta", "b.py")],
    }
    # two files or more, and never a folder with sessions of its own
    assert touched_folders(by_project, {"X:/acg/docs": "docs", "X:/acg/beta": "beta"}) == {"X:/acg/docker": "docs"}
    # Below the cwd too, two levels deep: a monorepo's packages; never a hidden folder.
    mono = {"mono": [arc("/w/mono", "packages/app/src/a.vue", "/w/mono/packages/app/b.vue", ".github/x.yml",
                         ".github/y.yml", "README.md")]}
    assert touched_folders(mono, {"/w/mono": "mono"}) == {"/w/mono/packages": "mono", "/w/mono/packages/app": "mono"}
    # A folder right in a home where no file lies right in it is one of the home's containers (a
    # cloud drive, ~/src) holding every other project: the claim is the folder below it the
    # sessions worked in, whether from beside it or from the home itself. One with files of its
    # own is a repository kept in the home, claimed as it is.
    home = {"docs": [arc("C:\\Users\\me\\docs", "C:/Users/me/OneDrive/Vault/notes/a.md", "C:/Users/me/OneDrive/Vault/b.md",
                         "C:/Users/me/kit/.claude/c.md", "C:/Users/me/kit/.claude/d.md")],
            # another user's home beside this one's: never claimed itself, only the work below it
            "cfg": [arc("C:\\Users\\you\\.claude", "C:/Users/me/e.md", "C:/Users/me/f.md", "C:/Users/me/site/g.md",
                        "C:/Users/me/site/h.md")],
            "tool": [arc("/home/me/tool", "/home/me/src/app/x.py", "/home/me/src/app/lib/y.py")],
            "me": [arc("/home/me", "Documents/site/a.md", "Documents/site/b/c.md",
                       "/home/me/M-Claude/CLAUDE.md", "/home/me/M-Claude/notes.md")]}
    assert touched_folders(home, {"C:/Users/me/docs": "docs", "/home/me/tool": "tool", "/home/me": "me",
                                  "C:/Users/you/.claude": "cfg"}) == {
        "/home/me/Documents/site": "me", "/home/me/M-Claude": "me", "/home/me/src/app": "tool",
        "C:/Users/me/OneDrive/Vault": "docs", "C:/Users/me/kit": "docs", "C:/Users/me/site": "cfg"}
    # The index is read by every hook: a folder is shown redacted, and it is a recorded cwd when
    # its redacted form is one (the cwds are recorded redacted).
    token = "ghp_" + "a1B2c3D4e5" * 4
    secret = {"docs": [arc("/w/docs", f"/w/{token}/lib/a.py", f"/w/{token}/lib/b.py")],
              "x": [arc(f"/w/{token}/x", "a/b.py", "a/c.py")]}
    assert touched_folders(secret, {"/w/[REDACTED]/x": "x"}) == {"/w/[REDACTED]": "docs", "/w/[REDACTED]/x/a": "x"}
    assert touched_folders(secret, {"/w/[REDACTED]": "x"}) == {"/w/[REDACTED]/x/a": "x"}


def test_scripted_one_shot_runs_rank_below_real_work(vault: Path) -> None:
    build_project_vault(vault)
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-say-ok-0123456789a5", title="Say OK",
              sessions=["s1", "s2", "s3"], tool_calls=3000, created="2026-11-21T11:30:00Z",
              last_active="2026-11-21T11:30:30Z", heat=10,
              extra={**work(), "activity": {"sessions": 3, "user_turns": 1, "tool_calls": 3000, "errors": 0,
                                            "joy": 0, "compactions": 0}})
    run_tick_json(vault)
    hot = (vault / "brain-feed/hot-arcs.md").read_text()
    rows = [line for line in hot.splitlines() if line.startswith("| [[")]
    assert "say-ok" in rows[-1] or "reply-with-hello" in rows[-1]
    assert rows.index(next(r for r in rows if "say-ok" in r)) > rows.index(next(r for r in rows if "beta-outage" in r))
    alpha = project_feed(vault)
    assert "Fix the importer" in alpha[: alpha.index("## Signals")]  # the handoff is real work, not the newest run
    recent = alpha[alpha.index("## Recent work here"): alpha.index("## Lessons")]
    assert "Importer schema" in recent and "Say OK" not in recent  # the row goes to real work, not the newer run


def test_no_filler_lines_and_no_diff_line_per_move(vault: Path) -> None:
    write_arc(vault, "clusters/2026-09-01", "2026-09-01-old-a-0123456789c1", created="2026-09-01T10:00:00Z",
              last_active="2026-09-01T10:00:00Z", status="complete", heat=1)
    write_arc(vault, "clusters/2026-09-01", "2026-09-01-old-b-0123456789c2", created="2026-09-01T10:00:00Z",
              last_active="2026-09-01T10:00:00Z", status="complete", heat=1)
    code, _ = run_tick_json(vault)
    assert code == 0
    folder = vault / "brain-feed"
    for name in ("inject.md", "signals.md", "hot-arcs.md"):
        text = (folder / name).read_text()
        assert text.startswith("---\n") and text.endswith("---\n") and text.count("---\n") == 2, name
    diff = (folder / "last-tick-diff.md").read_text()
    assert "- 2 graduated" in diff and "graduated [[" not in diff
    everything = "".join(p.read_text() for p in folder.rglob("*.md"))
    for filler in ("Nothing to inject.", "No open signals.", "(no arcs yet)", "Nothing changed."):
        assert filler not in everything


# --- core: the budget cut and bad values ----------------------------------------------------


def note_of(path: str, text: str) -> Note:
    data = text.encode()
    return parse_note(path, data, size=len(data), mtime_ns=0, sha1=hashlib.sha1(data).hexdigest())


def arc_note(cluster_id: str, body: str = "", project: str = "alpha", **meta: Any) -> Note:
    front = {"cluster_id": cluster_id, "title": cluster_id, "status": "active", "created": "2026-11-20T10:00:00Z",
             "last_active": "2026-11-21T10:00:00Z", "project": project, "source_sessions": ["s"], **meta}
    lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in front.items())
    return note_of(f"clusters/2026-11-20/{cluster_id}.md", f"---\n{lines}---\n# T\n\n{body}")


def build(notes: list[Note], **settings: Any) -> feed.BuiltFeed:
    s = Settings(**settings)
    decisions = keeper.decide(notes, NOW, s)
    return feed.build_feed(feed.FeedInputs(notes=tuple(notes), decisions=decisions.arcs, now=NOW, settings=s))


def rendered(built: feed.BuiltFeed, name: str) -> str:
    return next(f.render() for f in built.files if f.name == name)


def test_sixty_critical_signals_are_shortened_before_any_is_dropped_and_drops_are_counted() -> None:
    body = "".join(
        f"<!-- @signal severity=critical source=svc-{i:02d} -->\nService {i:02d} {'is failing badly ' * 12}\n"
        f"<!-- @/signal -->\n" for i in range(60)
    )
    body += "<!-- @signal severity=nuclear source=core -->\nCore cluster lost quorum.\n<!-- @/signal -->\n"
    notes = [arc_note("2026-11-20-fire-0123456789d1", body)]
    for budget in (2000, 800):
        built = build(notes, feed_token_budget=budget)
        signals = rendered(built, "signals.md")
        assert sum(feed.tokens(f.render()) for f in built.files if f.budgeted) <= budget
        assert "Core cluster lost quorum." in signals
        critical = [line for line in signals.splitlines() if line.startswith("- **CRITICAL**")]
        short = [line for line in critical if "[[" not in line and len(line) <= 120]
        dropped = 60 - len(critical)
        if budget == 2000:  # shortening alone makes them fit: all 60 are there
            assert dropped == 0 and short and "more critical signal" not in signals
        else:  # every one is shortened before any is dropped, and the drops are counted
            assert dropped > 0 and short == critical
            assert f"{dropped} more critical signal{'s' if dropped != 1 else ''} in the vault" in signals
        project = rendered(built, "projects/alpha.md")
        assert feed.tokens(project) <= budget and "Core cluster lost quorum." in project


def test_few_critical_signals_keep_their_full_line() -> None:
    body = "<!-- @signal severity=critical source=db -->\nPrimary slow.\n<!-- @/signal -->\n"
    signals = rendered(build([arc_note("2026-11-20-db-0123456789d2", body)]), "signals.md")
    assert "- **CRITICAL** `db` in [[2026-11-20-db-0123456789d2]]: Primary slow." in signals


def test_equally_severe_signals_list_the_latest_work_first_whatever_the_clock() -> None:
    # Newest arc first among equals, at any instant: the order is a fact of the files, so
    # signals.md and every project file listing them are not rewritten as heat decays.
    old = arc_note("2026-11-01-old-0123456789d4", "<!-- @signal severity=critical source=old -->\nOld fire.\n"
                   "<!-- @/signal -->\n", last_active="2026-11-21T02:00:00Z",
                   activity={"sessions": 9, "user_turns": 200, "tool_calls": 5000, "errors": 9})
    new = arc_note("2026-11-21-new-0123456789d5", "<!-- @signal severity=critical source=new -->\nNew fire.\n"
                   "<!-- @/signal -->\n", last_active="2026-11-21T10:00:00Z",
                   activity={"sessions": 1, "user_turns": 1, "tool_calls": 1})
    orders = []
    for now in (NOW, datetime(2026, 11, 28, 12, 0, tzinfo=UTC)):
        decisions = keeper.decide([old, new], now, Settings())
        built = feed.build_feed(feed.FeedInputs(notes=(old, new), decisions=decisions.arcs, now=now,
                                                settings=Settings()))
        signals = rendered(built, "signals.md")
        orders.append((signals.index("New fire."), signals.index("Old fire.")))
        project = rendered(built, "projects/alpha.md")
        assert project.index("New fire.") < project.index("Old fire.")
    assert all(new_at < old_at for new_at, old_at in orders)


def test_a_signal_with_cleared_at_is_not_open_in_the_feed() -> None:
    # The one open-signal rule (Marker.is_open_signal): cleared_at closes a signal even when an
    # edit left its severity as it was, in the feed as in the prompt, the applier and heat.
    body = ("<!-- @signal severity=critical source=db cleared_at=2026-11-21T09:00:00Z -->\nPrimary slow.\n"
            "<!-- @/signal -->\n<!-- @signal severity=critical source=api -->\nGateway down.\n<!-- @/signal -->\n")
    built = build([arc_note("2026-11-20-db-0123456789d3", body)])
    signals = rendered(built, "signals.md")
    assert "Gateway down." in signals and "Primary slow." not in signals
    assert built.signals_active == 1


@pytest.mark.parametrize("ttl", ["99999999999999999999", "-3", "40000", "soon"])
def test_a_bad_inject_ttl_days_is_reported_with_its_path_and_never_raises(ttl: str) -> None:
    block = f"<!-- @inject target=all ttl_days={ttl} -->\nStill here.\n<!-- @/inject -->\n"
    operator = note_of("notes/2026-11-20-plan.md", f"# Plan\n\n{block}")
    built = build([arc_note("2026-11-20-arc-0123456789d3", block), operator])
    paths = sorted(p.path for p in built.problems)
    assert paths == ["clusters/2026-11-20/2026-11-20-arc-0123456789d3.md", "notes/2026-11-20-plan.md"]
    assert all("ttl_days" in p.message and p.line for p in built.problems)
    assert rendered(built, "inject.md").count("Still here.") == 2  # the default 30 days applies


def test_a_huge_ttl_days_does_not_stop_the_tick(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-ttl-0123456789d4",
              body="<!-- @inject target=all ttl_days=99999999999999999999 -->\nStill here.\n<!-- @/inject -->\n")
    code, report = run_tick_json(vault)
    assert code == 0, report
    assert "Still here." in (vault / "brain-feed/inject.md").read_text()


# --- the arc keys the feed reads -------------------------------------------------------------


def test_work_keys_of_bad_shapes_are_ignored() -> None:
    arc = arc_note("2026-11-20-odd-0123456789e1", files="lib/one.py", commands={"a": 1},
                   open_errors=[["nested"], {"k": "v"}, None, True, 42, " two\nlines "], identifiers=[],
                   cwd=["/a"], branch=7, last_prompt={"x": 1}).arc
    assert arc is not None
    assert arc.files == () and arc.commands == () and arc.identifiers == ()
    assert arc.open_errors == ("42", "two lines")
    assert arc.cwd is None and arc.branch == "7" and arc.last_prompt is None
    hostile = arc_note("2026-11-20-big-0123456789e2", files=[f"f{i}.py" for i in range(10_000)],
                       last_prompt="x" * 100_000).arc
    assert hostile is not None and len(hostile.files) == WORK_LIST_ITEMS == 60 and len(hostile.last_prompt or "") == 500


def test_work_keys_survive_the_parse_cache(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-cached-0123456789e3",
              extra=work(files=["lib/cached.py"], commands=["make test"]))
    run_tick_json(vault)
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-later-0123456789e4", last_active="2026-11-19T12:00:00Z",
              extra=work(files=["lib/later.py"]))
    code, report = run_tick_json(vault)  # the first arc comes from the parse cache this time
    assert code == 0, report
    alpha = project_feed(vault)
    assert "`lib/cached.py`" in alpha and "`make test`" in alpha and "`lib/later.py`" in alpha
    note = Note.from_json(note_of("a.md", "---\ncluster_id: x1\nfiles: [a.py]\ncwd: /w\n---\n").to_json())
    assert note.arc is not None and note.arc.files == ("a.py",) and note.arc.cwd == "/w"


def test_recent_work_across_projects_for_sessions_outside_them(vault: Path) -> None:
    build_project_vault(vault)
    run_tick_json(vault)
    recent = (vault / "brain-feed/recent-work.md").read_text()
    rows = [line for line in recent.splitlines() if line.startswith("- 2026")]
    assert [row.split(" · ")[1] for row in rows] == ["alpha", "beta"]  # one row per project, newest first
    assert "`lib/schema.py`" in rows[0]  # the project's files over its recent arcs, not only the latest's
    assert "Reply with HELLO" not in recent  # a scripted run is not work
    assert "`lib/importer.py`" in rows[0] and "- Commands lately: `uv run pytest`" in recent
    # what failed lately rides on the commands' line: one line that names many things
    commands = next(line for line in recent.splitlines() if line.startswith("- Commands lately:"))
    assert "; errors lately: `KeyError`" in commands and "- Errors lately" not in recent


def test_a_one_prompt_session_that_worked_for_an_hour_is_real_work() -> None:
    turns = {"sessions": 1, "user_turns": 1, "tool_calls": 90, "errors": 0, "joy": 0, "compactions": 0}
    long_run = arc_note("2026-11-21-long-0123456789f1", title="Port the parser", activity=turns,
                        created="2026-11-21T09:00:00Z", last_active="2026-11-21T10:30:00Z")
    one_shot = arc_note("2026-11-21-ping-0123456789f2", title="Say PONG", activity=turns,
                        created="2026-11-21T11:00:00Z", last_active="2026-11-21T11:00:10Z")
    older = arc_note("2026-11-19-old-0123456789f3", title="Older work", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T12:00:00Z")
    text = rendered(build([long_run, one_shot, older]), "projects/alpha.md")
    assert "- Last session (2026-11-21 10:30): Port the parser" in text
    recent = text[text.index("## Recent work here"):].split("\n## ")[0]
    assert "Older work" in recent and "Say PONG" not in recent  # real work first, then scripted runs
    assert "Port the parser (one-shot" not in text


def test_the_handoff_is_one_line_with_the_files_in_play() -> None:
    latest = arc_note("2026-11-21-port-0123456789e1", title="Port the parser", files=["lib/parse.py", "/tmp/x.txt"],
                      last_active="2026-11-21T10:30:00Z")
    text = rendered(build([latest]), "projects/alpha.md")
    line = next(line for line in text.splitlines() if line.startswith("- Last session"))
    assert line.endswith("Port the parser; files in play: `lib/parse.py`")  # scratch files left out
    assert "- Files in play" not in text


def test_a_decision_phrased_as_a_question_is_left_out() -> None:
    body = ("<!-- @decision date=2026-11-21 -->\nWait, does it only run on main? Run it on all pushes?\n"
            "<!-- @/decision -->\n<!-- @decision date=2026-11-20 -->\nKeep the importer streaming; no pandas.\n"
            "<!-- @/decision -->\n")
    text = rendered(build([arc_note("2026-11-21-ci-0123456789e2", body)]), "projects/alpha.md")
    assert "- Decision (2026-11-20): Keep the importer streaming; no pandas." in text
    assert "only run on main" not in text
    assert is_question('Should we "vendor it"?') and not is_question("Use X? No: use Y.")


def test_the_commands_line_keeps_an_older_arcs_commands() -> None:
    # Three arcs of 15 commands each: the oldest one's first still gets a place.
    notes = [arc_note(f"2026-11-2{i}-cmd-{i}123456789e8", title=f"Work {i}", created=f"2026-11-2{i}T09:00:00Z",
                      last_active=f"2026-11-2{i}T10:00:00Z", commands=[f"tool{i}x{k}" for k in range(15)])
             for i in range(3)]
    text = rendered(build(notes), "projects/alpha.md")
    line = next(line for line in text.splitlines() if line.startswith("- Commands:"))
    assert "`tool0x0`" in line and "`tool2x14`" in line  # the oldest arc's first, and every command of the latest


def test_recent_work_lists_the_arc_before_the_latest() -> None:
    notes = [arc_note(f"2026-11-2{i}-work-{i}123456789e3", title=f"Work {i}", created=f"2026-11-2{i}T09:00:00Z",
                      last_active=f"2026-11-2{i}T10:00:00Z") for i in range(6)]
    text = rendered(build(notes), "projects/alpha.md")
    recent = text[text.index("## Recent work here"):].split("\n## ")[0]
    assert [line.split(" · ")[1] for line in recent.splitlines() if line.startswith("- 2026")] == ["Work 4"]
    assert "Work 3" not in recent  # older arcs reach the feed through the lessons and the lists below


def test_a_row_that_only_repeats_its_project_and_listed_files_is_left_out() -> None:
    def arc(day: int, title: str, files: list[str]) -> Note:
        return arc_note(f"2026-11-1{day}-a-{day}123456789e4", title=title, files=files,
                        created=f"2026-11-1{day}T09:00:00Z", last_active=f"2026-11-1{day}T10:00:00Z")

    notes = [arc(9, "Add the cache check", ["lib/cache.py"]), arc(8, "alpha: cache.py", ["lib/cache.py"]),
             arc(7, "alpha session", ["lib/new.py"]), arc(6, "alpha: cache.py", [])]
    text = rendered(build(notes), "projects/alpha.md")
    recent = text[text.index("## Recent work here"):].split("\n## ")[0]
    rows = [line for line in recent.splitlines() if line.startswith("- 2026")]
    assert rows == ["- 2026-11-17 · alpha session; files: `lib/new.py`"]  # it names a file nothing else did
    recent_work = rendered(build(notes), "recent-work.md")
    assert "alpha: cache.py" not in recent_work and "Add the cache check" in recent_work


def test_requests_and_questions_are_not_decisions() -> None:
    assert not decides("please add transformer.js too first")
    assert not decides("Never mind! But I'd like to ask you to add a `<details>` element")
    assert not decides("Can you run it on all pushes")
    assert decides("You can set group.visible using the vis library which is less work")
    assert decides("Keep the importer streaming; no pandas.")


def test_recent_work_rows_are_five_projects_and_shared_commands_come_first() -> None:
    notes = [arc_note(f"2026-11-1{i}-w-{i}123456789e5", title=f"Work {i}", project=f"p{i}",
                      commands=[f"tool{i} run", *(["uv run pytest"] if i < 3 else [])],
                      created=f"2026-11-1{i}T09:00:00Z", last_active=f"2026-11-1{i}T10:00:00Z") for i in range(9)]
    notes.append(arc_note("2026-11-18-w-x123456789e5", title="More of p8", project="p8",
                          created="2026-11-18T06:00:00Z", last_active="2026-11-18T07:00:00Z"))
    text = rendered(build(notes), "recent-work.md")
    assert [line.split(" · ")[1] for line in text.splitlines() if line.startswith("- 2026")] == [
        "p8", "p7", "p6", "p5", "p4"]  # p8's second arc does not take a row from p4
    commands = next(line for line in text.splitlines() if line.startswith("- Commands lately:"))
    assert commands.startswith("- Commands lately: `uv run pytest`, `tool8 run`")  # three projects ran it
    assert "`tool0 run`" in commands  # older projects' commands still count


def test_files_read_in_installed_dependencies_rank_after_the_projects_own() -> None:
    # spotter (real logs): an agent reading OpenTelemetry's sources under deps/ filled the arc's
    # first files; the project's own modules came after them.
    from brain.core.arc_text import work_keys
    from brain.core.session import Session

    at = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    session = Session("s", "claude-code", "spotter", "/home/u/spotter", "main", at, at, 3, 3, 9, (), (), "go", "go",
                      0, 0, 0, 0, files_edited=(("lib/spotter/otel.ex", 1),),
                      files_read=(("deps/opentelemetry_api/src/otel_span.erl", 5), ("node_modules/x/index.js", 4),
                                  (".venv/lib/python3.12/site-packages/y.py", 4), ("lib/spotter/session.ex", 1)))
    assert work_keys([session])["files"] == [
        "lib/spotter/otel.ex", "lib/spotter/session.ex", "deps/opentelemetry_api/src/otel_span.erl",
        ".venv/lib/python3.12/site-packages/y.py", "node_modules/x/index.js"]


def test_valid_until_reads_only_the_notes_the_feed_found_marked_and_ends_where_it_did(tmp_path: Path) -> None:
    """The window an unchanged vault plans nothing in ends at the first inject expiry, cleared
    signal's removal or heat step; read from the notes the feed found holding a signal or an
    inject, it ends where reading every arc's markers does, whatever other notes hold."""
    from brain.io.vault import scan

    vault = tmp_path / "v"
    inject = "<!-- @inject ttl_days=2 date=2026-11-20 -->\nRun the tests first.\n<!-- @/inject -->\n"
    cleared = ("<!-- @signal severity=resolved source=ci cleared_at=2026-11-21T18:30:00Z -->\n"
               "CI was red (CLEARED: fixed)\n<!-- @/signal -->\n")
    for n, body in enumerate((inject, cleared, "<!-- @lesson -->\nMeasure first.\n<!-- @/lesson -->\n", "")):
        write_arc(vault, "clusters/2026-11-20", f"2026-11-20-arc-{n}-0123456789a{n}", body=body,
                  last_active=f"2026-11-{10 + n:02d}T10:00:00Z")
    (vault / "left").mkdir(exist_ok=True)
    (vault / "left" / "operator.md").write_text("# Notes\n\n" + inject, encoding="utf-8")  # not an arc: not read
    s = Settings(vault=vault)
    snapshot = scan(vault, feed_dir=s.feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False)
    decisions = keeper.decide(snapshot.notes.values(), NOW, s, horizon=True)
    marked = feed.with_markers(snapshot.notes.values(), frozenset({"signal", "inject"}))
    assert len(marked) == 3
    every = keeper.valid_until(decisions, NOW, s)
    assert keeper.valid_until(decisions, NOW, s, marked=marked) == every
    assert every == datetime(2026, 11, 21, 18, 30, tzinfo=UTC)  # the cleared signal goes then
    # Without the cleared signal's note, the inject's expiry (the next day) or the day's end comes first.
    assert keeper.valid_until(decisions, NOW, s, marked=[m for m in marked if "arc-1" not in m.path]) > every
