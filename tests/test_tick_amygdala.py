"""The tick publishes critical / nuclear signal changes to Redis once (SPEC §11)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.support.redis_server import RedisServer, redis_server_fixture  # noqa: F401
from tests.support.vaults import run_tick_json, write_arc

ARC = "2026-11-21-auth-0123456789ab"


def _events(url: str) -> list[dict[str, str]]:
    client = redis.Redis.from_url(url, decode_responses=True)
    return [fields for _, fields in client.xrange("brain:amygdala")]


def test_tick_publishes_each_state_change_once(vault: Path, redis_server: RedisServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN_REDIS_URL", redis_server.url)
    body = "<!-- @signal severity=critical source=auth-broker -->\nBan rate up.\n<!-- @/signal -->\n"
    path = write_arc(vault, "clusters/2026-11-21", ARC, body=body)
    code, report = run_tick_json(vault)
    assert code == 0
    events = _events(redis_server.url)
    assert [(e["event"], e["severity"], e["source"], e["arc"]) for e in events] == [
        ("signal.raised", "critical", "auth-broker", ARC)]
    assert events[0]["tick_id"] == report["tick_id"] and events[0]["v"]
    run_tick_json(vault, now="2026-11-21T14:00:00Z")
    assert len(_events(redis_server.url)) == 1  # never again on later ticks
    path = next(vault.rglob(f"{ARC}.md"))
    path.write_text(path.read_text().replace("severity=critical", "severity=nuclear"))
    run_tick_json(vault, now="2026-11-21T15:00:00Z")
    path.write_text(path.read_text().replace("severity=nuclear", "severity=resolved")
                    .replace("Ban rate up.", "Ban rate up. (CLEARED: rotated keys)"))
    run_tick_json(vault, now="2026-11-21T16:00:00Z")
    assert [(e["event"], e["severity"]) for e in _events(redis_server.url)] == [
        ("signal.raised", "critical"), ("signal.raised", "nuclear"), ("signal.cleared", "resolved")]


def test_redis_down_still_succeeds_and_publishes_on_the_next_tick(vault: Path, redis_server: RedisServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    write_arc(vault, "clusters/2026-11-21", ARC,
              body="<!-- @signal severity=nuclear source=db -->\nPrimary down.\n<!-- @/signal -->\n")
    monkeypatch.setenv("BRAIN_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    code, report = run_tick_json(vault)
    assert code == 0
    assert any("amygdala publish failed" in p["message"] for p in report["problems"])
    monkeypatch.setenv("BRAIN_REDIS_URL", redis_server.url)
    code, report = run_tick_json(vault)  # same vault, same now: the failed publish is retried
    assert code == 0 and [e["event"] for e in _events(redis_server.url)] == ["signal.raised"]


def test_a_signal_with_cleared_at_is_not_published_as_raised(vault: Path, redis_server: RedisServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # The one open-signal rule: cleared_at closes a signal whatever its severity still says.
    monkeypatch.setenv("BRAIN_REDIS_URL", redis_server.url)
    body = ("<!-- @signal severity=critical source=auth-broker cleared_at=2026-11-21T09:00:00Z -->\nBan rate up.\n"
            "<!-- @/signal -->\n<!-- @signal severity=critical source=db -->\nPrimary slow.\n<!-- @/signal -->\n")
    write_arc(vault, "clusters/2026-11-21", ARC, body=body)
    code, _ = run_tick_json(vault)
    assert code == 0
    assert [(e["event"], e["source"]) for e in _events(redis_server.url)] == [("signal.raised", "db")]
