"""The amygdala (SPEC §11) against a real redis-server started by the suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from brain.cli import app
from brain.core import amygdala as core
from brain.core import frontmatter, markers
from brain.core.amygdala import PublishedSignal
from brain.io import amygdala as amy
from brain.io.amygdala import AmygdalaConsumer, publish_signal_changes
from brain.settings import Settings
from tests.support.redis_server import RedisServer, redis_server_fixture  # noqa: F401

NOW = datetime(2026, 11, 21, 19, 0, tzinfo=UTC)
STREAM = "brain:amygdala"
WAIT_SECONDS = 15.0


# --- helpers ------------------------------------------------------------------------------


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A bare vault: only the folders the consumer writes to (tests list every file in it)."""
    root = tmp_path / "vault"
    (root / "amygdala").mkdir(parents=True)
    (root / "brain-feed").mkdir()
    (root / ".brain").mkdir()  # a vault is what `brain init` made; commands refuse any other folder
    return root


def settings_for(vault: Path, url: str | None, **changes: Any) -> Settings:
    return Settings(vault=vault, redis_url=url, amygdala_consumer="test-consumer", **changes)


def client_of(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url)


def consumer_for(settings: Settings, vault: Path, now: datetime = NOW, **kwargs: Any) -> AmygdalaConsumer:
    logs: list[str] = []
    consumer = AmygdalaConsumer(settings, vault, now=lambda: now, log=logs.append, **kwargs)
    consumer.logs = logs  # type: ignore[attr-defined]
    return consumer


def external(source: str = "auth-broker", severity: str = "critical", text: str = "ban rate rising", **extra: Any) -> dict[str, Any]:
    return {"event": "signal.raised", "severity": severity, "source": source, "text": text, **extra}


def alarm_files(vault: Path) -> list[Path]:
    return sorted((vault / "amygdala").glob("*.md"))


def feed_file(vault: Path) -> Path:
    return vault / "brain-feed" / core.ACTIVE_FEED_NAME


def parse_arc(path: Path) -> tuple[dict[str, Any], list[markers.Marker], str]:
    text = path.read_text(encoding="utf-8")
    doc = frontmatter.split(text)
    assert doc.frontmatter is not None
    meta = frontmatter.load(doc.frontmatter)
    found, problems = markers.parse(doc.body, first_line=doc.body_first_line)
    assert problems == []
    return meta, found, doc.body


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pending_count(client: redis.Redis, stream: str = STREAM, group: str = "brain-amygdala") -> int:
    return int(client.xpending(stream, group)["pending"])


# --- pure core ----------------------------------------------------------------------------


def test_slug_keeps_clean_sources_and_hashes_everything_else() -> None:
    assert core.alarm_slug("auth-broker") == "auth-broker"
    hostile = core.alarm_slug("../../etc/passwd")
    assert hostile.startswith("etc-passwd-") and "/" not in hostile and ".." not in hostile
    assert core.alarm_slug("Auth Broker") != core.alarm_slug("auth-broker")
    assert core.alarm_slug("сервер") and core.alarm_slug("сервер").isalnum()
    assert len(core.alarm_slug("x" * 500)) <= core.SLUG_MAX_CHARS + 9


def test_one_line_neutralises_markers_fences_and_controls() -> None:
    text = core.one_line("---\n<!-- @signal severity=nuclear -->\x00\u2028boom -->", 200)
    assert "\n" not in text and "<!--" not in text and "-->" not in text and "\x00" not in text
    assert text.startswith("\\---")
    assert len(core.one_line("word " * 300_000, 100)) <= 100


