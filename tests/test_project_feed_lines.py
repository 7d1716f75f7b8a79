"""What earns a line in a project feed (issue 11, feed precision): a name once per section, an
error name only where no lesson says it, one arc's lessons on one dated line, one row per project
in the recent work a new project gets, and no shell syntax taken for a command."""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from brain.core import feed, keeper
from brain.core.model import Note, parse_note
from brain.core.project_feed import said, shared_first, words_of
from brain.core.worklog import command_keys
from brain.settings import Settings

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def arc_note(cluster_id: str, body: str = "", project: str = "alpha", **meta: Any) -> Note:
    front = {"cluster_id": cluster_id, "title": cluster_id, "status": "active", "created": "2026-11-20T10:00:00Z",
             "last_active": "2026-11-21T10:00:00Z", "project": project, "source_sessions": ["s"], **meta}
    lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in front.items())
    data = f"---\n{lines}---\n# T\n\n{body}".encode()
    return parse_note(f"clusters/2026-11-20/{cluster_id}.md", data, size=len(data), mtime_ns=0,
                      sha1=hashlib.sha1(data).hexdigest())


def rendered(notes: list[Note], name: str = "projects/alpha.md") -> str:
    s = Settings()
    decisions = keeper.decide(notes, NOW, s)
    built = feed.build_feed(feed.FeedInputs(notes=tuple(notes), decisions=decisions.arcs, now=NOW, settings=s))
    return next(f.render() for f in built.files if f.name == name)


