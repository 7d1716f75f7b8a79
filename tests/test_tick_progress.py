"""A long tick on a terminal shows what it is doing (a bar per step on stderr); a tick whose stderr
is a pipe or a file (the CronJob's, a script's) shows nothing but its summary, and stdout stays
machine output either way."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from brain.commands._base import StepBar
from tests.support.vaults import NOW, arc_text, init_vault

ARCS = 600
#: The brain CLI as installed, with the bar drawn from the first step (its half-second wait would
#: make what a test sees depend on the machine's speed).
CLI = ("import runpy, sys\nimport brain.commands._base as base\nbase.StepBar.DELAY = 0.0\n"
       "sys.argv[0] = 'brain'\nrunpy.run_module('brain', run_name='__main__', alter_sys=True)\n")


def _big_vault(root: Path) -> Path:
    vault = init_vault(root)
    folder = vault / "clusters" / "2026-10-01"
    folder.mkdir(parents=True)
    template = arc_text("ARC", last_active="2026-10-01T12:00:00Z", created="2026-10-01T10:00:00Z",
                        body="Work on the parser.\n")
    for i in range(ARCS):
        cid = f"2026-10-01-arc-{i:05d}"
        (folder / f"{cid}.md").write_text(template.replace("ARC", cid), encoding="utf-8")
    return vault


def _on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run the brain CLI with stderr on a pseudo-terminal (read as it comes), stdout on a pipe."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", CLI, *args], stdout=subprocess.PIPE, stderr=slave,
                               stdin=subprocess.DEVNULL)
    os.close(slave)
    seen: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed with the process
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    stdout, _ = process.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(master)
    return process.returncode, stdout.decode(), b"".join(seen).decode("utf-8", "replace")


def test_a_cold_tick_on_a_terminal_shows_each_step_and_leaves_the_summary_alone(tmp_path: Path) -> None:
    vault = _big_vault(tmp_path / "v")
    code, stdout, terminal = _on_a_terminal(["tick", "--vault", str(vault), "--no-ai", "--now", NOW, "--json"])
    assert code == 0, terminal
    assert json.loads(stdout)["stats"]["arcs"] == ARCS  # stdout is the report alone, no bar in it
    lines = [line.strip() for line in terminal.replace("\r\n", "\n").split("\r")]
    # Each step that counts, counted to its end (a cold tick parses, then moves and rewrites every
    # arc), and the steps that count nothing by name.
    counted = {m.group(3): (int(m.group(1)), int(m.group(2))) for m in (
        re.fullmatch(r"tick: \[[#.]{30}\] (\d+)/(\d+) (files parsed|arcs planned|files written)", line)
        for line in lines) if m is not None}
    assert counted["files parsed"] == (ARCS, ARCS), terminal[-2000:]
    assert counted["arcs planned"][0] == counted["arcs planned"][1] > 0
    assert counted["files written"][0] == counted["files written"][1] >= ARCS
    assert "tick: … verifying what was written" in lines


def test_a_tick_whose_stderr_is_no_terminal_shows_only_its_summary(tmp_path: Path) -> None:
    vault = _big_vault(tmp_path / "v")
    done = subprocess.run([sys.executable, "-m", "brain", "tick", "--vault", str(vault), "--no-ai", "--now", NOW],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "files parsed" not in done.stderr
    assert done.stderr.startswith("tick ") and f"{ARCS} arcs" in done.stderr


def test_the_bar_waits_out_its_delay_counts_and_clears_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    bar = StepBar("tick", delay=3600)
    bar("files parsed", 10, 100)  # within the first seconds: a quick tick shows nothing
    assert capsys.readouterr().err == ""
    bar = StepBar("tick", delay=0)
    bar("files parsed", 50, 100)
    bar("files parsed", 60, 100)  # the same step within a tenth of a second: not drawn again
    bar("verifying what was written", 0, 0)
    bar.close()
    err = capsys.readouterr().err
    drawn = [part for part in err.split("\r") if part.strip()]
    assert drawn == [f"tick: [{'#' * 15}{'.' * 15}] 50/100 files parsed",
                     "tick: … verifying what was written".ljust(len("tick: [] 50/100 files parsed") + 30)]
    assert err.endswith("\r" + " " * len(drawn[-1]) + "\r")