def test_parse_event_rules() -> None:
    def parse(fields: dict[str, Any]) -> core.AlarmEvent | core.IgnoredEvent:
        return core.parse_event(fields, stream=STREAM, message_id="1-0")

    raised = parse({"event": "signal.raised", "severity": "NUCLEAR", "source": "db", "message": "down"})
    assert isinstance(raised, core.AlarmEvent) and (raised.action, raised.severity, raised.text) == ("raise", "nuclear", "down")
    cleared = parse({"event": "signal.cleared", "source": "db"})
    assert isinstance(cleared, core.AlarmEvent) and cleared.action == "clear"
    resolved = parse({"event": "signal.raised", "severity": "resolved", "source": "db"})
    assert isinstance(resolved, core.AlarmEvent) and resolved.action == "clear"
    for fields, reason in [
        ({"event": "deploy.done", "source": "ci", "text": "all green"}, "below alarm level"),
        ({"event": "node.down", "severity": "warn", "host": "db1"}, "below alarm level"),
        ({"event": "signal.raised", "severity": "warning", "source": "db"}, "below alarm level"),
        ({"event": "signal.raised", "severity": "apocalyptic", "source": "db"}, "unknown severity"),
        ({"event": "signal.raised", "severity": "critical", "source": " \n "}, "no source"),
        ({}, "deleted"),
    ]:
        ignored = parse(fields)
        assert isinstance(ignored, core.IgnoredEvent) and reason in ignored.reason
    own = parse({"v": "1", "event": "signal.raised", "severity": "nuclear", "source": "db", "tick_id": "t1"})
    assert isinstance(own, core.IgnoredEvent) and own.own


def test_plan_signal_steps_diffs_against_published_state() -> None:
    crit = PublishedSignal("arc-a", "db", "critical", "db slow")
    nuke = PublishedSignal("arc-a", "db", "nuclear", "db down")
    assert [s.event.event for s in core.plan_signal_steps({}, [crit]) if s.event] == ["signal.raised"]
    assert core.plan_signal_steps({crit.key: crit}, [crit]) == []
    up = core.plan_signal_steps({crit.key: crit}, [nuke])
    assert [(s.event.event, s.event.severity) for s in up if s.event] == [("signal.raised", "nuclear")]
    down = core.plan_signal_steps({nuke.key: nuke}, [crit])
    assert [s.event for s in down] == [None] and down[0].after == crit
    gone = core.plan_signal_steps({crit.key: crit}, [PublishedSignal("arc-a", "db", "resolved", "(CLEARED: fixed)")])
    assert [(s.event.event, s.event.severity, s.event.text) for s in gone if s.event] == [
        ("signal.cleared", "resolved", "(CLEARED: fixed)")
    ]


# --- publisher ----------------------------------------------------------------------------


def stream_events(client: redis.Redis, stream: str = STREAM) -> list[dict[str, str]]:
    return [core.decode_fields(fields) for _, fields in client.xrange(stream)]


def test_publish_once_per_state_change(redis_server: RedisServer, vault: Path) -> None:
    settings = settings_for(vault, redis_server.url)
    client = client_of(redis_server)
    crit = PublishedSignal("2026-11-21-db-abc", "db", "critical", "db slow")

    first = publish_signal_changes(settings, vault, [crit], "tick-1", NOW)
    again = publish_signal_changes(settings, vault, [crit], "tick-2", NOW)
    assert first.ok and len(first.sent) == 1 and again.sent == ()
    events = stream_events(client)
    assert events == [
        {
            "v": "1",
            "event": "signal.raised",
            "severity": "critical",
            "source": "db",
            "arc": "2026-11-21-db-abc",
            "text": "db slow",
            "tick_id": "tick-1",
            "ts": "2026-11-21T19:00:00Z",
        }
    ]

    escalated = publish_signal_changes(settings, vault, [PublishedSignal(crit.arc, "db", "nuclear", "db down")], "t3", NOW)
    assert [(s.event.event, s.event.severity) for s in escalated.sent] == [("signal.raised", "nuclear")]
    calmer = publish_signal_changes(settings, vault, [crit], "t4", NOW)
    assert calmer.sent == ()
    cleared = publish_signal_changes(settings, vault, [], "t5", NOW)
    assert [(s.event.event, s.event.severity) for s in cleared.sent] == [("signal.cleared", "resolved")]
    assert publish_signal_changes(settings, vault, [], "t6", NOW).sent == ()
    assert [e["event"] for e in stream_events(client)] == ["signal.raised", "signal.raised", "signal.cleared"]