def lines_starting(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_an_identifier_the_files_or_commands_already_name_is_not_listed_again() -> None:
    older = arc_note("2026-11-19-a-0123456789c1", title="Render the index", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z", files=["templates/index.html"],
                     commands=["mix phx.server"], identifiers=["index.html", "phx.server", "render_index"])
    latest = arc_note("2026-11-21-b-0123456789c2", title="Fix the parser", files=["lib/parse.py"])
    text = rendered([latest, older])
    assert lines_starting(text, "- Commands:") == ["- Commands: `mix phx.server`; identifiers: `render_index`"]
    only_repeats = arc_note("2026-11-19-a-0123456789c1", title="Render the index", created="2026-11-19T09:00:00Z",
                            last_active="2026-11-19T10:00:00Z", files=["templates/index.html"],
                            commands=["mix phx.server"], identifiers=["index.html", "phx.server"])
    assert lines_starting(rendered([latest, only_repeats]), "- Commands:") == ["- Commands: `mix phx.server`"]


def test_an_error_name_a_lesson_already_gives_is_not_repeated_and_an_empty_list_is_no_line() -> None:
    lesson = ("<!-- @lesson source=s:3 -->\n`uv run pytest` failed with KeyError; fixed by editing `lib/parse.py`."
              "\n<!-- @/lesson -->\n")
    latest = arc_note("2026-11-21-b-0123456789c3", lesson, title="Fix the parser", files=["lib/parse.py"])
    older = arc_note("2026-11-19-a-0123456789c4", title="Schema", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z", open_errors=["ValidationError: bad date"])
    assert lines_starting(rendered([latest, older]), "- Errors seen:") == ["- Errors seen: `ValidationError`"]
    text = rendered([latest])
    assert "KeyError" in text and "rrors seen" not in text


def test_one_arcs_lessons_share_one_dated_line_or_its_row() -> None:
    body = "".join(f"<!-- @lesson source=s:{i} -->\n{text}\n<!-- @/lesson -->\n" for i, text in enumerate(
        ["`act` failed; fixed by editing `ci.yml`.", "A change to `ci.yml` was reverted: it did not hold."]))
    older = arc_note("2026-11-19-a-0123456789c5", "<!-- @lesson source=t:1 -->\n`make lint` failed; fixed by "
                     "editing `setup.cfg`.\n<!-- @/lesson -->\n", title="Lint", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z")
    text = rendered([arc_note("2026-11-21-b-0123456789c6", body, title="CI", files=["ci.yml"]), older])
    assert lines_starting(text, "- Lesson") == [  # the latest arc's, under the handoff
        "- Lessons (2026-11-21): `act` failed; fixed by editing `ci.yml`. · A change to `ci.yml` was reverted: "
        "it did not hold.",
    ]
    # an older arc with a row under recent work carries its lesson there: what was done and what it taught
    assert lines_starting(text, "- 2026-11-19 · Lint") == [
        "- 2026-11-19 · Lint; lesson: `make lint` failed; fixed by editing `setup.cfg`."]


def test_a_lesson_holding_marker_tags_shows_none_of_them() -> None:
    """An older version could write a lesson whose parsed text held the next lesson's tags (a code
    span left open); the feed line shows what a reader of the vault sees, no comment markup."""
    body = ("<!-- @lesson source=s:1 -->`npx x` failed with `Bun not found…<!-- @/lesson -->\n"
            "<!-- @lesson source=s:2 -->`node gen.mjs` failed; fixed by editing `gen.mjs`<!-- @/lesson -->\n")
    text = rendered([arc_note("2026-11-21-b-0123456789d1", body, title="Okki", files=["gen.mjs"])])
    [line] = lines_starting(text, "- Lesson")
    assert "<!--" not in line and "-->" not in line
    assert "Bun not found" in line and "`node gen.mjs` failed" in line


def test_recent_work_for_a_new_project_is_one_row_per_project_with_its_files_across_arcs() -> None:
    notes = [
        arc_note("2026-11-21-a-0123456789c7", title="Timeline filter", project="log",
                 files=["templates/timeline.html"], created="2026-11-21T08:00:00Z", last_active="2026-11-21T09:00:00Z"),
        arc_note("2026-11-15-a-0123456789c8", title="CI workflow", project="log", files=["converter.py", "ci.yml"],
                 created="2026-11-15T08:00:00Z", last_active="2026-11-15T09:00:00Z"),
        arc_note("2026-11-20-a-0123456789c9", title="Tokenizer page", project="site", files=["public/tokenizer.js"],
                 created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z"),
    ]
    rows = lines_starting(rendered(notes, "recent-work.md"), "- 2026")
    assert rows == [
        "- 2026-11-21 · log · Timeline filter; files: `templates/timeline.html`, `converter.py`, `ci.yml`",
        "- 2026-11-20 · site · Tokenizer page; files: `public/tokenizer.js`",
    ]


def test_recent_work_with_few_projects_lists_more_of_the_latest_ones_files_last_and_cut_first() -> None:
    """Fewer than five projects leave rows unused: their files go to the latest project, on a line
    of its own after every row (a session on a home's desktop most likely carries on the latest
    work, beyond its first ten files); the budget cut takes that line before any row."""
    own = [f"src/mod{i:02d}.py" for i in range(30)]
    away = [f"E:/notes/archive/2026-11-{i:02d}.md" for i in range(1, 16)]
    notes = [
        arc_note("2026-11-21-a-0123456789e1", title="Archive the talks", project="home", cwd="C:/Users/ana",
                 files=[*own[:20], *away[:8]], created="2026-11-21T08:00:00Z", last_active="2026-11-21T10:00:00Z"),
        arc_note("2026-11-20-a-0123456789e2", title="More talks", project="home", cwd="C:/Users/ana",
                 files=[*own[20:], *away[8:]], created="2026-11-20T08:00:00Z", last_active="2026-11-20T10:00:00Z"),
        arc_note("2026-11-19-a-0123456789e3", title="Tokenizer page", project="site", cwd="/src/site",
                 files=["public/tokenizer.js"], created="2026-11-19T08:00:00Z", last_active="2026-11-19T09:00:00Z"),
    ]
    text = rendered(notes, "recent-work.md")
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert [line[:24] for line in lines] == ["- 2026-11-21 · home · Ar", "- 2026-11-19 · site · To",
                                             "- More of home's recent "]
    row, more = lines[0], lines[2]
    shown_row = set(re.findall(r"`([^`]*)`", row))
    shown_more = set(re.findall(r"`([^`]*)`", more))
    assert len(shown_row & set(own)) == 10 and len(shown_row & set(away)) == 10
    assert not shown_row & shown_more  # nothing twice
    assert shown_row | shown_more == set(own) | set(away)  # three rows unused: room for 30 + 30 more
    # Five projects fill every row: no such line.
    others = [arc_note(f"2026-11-1{i}-a-0123456789f{i}", title=f"P{i}", project=f"p{i}", cwd=f"/src/p{i}",
                       files=[f"p{i}.py"], created=f"2026-11-1{i}T08:00:00Z", last_active=f"2026-11-1{i}T09:00:00Z")
              for i in range(3, 6)]
    assert "- More of" not in rendered([*notes, *others], "recent-work.md")
    # Over the budget, the cut takes the line of more files before any row.
    def built(s: Settings) -> list[feed.FeedFile]:
        decisions = keeper.decide(notes, NOW, s)
        return feed.build_feed(feed.FeedInputs(notes=tuple(notes), decisions=decisions.arcs, now=NOW,
                                                settings=s)).files
    whole = sum(feed.tokens(f.render()) for f in built(Settings()) if f.budgeted)  # the global files
    cut = next(f.render() for f in built(Settings(feed_token_budget=whole - len(more) // 4 + 20))  # room for the note of what was cut
               if f.name == "recent-work.md")
    assert "- More of" not in cut and row in cut and "Tokenizer page" in cut


def test_recent_work_rows_name_the_files_a_project_worked_on_far_from_its_folder_after_the_habits() -> None:
    """An arc ranks the files outside its repository last (its in-play files are the project's
    own), so the operator's setup under ``~/.claude`` or a notes vault on another drive, done
    from the repository, never reached a row: a session in a home folder or a new one may well
    continue that work. A folder beside the repository is the project's own work (in play or
    not), a scratch file is nobody's, and the commands line comes first, so a home folder's cut
    takes a row, not the habits."""
    own = [f"S:/repos/portal/Areas/C{i}Controller.cs" for i in range(4)] + [f"docs/page{i}.md" for i in range(4)]
    away = ["C:/Users/ana/.claude/learning/context-review.md", "D:/Vault/00_Claude/.obsidian/app.json"]
    notes = [
        arc_note("2026-11-21-a-0123456789d1", title="Portal areas column", project="docs", cwd="S:/repos/docs",
                 files=[*own, "S:/repos/portal/Views/Index.cshtml", *away, "/tmp/scratch.txt"],
                 commands=["docker compose up"],
                 created="2026-11-21T08:00:00Z", last_active="2026-11-21T10:00:00Z"),
        arc_note("2026-11-20-a-0123456789d3", title="Tokenizer page", project="site", cwd="/src/site",
                 files=["public/tokenizer.js"], created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z"),
    ]
    lines = [line for line in rendered(notes, "recent-work.md").splitlines() if line.startswith("- ")]
    assert lines[0].startswith("- Commands lately: `docker compose up`")
    assert lines[1].startswith("- 2026-11-21 · docs · Portal areas column; files: `S:/repos/portal/Areas/C0Controller.cs`")
    assert lines[1].endswith("`docs/page3.md`; outside it: `C:/Users/ana/.claude/learning/context-review.md`, "
                             "`D:/Vault/00_Claude/.obsidian/app.json`")
    assert "Index.cshtml" not in lines[1] and "scratch" not in lines[1]
    assert lines[2] == "- 2026-11-20 · site · Tokenizer page; files: `public/tokenizer.js`"


def test_commands_several_projects_share_come_first() -> None:
    assert shared_first([["tool new"], ["uv run pytest", "tool b"], ["uv run pytest"]], 3) == [
        "uv run pytest", "tool new", "tool b"]


@pytest.mark.parametrize(("line", "keys"), [
    ("for d in a b; do uv run pytest $d; done", ["uv run pytest"]),
    ("if npm test; then echo ok; fi", ["npm test"]),
    ("while true; do mix test; done", ["mix test"]),
    ("for f in *.py\ndo ruff check $f\ndone", ["ruff check"]),
])
def test_shell_syntax_is_not_a_command(line: str, keys: list[str]) -> None:
    assert command_keys(line) == keys


def test_said_matches_whole_words_like_a_reader() -> None:
    shown = words_of("- Files: `templates/index.html`\n- Commands: `mix phx.server`")
    assert said("index.html", shown) and said("phx.server", shown) and said("PHX.server", shown)
    assert not said("dex.html", shown) and not said("server.ex", shown) and not said("", shown)


def test_an_older_arcs_decision_rides_on_its_row_and_the_latest_arcs_stays_under_lessons() -> None:
    decision = "<!-- @decision date=2026-11-19 -->\nUse the vis library for `group.visible`.\n<!-- @/decision -->\n"
    older = arc_note("2026-11-19-a-0123456789d1", decision, title="Timeline filter", files=["timeline.html"],
                     created="2026-11-19T09:00:00Z", last_active="2026-11-19T10:00:00Z")
    latest = arc_note("2026-11-21-b-0123456789d2", title="Cache check", files=["cache.py"])
    text = rendered([latest, older])
    assert lines_starting(text, "- 2026-11-19") == [
        "- 2026-11-19 · Timeline filter; files: `timeline.html`; decision (2026-11-19): Use the vis library for "
        "`group.visible`."]
    assert "## Lessons and decisions" not in text  # nothing left for the section: no heading
    text = rendered([arc_note("2026-11-21-b-0123456789d2", decision, title="Cache check"), older])
    assert lines_starting(text, "- Decision (2026-11-19): Use the vis library") != []


def test_the_handoff_quotes_the_last_prompt_without_pasted_rules_or_placeholders() -> None:
    prompt = "A couple of tests are unhappy now:\\\n\\\n______________________ test_row_expansion ____\n[Image #1]"
    text = rendered([arc_note("2026-11-21-b-0123456789d3", title="Fix lint", last_prompt=prompt)])
    assert '— stopped at: "A couple of tests are unhappy now: test_row_expansion"' in text
    for wordless in (".", "??", "[Image #1]"):  # says nothing (xuwentao: `stopped at: "."`)
        text = rendered([arc_note("2026-11-21-b-0123456789d3", title="Fix lint", last_prompt=wordless)])
        assert "stopped at" not in text and "- Last session (" in text


def test_errors_met_and_resolved_are_seen_by_the_next_session() -> None:
    """An AssertionError an earlier session hit and fixed (no open error, no lesson naming it) is
    still an error this project meets: the feed names it."""
    latest = arc_note("2026-11-21-b-0123456789d1", title="Fix the parser", files=["lib/parse.py"])
    older = arc_note("2026-11-19-a-0123456789d2", title="Schema", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z", errors_met=["AssertionError", "ECONNREFUSED"])
    assert lines_starting(rendered([latest, older]), "- Errors seen:") == [
        "- Errors seen: `AssertionError`, `ECONNREFUSED`"]


def test_used_here_is_two_dense_lines_files_then_the_rest() -> None:
    """Precision: one line that names many things, not many lines that each name a few."""
    files = [f"lib/module_{i}.ex" for i in range(20)]
    latest = arc_note("2026-11-21-b-0123456789d4", title="Fix the parser", files=["lib/parse.py"])
    older = arc_note("2026-11-19-a-0123456789d5", title="Schema", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z", files=files, commands=["mix test", "bd show"],
                     identifiers=["spotter-dov"], errors_met=["ArgumentError"])
    text = rendered([latest, older])
    used = text[text.index("## Used here recently"):].splitlines()[2:]
    assert used == [
        "- Files: " + ", ".join(f"`{f}`" for f in files),
        "- Commands: `mix test`, `bd show`; identifiers: `spotter-dov`; errors seen: `ArgumentError`",
    ]


def test_used_here_lists_the_projects_own_files_before_installed_dependencies_across_arcs() -> None:
    """spotter (real logs): OpenTelemetry's sources under deps/, read in the latest arc, took the
    places of an older arc's modules (lib/spotter/transcripts/session.ex) in the 60 files listed."""
    in_play = [f"lib/spotter/telemetry/otel_{i}.ex" for i in range(8)]
    latest = arc_note("2026-11-21-b-0123456789d6", title="Tracing",
                      files=[*in_play, "deps/opentelemetry_api/src/otel_span.erl", "mix.exs"])
    older = arc_note("2026-11-19-a-0123456789d7", title="Sessions", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z", files=["lib/spotter/transcripts/session.ex"])
    assert lines_starting(rendered([latest, older]), "- Files:") == [
        "- Files: `lib/spotter/transcripts/session.ex`, `mix.exs`, `deps/opentelemetry_api/src/otel_span.erl`"]


def test_a_project_of_many_files_lists_up_to_120_when_they_fit_the_budget_else_ninety_or_sixty() -> None:
    """IDAHO-VAULT (a notes vault, hundreds of notes): the latest arcs' sixty files left out most of
    what the next sessions read again; 120 fit its budget. A file that would not fit its budget
    with them keeps ninety, or sixty, so the longer list never pushes the commands out (in the hook,
    which adds lines above, the list's tail goes before the commands line: test_hook)."""
    from dataclasses import replace as with_

    latest = arc_note("2026-11-21-b-0123456789e1", title="Sort the inbox", files=["inbox/a.md"])
    older = [arc_note(f"2026-11-{10 + i}-a-0123456789e{i + 2}", title=f"Notes {i}", created=f"2026-11-{10 + i}T09:00:00Z",
                      last_active=f"2026-11-{10 + i}T10:00:00Z", files=[f"notes/{i}/n{j}.md" for j in range(30)],
                      commands=[f"tool{i} run"]) for i in range(5)]
    notes = [latest, *older]

    def files_listed(budget: int) -> tuple[int, str]:
        s = with_(Settings(), feed_token_budget=budget)
        decisions = keeper.decide(notes, NOW, s)
        built = feed.build_feed(feed.FeedInputs(notes=tuple(notes), decisions=decisions.arcs, now=NOW, settings=s))
        text = next(f.render() for f in built.files if f.name == "projects/alpha.md")
        [line] = lines_starting(text, "- Files:")
        return line.count("`") // 2, text

    count, text = files_listed(2000)
    assert count == 120 and "`tool0 run`" in text
    whole = math.ceil(len(text) / 4)  # the file with 120 files
    count, text = files_listed(whole)  # they fit, at the budget: 120
    assert count == 120 and "`tool0 run`" in text
    count, text = files_listed(whole - 1)  # they would not fit, ninety do (vps-system fell back to sixty)
    assert count == 90 and "`tool0 run`" in text
    ninety = math.ceil(len(text) / 4)
    count, text = files_listed(ninety - 1)  # ninety would not fit either: sixty, the commands stay
    assert count == 60 and "`tool0 run`" in text


def test_an_older_arcs_commands_keep_a_place_beside_the_latest_arcs_fifteen() -> None:
    """spotter (real logs): the latest arc's 15 commands filled the list of 14, and the next session
    ran the older arc's mix ash.codegen and mix ecto.migrate again without the feed naming them."""
    latest = arc_note("2026-11-21-b-0123456789d8", title="Tracing", files=["lib/otel.ex"],
                      commands=[f"bd task{i}" for i in range(15)])
    older = arc_note("2026-11-19-a-0123456789d9", title="Schema", created="2026-11-19T09:00:00Z",
                     last_active="2026-11-19T10:00:00Z", commands=["mix ash.codegen", "mix ecto.migrate"])
    (line,) = lines_starting(rendered([latest, older]), "- Commands:")
    assert "`mix ash.codegen`" in line and "`mix ecto.migrate`" in line


def test_a_long_path_keeps_its_file_name_and_a_new_projects_row_lists_ten_files() -> None:
    """A path cut at its end loses the name a reader (and a search) knows it by: the folders in
    the middle give way instead. A new project often repeats a recent one's stack, so a
    recent-work row lists ten of its files."""
    deep = "S:/01_Repos/BeFirst_Portal/firstronic/Areas/Planning/Views/Status/Timeline.cshtml"
    files = [deep, *(f"app/Http/Controllers/C{i}Controller.php" for i in range(11))]
    notes = [arc_note("2026-11-21-a-0123456789e1", title="Planning timeline", project="portal", files=files)]
    row = lines_starting(rendered(notes, "recent-work.md"), "- 2026")[0]
    assert "`S:/…/BeFirst_Portal/firstronic/Areas/Planning/Views/Status/Timeline.cshtml`" in row
    listed = row.split("; files: ")[1].split(", ")
    assert len(listed) == 8  # every file an arc keeps in play (IN_PLAY_FILES), up to ten
    deeper = "S:/01_Repos/BeFirst_Portal/firstronic/Areas/Planning/Views/Status/Partials/Shared/Components/Timeline.cshtml"
    own = rendered([arc_note("2026-11-21-a-0123456789e2", title="Timeline", project="portal", files=[deeper])],
                   "projects/portal.md")
    assert "files in play: `S:/…/firstronic/Areas/Planning/Views/Status/Partials/Shared/Components/Timeline.cshtml`" in own


def test_work_another_projects_session_did_in_this_projects_folder_is_its_recent_work() -> None:
    """``~/work/mentis`` was set up by a session started in ``~/work/fortune_ai``; ``~/work``'s
    sessions work in its projects' folders. Their files there are mentis's recent work, relative
    to its folder; a folder holding the session's own cwd (``~/work`` seen from its projects) is
    not visited, nor files outside every project's folder."""
    own = arc_note("2026-11-21-m-0123456789d1", title="Wire the orb", project="mentis",
                   cwd="/home/ana/work/mentis", files=["web/orb.tsx"])
    older_own = arc_note("2026-11-18-m-0123456789d2", title="Schema", project="mentis", cwd="/home/ana/work/mentis",
                         created="2026-11-18T09:00:00Z", last_active="2026-11-18T10:00:00Z", files=["db/001.sql"])
    setup = arc_note("2026-11-20-f-0123456789d3", title="Set up mentis beside fortune", project="fortune_ai",
                     cwd="/home/ana/work/fortune_ai", created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z",
                     files=["api/app.py", "/home/ana/work/mentis/services/vector_service.py", "/tmp/x.log"],
                     commands=["uv run pytest"], identifiers=["fortune_only"])
    parent = arc_note("2026-11-19-w-0123456789d4", title="Plan both apps", project="work", cwd="/home/ana/work",
                      created="2026-11-19T08:00:00Z", last_active="2026-11-19T09:00:00Z",
                      files=["mentis/docs/plan.md", "fortune_ai/api/routes.py", "notes.md"])
    notes = [own, older_own, setup, parent]
    text = rendered(notes, "projects/mentis.md")
    assert lines_starting(text, "- Last session") and "Wire the orb" in lines_starting(text, "- Last session")[0]
    assert lines_starting(text, "- 2026-11-20 · fortune_ai · Set up mentis beside fortune") == [
        "- 2026-11-20 · fortune_ai · Set up mentis beside fortune; files: `services/vector_service.py`"]
    files = lines_starting(text, "- Files:")
    assert files and "`services/vector_service.py`" in files[0] and "`docs/plan.md`" in files[0]
    assert "api/app.py" not in text and "routes.py" not in text and "notes.md" not in text
    assert "uv run pytest" not in text and "fortune_only" not in text  # the visit brings its files only
    fortune = rendered(notes, "projects/fortune_ai.md")
    assert "`api/routes.py`" in fortune and "plan.md" not in fortune
    # the folder of projects sees none of its projects' work as a visit
    assert "vector_service" not in rendered(notes, "projects/work.md")
    # a Windows folder is the same folder in any case: typed d:\\ once and D:\\ another time
    site = arc_note("2026-11-21-s-0123456789d5", title="Deploy", project="site", cwd="d:\\sites\\shop",
                    files=["index.php"])
    admin = arc_note("2026-11-20-a-0123456789d6", title="Fix the shop from the admin tools", project="tools",
                     cwd="D:\\sites\\tools", created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z",
                     files=["D:\\Sites\\Shop\\cart.php", "run.ps1"])
    assert "`cart.php`" in rendered([site, admin], "projects/site.md")
    assert "· site ·" not in rendered([site, admin], "projects/tools.md")  # its own work, no visit back
    # a visit's files are redacted as every feed line is, however they were matched
    leaky = arc_note("2026-11-20-f-0123456789dc", title="Keys for mentis", project="fortune_ai",
                     cwd="/home/ana/work/fortune_ai", created="2026-11-20T10:00:00Z", last_active="2026-11-20T10:30:00Z",
                     files=["/home/ana/work/mentis/keys/AKIAIOSFODNN7EXAMPLE.txt"])
    text = rendered([own, older_own, leaky], "projects/mentis.md")
    assert "· fortune_ai · Keys for mentis" in text and "AKIAIOSFODNN7EXAMPLE" not in text
    assert "`keys/[REDACTED].txt`" in text
    # without the visiting sessions, the project's own older arc has the row
    alone = rendered([own, older_own], "projects/mentis.md")
    assert lines_starting(alone, "- 2026-11-18 · Schema") and "vector_service" not in alone


def test_a_headless_runs_files_in_a_projects_folder_are_no_visit_and_it_moved_on_from_nothing() -> None:
    """claude-mem's observer runs as an SDK client beside every session, in its own folder, and
    reads what the session touched: an operator's session there would see it as recent work of
    its project, and as the project just worked on, in a fifth of its feeds."""
    own = arc_note("2026-11-21-m-0123456789f1", title="Wire the orb", project="mentis",
                   cwd="/home/ana/work/mentis", files=["web/orb.tsx"], last_active="2026-11-21T09:00:00Z")
    observer = arc_note("2026-11-21-o-0123456789f2", title="You are a Claude-Mem, a specialized observer tool",
                        project="observer-sessions", cwd="/home/ana/.claude-mem/observer-sessions", headless=True,
                        files=["/home/ana/work/mentis/web/orb.tsx", "/home/ana/work/mentis/STATE.md"])
    text = rendered([own, observer], "projects/mentis.md")
    assert "observer" not in text and "STATE.md" not in text
    across = rendered([own, observer], "recent-work.md")  # a new project's feed: the recent work across projects
    assert "· mentis · Wire the orb" in across and "observer" not in across
    visitor = arc_note("2026-11-21-f-0123456789f3", title="Fix mentis from fortune", project="fortune_ai",
                       cwd="/home/ana/work/fortune_ai", files=["/home/ana/work/mentis/STATE.md"])
    assert "· fortune_ai · Fix mentis from fortune" in rendered([own, visitor], "projects/mentis.md")  # not headless
    # a `claude -p` run from an ordinary folder that explored the project is still its recent work
    probe = arc_note("2026-11-21-p-0123456789f4", title="Explore mentis with sub agents", project="claude_p",
                     cwd="/home/ana/src/experiments/claude_p", headless=True, files=["/home/ana/work/mentis/web/orb.tsx"])
    assert "· claude_p · Explore mentis with sub agents" in rendered([own, probe], "projects/mentis.md")
    index = json.loads(rendered([own, observer, visitor], "projects/index.json"))["projects"]
    assert index["observer-sessions"]["worked"] is None and index["observer-sessions"]["last_active"]
    assert index["mentis"]["worked"] == index["mentis"]["last_active"] == "2026-11-21T09:00:00Z"


def test_a_folder_named_like_a_project_is_its_checkout_elsewhere() -> None:
    """One operator, two machines: M-Claude's sessions start in ``/home/m/M-Claude``; a session in
    the Mac's home folder edited ``Documents/M-Claude/.gitleaks.toml``. No recorded cwd holds that
    file, but its folder is named like the project: the same repository checked out elsewhere, so
    the work is M-Claude's recent work, relative to the checkout. Names that say nothing (a folder
    every home has, a project started in a home folder) claim no file."""
    own = arc_note("2026-11-21-m-0123456789f1", title="Redact the logs", project="M-Claude",
                   cwd="/home/m/M-Claude", files=["scripts/redact.py"])
    home = arc_note("2026-11-20-h-0123456789f2", title="sync the repo and harden it", project="marta",
                    cwd="/Users/marta", created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z",
                    files=["Documents/M-Claude/.gitleaks.toml", "Documents/M-Claude/docs/GITLEAKS.md", ".zshrc"])
    windows = arc_note("2026-11-19-w-0123456789f3", title="hi", project="Mischa", cwd="C:\\Users\\Mischa",
                       created="2026-11-19T08:00:00Z", last_active="2026-11-19T09:00:00Z",
                       files=["C:\\Users\\Mischa\\Documents\\m-claude\\.gitleaksignore"])
    text = rendered([own, home, windows], "projects/m-claude.md")
    assert lines_starting(text, "- 2026-11-20 · marta · sync the repo and harden it") == [
        "- 2026-11-20 · marta · sync the repo and harden it; files: `.gitleaks.toml`, `docs/GITLEAKS.md`"]
    files = lines_starting(text, "- Files:")
    assert files and "`.gitleaksignore`" in files[0]  # a Windows checkout, its name in another case
    assert ".zshrc" not in text
    # a project started in a home folder is named like its user: a folder of that name is not its
    backup = arc_note("2026-11-21-b-0123456789f5", title="Back up", project="tools", cwd="/srv/tools",
                      files=["/mnt/backup/marta/keys.txt"])
    assert "keys.txt" not in rendered([own, home, windows, backup], "projects/marta.md")
    # a project named like a folder every home has claims nothing
    docs = arc_note("2026-11-21-d-0123456789f4", title="Docs site", project="Documents", cwd="/srv/Documents")
    assert "gitleaks" not in rendered([docs, home], "projects/documents.md")
    # nor one named like a folder many repositories have: a session started in a monorepo's
    # frontend is not the frontend of every other repository
    front = arc_note("2026-11-21-f-0123456789f6", title="Buttons", project="frontend", cwd="/srv/shop/frontend")
    blog = arc_note("2026-11-20-b-0123456789f7", title="Blog styles", project="marta", cwd="/Users/marta",
                    created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z",
                    files=["blog/frontend/styles.css"])
    assert "styles.css" not in rendered([front, blog], "projects/frontend.md")
    # a top-level folder is the system's: a project called private is not macOS's /private
    private = arc_note("2026-11-21-p-0123456789f8", title="Vault", project="private", cwd="/srv/private")
    build = arc_note("2026-11-20-x-0123456789f9", title="Build", project="tools", cwd="/srv/tools",
                     created="2026-11-20T08:00:00Z", last_active="2026-11-20T09:00:00Z",
                     files=["/private/etc/hosts", "/private/var/folders/xy/T/out.log"])
    assert "hosts" not in rendered([private, build], "projects/private.md")
    # a drive's top-level folder can be a checkout
    drive = arc_note("2026-11-19-d-0123456789fa", title="Copy the config", project="tools", cwd="E:\\tools",
                     created="2026-11-19T08:00:00Z", last_active="2026-11-19T09:00:00Z",
                     files=["D:\\M-Claude\\config.toml"])
    assert "`config.toml`" in rendered([own, drive], "projects/m-claude.md")


@pytest.mark.parametrize(("error", "shown"), [
    # what went wrong sat past the cut, behind a vendored binary's path (xuwentao/paas-controller)
    ("spawn /opt/homebrew/lib/node_modules/@anthropic-ai/claude-code/vendor/ripgrep/arm64-darwin/rg EACCES (Grep)",
     "`spawn /…/ripgrep/arm64-darwin/rg EACCES (Grep)`"),
    ("C:\\Users\\loganf\\Documents\\IDAHO-VAULT\\swarm\\agents\\runner\\app.py raised KeyError: 'levels' while "
     "loading the swarm configuration",
     "`C:\\…\\swarm\\agents\\runner\\app.py raised KeyError: 'levels' while loading the swarm configuration`"),
    ("ModuleNotFoundError: No module named 'swarm' in /srv/app/venv/lib/python3.11/site-packages/x.py",
     "`ModuleNotFoundError: No module named 'swarm' in /srv/app/venv/lib/python3.11/site-packages/x.py`"),  # fits
    ("a`b\\nc", "`ab c`"),
])
def test_an_error_keeps_what_went_wrong_and_gives_up_the_middle_of_its_paths(error: str, shown: str) -> None:
    from brain.core.project_feed import error_text

    assert error_text(error) == shown