def test_publish_with_redis_down_reports_and_sends_on_next_tick(redis_server: RedisServer, vault: Path) -> None:
    settings = settings_for(vault, redis_server.url)
    signal_a = PublishedSignal("arc-a", "db", "nuclear", "db down")
    redis_server.stop()
    down = publish_signal_changes(settings, vault, [signal_a], "tick-1", NOW)
    assert down.error and "cannot publish" in down.error
    assert [e.source for e in down.unsent] == ["db"] and down.sent == ()
    assert not (vault / amy.PUBLISHED_STATE_FILE).exists()

    redis_server.start()
    up = publish_signal_changes(settings, vault, [signal_a], "tick-2", NOW)
    assert up.ok and [s.event.source for s in up.sent] == ["db"]
    assert [e["tick_id"] for e in stream_events(client_of(redis_server))] == ["tick-2"]


class FlakyClient:
    """XADD succeeds ``ok`` times, then raises like a dropped connection."""

    def __init__(self, ok: int):
        self.ok = ok
        self.added: list[dict[str, str]] = []

    def xadd(self, stream: str, fields: dict[str, str], **kwargs: Any) -> bytes:
        if len(self.added) >= self.ok:
            raise redis.exceptions.ConnectionError("connection dropped")
        self.added.append(fields)
        return f"{len(self.added)}-0".encode()

    def close(self) -> None:  # pragma: no cover - the publisher closes only its own clients
        pass


def test_publish_partial_failure_never_resends_what_went_out(vault: Path) -> None:
    settings = settings_for(vault, None)
    signals = [PublishedSignal("arc-a", "a", "critical", "x"), PublishedSignal("arc-b", "b", "nuclear", "y")]
    flaky = FlakyClient(ok=1)
    report = publish_signal_changes(settings, vault, signals, "t1", NOW, client=flaky)  # type: ignore[arg-type]
    assert report.error and [s.event.source for s in report.sent] == ["a"] and [e.source for e in report.unsent] == ["b"]
    healthy = FlakyClient(ok=10)
    retry = publish_signal_changes(settings, vault, signals, "t2", NOW, client=healthy)  # type: ignore[arg-type]
    assert retry.ok and [f["source"] for f in healthy.added] == ["b"]


def test_publish_without_redis_url_or_in_dry_run_does_nothing(redis_server: RedisServer, vault: Path) -> None:
    signals = [PublishedSignal("arc-a", "db", "critical", "db slow")]
    skipped = publish_signal_changes(settings_for(vault, None), vault, signals, "t1", NOW)
    assert skipped.skipped and skipped.ok and skipped.sent == ()
    dry = publish_signal_changes(settings_for(vault, redis_server.url), vault, signals, "t1", NOW, dry_run=True)
    assert dry.dry_run and [e.event for e in dry.unsent] == ["signal.raised"] and dry.sent == ()
    assert client_of(redis_server).exists(STREAM) == 0
    assert list((vault / ".brain").iterdir()) == []  # no publish state written


def test_external_events_raise_by_severity_or_by_what_their_text_says() -> None:
    """Other producers don't speak our vocabulary (issue 12 item 13)."""

    def parse(fields: dict[str, Any]) -> core.AlarmEvent | core.IgnoredEvent:
        return core.parse_event(fields, stream=STREAM, message_id="1-0")

    cases = [
        ({"event": "node.down", "severity": "critical", "host": "db1"}, ("raise", "critical", "db1")),
        ({"event": "node.down", "severity": "CRIT", "node": "db2", "message": "no heartbeat"}, ("raise", "critical", "db2")),
        ({"event": "backup.check", "level": "fatal", "service": "pg", "summary": "x"}, ("raise", "nuclear", "pg")),
        ({"event": "node.down"}, ("raise", "critical", "node.down")),  # no severity: the name classifies
        ({"event": "deploy.finished", "source": "ci", "text": "payments unreachable after rollout"},
         ("raise", "critical", "ci")),
        ({"event": "audit", "source": "vault", "description": "possible data loss on volume 3"},
         ("raise", "nuclear", "vault")),
        ({"event": "node.up", "severity": "ok", "host": "db1"}, ("clear", "resolved", "db1")),
        ({"event": "signal.cleared", "source": "db1"}, ("clear", "resolved", "db1")),
    ]
    for fields, (action, severity, source) in cases:
        event = parse(fields)
        assert isinstance(event, core.AlarmEvent), (fields, event)
        assert (event.action, event.severity, event.source) == (action, severity, source), fields
    for fields in ({"event": "deploy.done", "source": "ci"}, {"event": "build", "severity": "info", "source": "ci"},
                   {"event": "download.finished", "text": "shutdown of the old pods went well"}):
        assert isinstance(parse(fields), core.IgnoredEvent), fields
    assert core.classify("node.down") == "critical" and core.classify("download done") is None


def test_an_external_node_down_event_raises_an_alarm_and_signal_cleared_clears_it(
    redis_server: RedisServer, vault: Path
) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xadd(STREAM, {"event": "node.down", "severity": "critical", "host": "db1", "message": "no heartbeat for 90 s"})
    report = consumer_for(settings, vault).run_once()
    assert report.raised == 1 and report.active == ["amygdala-db1"]
    _, [sig], _ = parse_arc(vault / "amygdala" / "amygdala-db1.md")
    assert sig.attr("severity") == "critical" and sig.attr("source") == "db1" and sig.text == "no heartbeat for 90 s"
    assert "no heartbeat" in feed_file(vault).read_text()
    client.xadd(STREAM, {"event": "signal.cleared", "source": "db1", "text": "back"})
    report = consumer_for(settings, vault, now=NOW + timedelta(minutes=2)).run_once()
    assert report.cleared == 1 and alarm_files(vault) == [] and pending_count(client) == 0


# --- consumer -----------------------------------------------------------------------------


def test_event_becomes_alarm_file_and_feed_and_is_acked(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    client.xadd(STREAM, external(text="Auth broker ban rate increasing"))
    runner = CliRunner()
    result = runner.invoke(
        app, ["amygdala", "--vault", str(vault), "--redis-url", redis_server.url, "--once", "--now", "2026-11-21T19:00:00Z"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["raised"] == 1 and summary["active"] == ["amygdala-auth-broker"]

    [path] = alarm_files(vault)
    assert path.name == "amygdala-auth-broker.md"
    meta, found, _ = parse_arc(path)
    assert meta["cluster_id"] == "amygdala-auth-broker" and meta["region"] == "amygdala" and meta["status"] == "active"
    assert meta["created"] == meta["last_active"] == "2026-11-21T19:00:00Z" and isinstance(meta["heat"], int)
    [sig] = found
    assert sig.type == "signal" and sig.attr("severity") == "critical" and sig.attr("source") == "auth-broker"
    assert sig.text == "Auth broker ban rate increasing"

    feed = feed_file(vault).read_text()
    doc = frontmatter.split(feed)
    assert doc.frontmatter is not None
    fmeta = frontmatter.load(doc.frontmatter)
    assert fmeta == {"id": "amygdala-active-2026-11-21", "title": "Active alarms", "priority": 100, "ttl": 7200, "severity": "critical"}
    assert "[[amygdala-auth-broker]]" in doc.body and "Auth broker ban rate increasing" in doc.body
    assert pending_count(client) == 0


def test_feed_lists_most_severe_first_and_tracks_the_worst_severity(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xadd(STREAM, external("queue", "critical", "backlog"))
    client.xadd(STREAM, external("db", "nuclear", "primary down"))
    consumer_for(settings, vault).run_once()
    body = feed_file(vault).read_text()
    assert "severity: nuclear" in body and body.index("primary down") < body.index("backlog")
    client.xadd(STREAM, {"event": "signal.cleared", "source": "db", "text": "failover done"})
    consumer_for(settings, vault).run_once()
    body = feed_file(vault).read_text()
    assert "severity: critical" in body and "primary down" not in body
    assert [p.name for p in alarm_files(vault)] == ["amygdala-queue.md"]


def test_consumer_killed_between_read_and_ack_is_reclaimed_once(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xgroup_create(STREAM, "brain-amygdala", id="0", mkstream=True)
    client.xadd(STREAM, external())
    # A consumer reads the message, then dies before writing or acknowledging anything.
    delivered = client.xreadgroup("brain-amygdala", "crashed-pod", {STREAM: ">"}, count=10)
    assert len(delivered[0][1]) == 1 and pending_count(client) == 1
    assert alarm_files(vault) == []

    report = consumer_for(settings, vault, reclaim_idle_ms=0).run_once()
    assert report.reclaimed == 1 and report.raised == 1
    assert [p.name for p in alarm_files(vault)] == ["amygdala-auth-broker.md"]
    assert pending_count(client) == 0
    written = alarm_files(vault)[0].stat().st_mtime_ns

    again = consumer_for(settings, vault, reclaim_idle_ms=0).run_once()
    assert again.processed == 0 and alarm_files(vault)[0].stat().st_mtime_ns == written


def test_own_pending_messages_are_processed_after_a_restart(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xgroup_create(STREAM, "brain-amygdala", id="0", mkstream=True)
    client.xadd(STREAM, external())
    client.xreadgroup("brain-amygdala", "test-consumer", {STREAM: ">"}, count=10)  # same name, then crash
    report = consumer_for(settings, vault).run_once()  # default min-idle: only its own pending qualify
    assert report.raised == 1 and pending_count(client) == 0


def test_pending_messages_of_a_live_consumer_are_left_alone(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xgroup_create(STREAM, "brain-amygdala", id="0", mkstream=True)
    client.xadd(STREAM, external())
    client.xreadgroup("brain-amygdala", "busy-pod", {STREAM: ">"}, count=10)
    report = consumer_for(settings, vault).run_once()  # 60 s min-idle: not abandoned yet
    assert report.processed == 0 and pending_count(client) == 1


def test_clear_by_event_deletes_the_alarm_and_the_feed_file(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xadd(STREAM, external())
    consumer_for(settings, vault).run_once()
    assert alarm_files(vault) and feed_file(vault).exists()
    client.xadd(STREAM, {"event": "signal.cleared", "severity": "resolved", "source": "auth-broker", "text": "fixed"})
    report = consumer_for(settings, vault, now=NOW + timedelta(minutes=5)).run_once()
    assert report.cleared == 1 and report.active == []
    assert alarm_files(vault) == [] and not feed_file(vault).exists()
    assert sorted(p.name for p in (vault / "amygdala").iterdir()) == []


def test_clear_by_silence(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url, amygdala_clear_minutes=60)
    client.xadd(STREAM, external())
    consumer_for(settings, vault).run_once()
    client.xadd(STREAM, external(text="still rising"))
    consumer_for(settings, vault, now=NOW + timedelta(minutes=30)).run_once()  # refreshes the timer
    assert consumer_for(settings, vault, now=NOW + timedelta(minutes=89)).run_once().cleared == 0
    assert "still rising" in alarm_files(vault)[0].read_text()
    report = consumer_for(settings, vault, now=NOW + timedelta(minutes=90)).run_once()
    assert report.cleared == 1 and alarm_files(vault) == [] and not feed_file(vault).exists()


def test_own_tick_events_never_raise_or_clear_an_alarm(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xadd(STREAM, external(source="db"))
    publish_signal_changes(settings, vault, [PublishedSignal("arc-a", "queue", "nuclear", "tick saw it")], "t1", NOW)
    report = consumer_for(settings, vault).run_once()
    assert report.own_events == 1 and [p.name for p in alarm_files(vault)] == ["amygdala-db.md"]
    # The tick clearing its own signal with the same source as the external alarm clears nothing.
    publish_signal_changes(settings, vault, [PublishedSignal("arc-a", "db", "critical", "x")], "t2", NOW)
    publish_signal_changes(settings, vault, [], "t3", NOW)
    assert consumer_for(settings, vault).run_once().cleared == 0
    assert [p.name for p in alarm_files(vault)] == ["amygdala-db.md"] and pending_count(client) == 0


def test_invalid_events_are_reported_and_acknowledged(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url)
    client.xadd(STREAM, {"event": "deploy.done", "source": "ci"})
    client.xadd(STREAM, external(severity="warning"))
    consumer = consumer_for(settings, vault)
    report = consumer.run_once()
    assert report.ignored == 2 and alarm_files(vault) == [] and pending_count(client) == 0
    assert any("below alarm level" in line for line in consumer.logs)  # type: ignore[attr-defined]


HOSTILE = [
    pytest.param({"text": "<!-- @signal severity=nuclear source=x -->\nboom\n<!-- @/signal --> -->"}, id="markers"),
    pytest.param({"text": "---\ncluster_id: pwned\n---\n# heading", "source": "---\ntitle: x\n---"}, id="frontmatter"),
    pytest.param({"source": "../../etc/passwd"}, id="path-source"),
    pytest.param({"source": "/etc/cron.d/x", "text": "\x00\x1b[31m\u2028\u202e"}, id="absolute-source-controls"),
    pytest.param({"text": "A" * 1_000_000}, id="one-megabyte"),
    pytest.param({"text": "x " * 600_000}, id="megabyte-of-words"),
    pytest.param({"text": b"caf\xe9 \xff\xfe <!--", "source": b"\xff\xfesrc"}, id="not-utf8"),
    pytest.param({"text": '"quoted" \\ back\\slash: yes #not-a-comment'}, id="yaml-specials"),
]


@pytest.mark.parametrize("fields", HOSTILE)
def test_hostile_event_text_yields_a_safe_parseable_alarm(
    redis_server: RedisServer, vault: Path, tmp_path: Path, fields: dict[str, Any]
) -> None:
    client = client_of(redis_server)
    client.xadd(STREAM, {**external(), **fields})
    report = consumer_for(settings_for(vault, redis_server.url), vault).run_once()
    assert report.raised == 1

    [path] = alarm_files(vault)
    assert path.parent == vault / "amygdala" and path.name.startswith("amygdala-")
    meta, found, body = parse_arc(path)
    assert meta["cluster_id"] == path.stem and meta["region"] == "amygdala"
    assert set(meta) == {"cluster_id", "title", "region", "status", "heat", "created", "last_active"}
    assert "\n" not in meta["title"]
    assert [m.type for m in found] == ["signal"] and found[0].attr("severity") == "critical"
    assert "\n" not in found[0].text and len(found[0].text) <= core.ALARM_TEXT_MAX_CHARS + 1
    assert path.stat().st_size < 8_000
    assert not any(line.strip() == "---" for line in body.splitlines())
    feed = feed_file(vault).read_text()
    feed_doc = frontmatter.split(feed)
    assert feed_doc.frontmatter is not None and frontmatter.load(feed_doc.frontmatter)["priority"] == 100
    assert markers.parse(feed_doc.body) == ([], [])
    assert len(feed) < 2_000
    # Nothing anywhere but the vault's own folders.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vault"]
    # Outside .brain/ (machine state: the lock, the alarm journal), only the alarm and its feed file.
    written = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*") if p.is_file())
    assert [p for p in written if not p.startswith(".brain/")] == sorted(
        [f"amygdala/{path.name}", "brain-feed/amygdala-active.md"]
    )
    assert ".brain/amygdala-state.json" in written


def test_secrets_in_event_text_are_redacted(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    secret = "sk-ant-api03-" + "a" * 90
    client.xadd(STREAM, external(text=f"leaked key {secret} in logs; password=hunter2hunter2"))
    consumer_for(settings_for(vault, redis_server.url), vault).run_once()
    for path in [*alarm_files(vault), feed_file(vault), vault / amy.ALARM_STATE_FILE]:
        text = path.read_text()
        assert secret not in text and "hunter2hunter2" not in text and "[REDACTED]" in text


def test_two_consumers_on_one_vault_are_refused(redis_server: RedisServer, vault: Path) -> None:
    settings = settings_for(vault, redis_server.url)
    with amy._consumer_lock(vault):
        with pytest.raises(amy.AmygdalaLocked):
            consumer_for(settings, vault).run_once()
        result = CliRunner().invoke(app, ["amygdala", "--vault", str(vault), "--redis-url", redis_server.url, "--once"])
        assert result.exit_code == 3 and "another amygdala consumer" in result.stderr


def test_cli_usage_errors(vault: Path) -> None:
    runner = CliRunner()
    no_url = runner.invoke(app, ["amygdala", "--vault", str(vault), "--once"])
    assert no_url.exit_code == 2 and "Error: no Redis URL" in no_url.stderr
    both = runner.invoke(app, ["amygdala", "--vault", str(vault), "--redis-url", "redis://x", "--once", "--continuous"])
    assert both.exit_code == 2 and "choose one of --once and --continuous" in both.stderr


def test_once_with_redis_down_fails_with_one_line(redis_server: RedisServer, vault: Path) -> None:
    redis_server.stop()
    result = CliRunner().invoke(app, ["amygdala", "--vault", str(vault), "--redis-url", redis_server.url, "--once"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: amygdala consumer: cannot reach Redis")
    assert result.stdout == ""


def test_several_streams_are_consumed(redis_server: RedisServer, vault: Path) -> None:
    client = client_of(redis_server)
    settings = settings_for(vault, redis_server.url, amygdala_streams=" ops:alerts , brain:amygdala,ops:alerts")
    assert amy.consumer_streams(settings) == ["ops:alerts", "brain:amygdala"]
    client.xadd("ops:alerts", external(source="pager"))
    client.xadd(STREAM, external(source="db"))
    report = consumer_for(settings, vault).run_once()
    assert report.active == ["amygdala-db", "amygdala-pager"]


# --- long-running consumer -----------------------------------------------------------------


@pytest.fixture
def running_consumer(redis_server: RedisServer, vault: Path) -> Iterator[AmygdalaConsumer]:
    consumer = consumer_for(settings_for(vault, redis_server.url), vault, block_ms=100, max_backoff=0.2)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            consumer.run_continuous()
        except BaseException as exc:  # surfaced in the test thread
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield consumer
    finally:
        consumer.stop()
        thread.join(WAIT_SECONDS)
        assert not thread.is_alive(), "consumer did not stop"
        assert errors == []


def test_redis_restarted_mid_run(redis_server: RedisServer, vault: Path, running_consumer: AmygdalaConsumer) -> None:
    client_of(redis_server).xadd(STREAM, external(source="before"))
    wait_for(lambda: (vault / "amygdala" / "amygdala-before.md").exists(), "the first alarm")

    redis_server.restart()  # no persistence: the stream and its group are gone
    wait_for(lambda: running_consumer.report.reconnects >= 1, "the consumer to notice")
    client_of(redis_server).xadd(STREAM, external(source="after"))
    wait_for(lambda: (vault / "amygdala" / "amygdala-after.md").exists(), "an alarm after the restart")
    assert [p.name for p in alarm_files(vault)] == ["amygdala-after.md", "amygdala-before.md"]
    assert any("unavailable" in line for line in running_consumer.logs)  # type: ignore[attr-defined]


def test_sigterm_shuts_the_consumer_down_cleanly(redis_server: RedisServer, vault: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    env.update({"BRAIN_REDIS_URL": redis_server.url, "BRAIN_AMYGDALA_CONSUMER": "sigterm-test"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "brain", "amygdala", "--vault", str(vault), "--continuous"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        client_of(redis_server).xadd(STREAM, external())
        wait_for(lambda: feed_file(vault).exists() or proc.poll() is not None, "the alarm")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert out == b"" and b"amygdala: stopped" in err
    assert pending_count(client_of(redis_server)) == 0
    leftovers = [p.name for p in vault.rglob(".*tmp-*")]
    assert leftovers == []
