"""The amygdala (SPEC §11), pure part: events, alarms, their files, and what the tick publishes.

Two directions over Redis Streams:

* **Consume** (``brain amygdala``): any producer in the fleet adds an event to a stream;
  :func:`parse_event` validates it, :func:`apply_event` / :func:`expire_silent` turn events
  and silence into the set of active alarms, and :func:`render_alarm_file` /
  :func:`render_active_feed` give the files the consumer writes.
* **Publish** (inside the tick): :func:`plan_signal_steps` diffs the open critical / nuclear
  signals of the vault against what was already published, so every state change is
  published exactly once.

**The brain never raises an alarm from its own tick events.** A message that carries both
``v`` and ``tick_id`` is the tick's own broadcast of a signal that already lives in an arc
(and in ``signals.md``). Turning it into an ``amygdala/`` alarm would duplicate that arc, and
the next tick would find the alarm's ``@signal`` block and publish it again: a feedback loop.
Such messages are acknowledged and ignored (they neither raise nor clear anything).

Everything here is pure: no disk, no network, no clock (``now`` is a parameter).
Event text is hostile until proven otherwise: it is cut to a bounded length, folded into one
line of printable characters, and ``<``/``>`` become ``&lt;``/``&gt;`` so it can never open or
close a marker; the alarm's file name is a slug (plus a hash) of its source, never a path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from brain.core import feed, frontmatter, markers
from brain.core.text import clean_text, cut
from brain.core.timeutil import iso, parse_instant
from brain.core.vocab import ALARM_SEVERITIES, AMYGDALA, AMYGDALA_ACTIVE, SEVERITIES, SEVERITY_RANK

EVENT_RAISED = "signal.raised"
EVENT_CLEARED = "signal.cleared"
EVENT_NAMES = (EVENT_RAISED, EVENT_CLEARED)
#: Value of the ``v`` field of the events the tick publishes.
EVENT_FORMAT_VERSION = "1"
#: Severity written in a ``signal.cleared`` event.
CLEARED_SEVERITY = "resolved"

ACTIVE_FEED_NAME = AMYGDALA_ACTIVE
ACTIVE_FEED_PRIORITY = 100

#: Bounds on hostile input; longer text is cut on a word boundary with an ellipsis.
ALARM_TEXT_MAX_CHARS = 1000
FEED_TEXT_MAX_CHARS = 240
SOURCE_MAX_CHARS = 120
SLUG_MAX_CHARS = 48
#: ``heat`` written into an alarm file (the keeper may recompute it).
ALARM_HEAT = {"nuclear": 10, "critical": 9}

_SLUG_RUN = re.compile(r"[^a-z0-9]+")
_SPACE_RUN = re.compile(r"\s+")
#: A leading character that would make markdown read the line as something other than a paragraph
#: (a ``---`` rule / frontmatter fence, a heading, a list item, a fence...).
_BLOCK_STARTERS = frozenset("-=#+*~`|")


# --- hostile text -----------------------------------------------------------------------


def field_text(value: object) -> str:
    """A stream field as text: bytes are decoded as UTF-8, undecodable bytes become U+FFFD."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def fold(text: str, max_chars: int) -> str:
    """``text`` as one line of printable characters, at most ``max_chars`` long (not redacted).

    Non-printable characters (controls, line and paragraph separators, format characters)
    become spaces and whitespace runs collapse; megabyte inputs are cut before they are looked at.
    """
    raw = text[: max_chars * 4]
    printable = "".join(ch if ch.isprintable() else " " for ch in raw)
    return cut(_SPACE_RUN.sub(" ", printable).strip(), max_chars)


def one_line(text: str, max_chars: int) -> str:
    """Hostile text as one safe markdown paragraph: :func:`brain.core.text.clean_text`, then escaped.

    ``clean_text`` folds it into one printable, redacted line without marker syntax; here
    ``<``/``>`` also become ``&lt;``/``&gt;`` and a leading block-syntax character is
    backslash-escaped, so the line can never be a ``---`` fence, a heading or a list item.
    """
    safe = clean_text(text, max_chars).replace("<", "&lt;").replace(">", "&gt;")
    if safe and safe[0] in _BLOCK_STARTERS:
        safe = "\\" + safe
    return safe


def alarm_slug(source: str) -> str:
    """A file-name-safe slug of ``source``: ``[a-z0-9-]``, never empty, distinct per source.

    A source that is already a clean slug is used as is; any other source gets the first
    8 hex digits of its SHA-1 appended, so ``Auth Broker`` and ``auth-broker`` stay two alarms
    and ``../../etc/passwd`` becomes ``etc-passwd-<hash>``.
    """
    base = _SLUG_RUN.sub("-", source.lower()).strip("-")[:SLUG_MAX_CHARS].strip("-")
    if base and base == source:
        return base
    digest = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
    return f"{base}-{digest}" if base else digest


def alarm_id_for(source: str) -> str:
    """The alarm's ``cluster_id`` (and file stem): ``amygdala-<slug>``."""
    return f"amygdala-{alarm_slug(source)}"


def alarm_path(alarm_id: str) -> str:
    """Vault-relative path of an alarm file."""
    return f"{AMYGDALA}/{alarm_id}.md"


# --- events -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AlarmEvent:
    """A valid external event: raise (or refresh) or clear the alarm of ``source``."""

    action: Literal["raise", "clear"]
    severity: str
    source: str  # sanitized display form; the alarm's identity
    text: str  # sanitized single paragraph
    stream: str
    message_id: str

    @property
    def alarm_id(self) -> str:
        return alarm_id_for(self.source)


@dataclass(frozen=True)
class IgnoredEvent:
    """A message that changes no alarm; acknowledged so it is never delivered again."""

    stream: str
    message_id: str
    reason: str
    own: bool = False  # the brain's own tick event


def is_own_event(fields: Mapping[str, str]) -> bool:
    """The brain's own tick events carry ``v`` and ``tick_id``; they never raise an alarm."""
    return "tick_id" in fields and "v" in fields


def decode_fields(raw: Mapping[Any, Any]) -> dict[str, str]:
    """Stream fields as ``str -> str`` (keys stripped and lower-cased, bytes decoded)."""
    return {field_text(key).strip().lower(): field_text(value) for key, value in raw.items()}


#: Severity words of other producers (health checks, deploys, hosts, pagers), in our vocabulary.
SEVERITY_SYNONYMS = {
    "nuclear": "nuclear", "emergency": "nuclear", "emerg": "nuclear", "fatal": "nuclear", "p0": "nuclear",
    "sev0": "nuclear", "disaster": "nuclear",
    "critical": "critical", "crit": "critical", "alert": "critical", "p1": "critical", "sev1": "critical",
    "warning": "warning", "warn": "warning", "error": "warning", "err": "warning", "high": "warning",
    "p2": "warning", "sev2": "warning",
    "info": "info", "information": "info", "notice": "info", "debug": "info", "low": "info", "p3": "info",
    "resolved": "resolved", "ok": "resolved", "cleared": "resolved", "recovered": "resolved", "normal": "resolved",
}
#: With no severity field, the event's name and text are classified by these words (documented in
#: docs/amygdala.md): loss or compromise is nuclear; something down or exhausted is critical.
_NUCLEAR_WORDS = re.compile(
    r"\b(?:data[ _-]?loss|data[ _-]?corruption|corrupted|breach(?:ed)?|compromised|ransomware|"
    r"secrets?[ _-]?leak(?:ed)?|wiped)\b",
    re.IGNORECASE,
)
_CRITICAL_WORDS = re.compile(
    r"\b(?:down|outage|unreachable|unavailable|crash(?:ed|ing|loop(?:backoff)?)?|panic(?:ked)?|oom(?:killed)?|"
    r"out[ _-]of[ _-]memory|disk[ _-]full|no[ _-]space|exhausted|fail(?:ed|ing)?[ _-]over|split[ _-]brain)\b",
    re.IGNORECASE,
)
#: Fields other producers name their subject with, tried in order when ``source`` is absent.
_SOURCE_FIELDS = ("source", "host", "hostname", "node", "service", "instance", "check", "name")
_TEXT_FIELDS = ("text", "message", "summary", "description")


def classify(text: str) -> str | None:
    """``nuclear`` / ``critical`` for text that says so (see the word lists above), else None."""
    probe = text[:4000].replace(".", " ")
    if _NUCLEAR_WORDS.search(probe):
        return "nuclear"
    if _CRITICAL_WORDS.search(probe):
        return "critical"
    return None


def parse_event(raw: Mapping[Any, Any] | None, *, stream: str, message_id: str) -> AlarmEvent | IgnoredEvent:
    """Validate one stream message (fields as delivered by Redis, bytes or str).

    Any producer may raise an alarm, in our vocabulary or not (documented in docs/amygdala.md):

    * ``v`` + ``tick_id`` present: the brain's own tick event, ignored;
    * ``signal.cleared`` (any source), or a severity meaning resolved (``resolved``, ``ok``,
      ``cleared``, ``recovered``), clears the alarm of that source;
    * any other event (``signal.raised``, ``node.down``, ``deploy.failed``...) raises one when
      its ``severity`` (or ``level``) is ``critical`` or ``nuclear`` — other producers' words are
      mapped by :data:`SEVERITY_SYNONYMS` (``crit``, ``alert``, ``fatal``, ``emergency``, ``p0``...);
      without a severity, the event name and text are classified by :func:`classify`;
      ``info`` / ``warning`` (and unclassified text) are below alarm level and ignored;
    * the source is ``source``, else ``host``, ``node``, ``service``, ``instance``, ``check`` or
      ``name``, else the event name; the text is ``text``, else ``message``, ``summary`` or
      ``description``; it may be empty.
    """

    def ignored(reason: str, *, own: bool = False) -> IgnoredEvent:
        return IgnoredEvent(stream=stream, message_id=message_id, reason=reason, own=own)

    if not raw:  # XREADGROUP / XAUTOCLAIM hand out a deleted entry with no fields
        return ignored("message was deleted from the stream")
    fields = decode_fields(raw)
    if is_own_event(fields):
        return ignored("the brain's own tick event (carries v and tick_id)", own=True)
    event = one_line(fields.get("event", ""), 80).lower()
    if not event and not any(fields.get(name, "").strip() for name in ("severity", "level")):
        return ignored("no event and no severity")
    named = next((fields[name] for name in _SOURCE_FIELDS if fields.get(name, "").strip()), "")
    source = one_line(named or (event if event not in EVENT_NAMES else ""), SOURCE_MAX_CHARS)
    if not source:
        return ignored("no source")
    raw_text = next((fields[name] for name in _TEXT_FIELDS if fields.get(name)), "")
    text = one_line(raw_text, ALARM_TEXT_MAX_CHARS)
    given = (fields.get("severity") or fields.get("level") or "").strip().lower()
    severity = SEVERITY_SYNONYMS.get(given, given)
    if event == EVENT_CLEARED or severity == CLEARED_SEVERITY:
        return AlarmEvent("clear", CLEARED_SEVERITY, source, text, stream, message_id)
    if not given:
        classified = classify(f"{event} {raw_text}")
        if classified is None:
            return ignored(f"event {event or '(unnamed)'!r} has no severity and its text does not classify as "
                           "critical or nuclear (below alarm level)")
        severity = classified
    if severity not in SEVERITIES:
        return ignored(f"unknown severity {one_line(given, 40)!r}")
    if severity not in ALARM_SEVERITIES:
        return ignored(f"severity {severity} is below alarm level (critical, nuclear)")
    return AlarmEvent("raise", severity, source, text or one_line(event, ALARM_TEXT_MAX_CHARS), stream, message_id)


# --- alarms -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Alarm:
    alarm_id: str
    source: str
    severity: str
    text: str
    raised_at: datetime
    last_event_at: datetime
    stream: str
    events: int = 1

    @property
    def path(self) -> str:
        return alarm_path(self.alarm_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "alarm_id": self.alarm_id,
            "source": self.source,
            "severity": self.severity,
            "text": self.text,
            "raised_at": iso(self.raised_at),
            "last_event_at": iso(self.last_event_at),
            "stream": self.stream,
            "events": self.events,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Alarm | None:
        """An alarm from the state file, or None for an entry that is not one."""
        try:
            source = one_line(str(data["source"]), SOURCE_MAX_CHARS)
            severity = str(data["severity"])
            raised = parse_instant(data["raised_at"])
            last = parse_instant(data["last_event_at"])
        except (KeyError, TypeError):
            return None
        if not source or severity not in ALARM_SEVERITIES or raised is None or last is None:
            return None
        return cls(
            alarm_id=alarm_id_for(source),
            source=source,
            severity=severity,
            text=one_line(str(data.get("text", "")), ALARM_TEXT_MAX_CHARS),
            raised_at=raised,
            last_event_at=last,
            stream=str(data.get("stream", "")),
            events=data["events"] if isinstance(data.get("events"), int) else 1,
        )


Alarms = Mapping[str, Alarm]


@dataclass(frozen=True)
class AlarmChange:
    kind: Literal["raised", "updated", "cleared"]
    alarm: Alarm
    reason: str


def apply_event(alarms: Alarms, event: AlarmEvent, now: datetime) -> tuple[dict[str, Alarm], AlarmChange | None]:
    """The alarms after ``event``; the change is None when nothing changed (clear of no alarm).

    A raise for an active source refreshes its silence timer and takes the event's severity and
    text (the latest event describes the present); ``raised_at`` stays.
    """
    out = dict(alarms)
    current = out.get(event.alarm_id)
    if event.action == "clear":
        if current is None:
            return out, None
        del out[event.alarm_id]
        return out, AlarmChange("cleared", current, f"signal.cleared from {event.source}")
    if current is None:
        alarm = Alarm(
            alarm_id=event.alarm_id,
            source=event.source,
            severity=event.severity,
            text=event.text,
            raised_at=now,
            last_event_at=now,
            stream=event.stream,
        )
        out[alarm.alarm_id] = alarm
        return out, AlarmChange("raised", alarm, f"{event.severity} from {event.source}")
    alarm = replace(
        current,
        severity=event.severity,
        text=event.text,
        last_event_at=max(now, current.last_event_at),
        stream=event.stream,
        events=current.events + 1,
    )
    out[alarm.alarm_id] = alarm
    return out, AlarmChange("updated", alarm, f"{event.severity} from {event.source}")


def expire_silent(alarms: Alarms, now: datetime, clear_after: timedelta) -> tuple[dict[str, Alarm], list[AlarmChange]]:
    """Clear every alarm whose source has been silent for ``clear_after`` or longer."""
    out: dict[str, Alarm] = {}
    cleared: list[AlarmChange] = []
    minutes = int(clear_after.total_seconds() // 60)
    for alarm_id, alarm in alarms.items():
        if now - alarm.last_event_at >= clear_after:
            cleared.append(AlarmChange("cleared", alarm, f"no event for {minutes} minutes"))
        else:
            out[alarm_id] = alarm
    return out, cleared


def alarms_to_json(alarms: Alarms) -> dict[str, Any]:
    return {"version": 1, "alarms": [alarms[key].to_json() for key in sorted(alarms)]}


def alarms_from_json(data: object) -> dict[str, Alarm]:
    """Tolerant: entries that are not alarms are dropped (the state file is ours, but disks lie)."""
    if not isinstance(data, Mapping):
        return {}
    entries = data.get("alarms")
    out: dict[str, Alarm] = {}
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, Mapping):
                alarm = Alarm.from_json(entry)
                if alarm is not None:
                    out[alarm.alarm_id] = alarm
    return out


def ordered(alarms: Iterable[Alarm]) -> list[Alarm]:
    """Most severe first, then oldest first: stable while nothing is raised or cleared."""
    return sorted(alarms, key=lambda a: (-SEVERITY_RANK[a.severity], a.raised_at, a.alarm_id))


# --- files ------------------------------------------------------------------------------


def render_alarm_file(alarm: Alarm, *, clear_minutes: int) -> str:
    """``amygdala/<alarm_id>.md``: an arc with one ``@signal`` block holding the event text."""
    title = f"Alarm: {alarm.source}"
    meta = frontmatter.dump(
        {
            "cluster_id": alarm.alarm_id,
            "title": title,
            "region": "amygdala",
            "status": "active",
            "heat": ALARM_HEAT.get(alarm.severity, 9),
            "created": iso(alarm.raised_at),
            "last_active": iso(alarm.last_event_at),
        }
    )
    block = markers.render_block(
        "signal",
        (("severity", alarm.severity), ("source", alarm_slug(alarm.source))),
        alarm.text or "(no text)",
    )
    return (
        f"---\n{meta}---\n"
        f"# {title}\n\n"
        f"{block}\n\n"
        f"Raised {iso(alarm.raised_at)}, last event {iso(alarm.last_event_at)} "
        f"({alarm.events} event{'s' if alarm.events != 1 else ''}). "
        f"Clears on a `signal.cleared` event from this source, "
        f"or after {clear_minutes} minutes without an event.\n"
    )


def render_active_feed(alarms: Alarms, *, ttl_seconds: int) -> str | None:
    """``brain-feed/amygdala-active.md``, or None when no alarm is active (the file goes away).

    A feed file like the keeper's (same renderer; never cut by the feed budget); its ``id``
    carries the date of the newest alarm, so the bytes change only when the alarms do.
    """
    if not alarms:
        return None
    listed = ordered(alarms.values())
    newest = max(alarm.raised_at for alarm in listed)
    page = feed.FeedFile(
        ACTIVE_FEED_NAME,
        "Active alarms",
        ACTIVE_FEED_PRIORITY,
        listed[0].severity,
        newest.date().isoformat(),
        ttl_seconds,
        "# Active alarms\n\nRaised by the fleet's monitors over the amygdala stream. "
        "Treat the systems named here as unsafe until the alarm clears.\n",
    )
    for alarm in listed:
        text = cut(alarm.text, FEED_TEXT_MAX_CHARS) if alarm.text else "(no text)"
        page.items.append(
            feed.FeedItem(
                f"- **{alarm.severity.upper()}** {alarm.source}: {text} "
                f"(since {iso(alarm.raised_at)}, [[{alarm.alarm_id}]])"
            )
        )
    return page.render()


# --- publishing (the tick) ---------------------------------------------------------------


@dataclass(frozen=True)
class PublishedSignal:
    """One signal of the vault as the tick hands it to the publisher.

    Pass every **open** ``critical`` / ``nuclear`` signal, and optionally the ones cleared in
    this tick (any other severity, e.g. ``resolved``, whose ``text`` then becomes the text of
    the ``signal.cleared`` event). A signal is identified by ``(arc, source)``.
    """

    arc: str  # cluster_id of the arc holding the signal
    source: str  # the marker's source= slug
    severity: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.arc}\x1f{self.source}"

    @property
    def is_open_alarm(self) -> bool:
        return self.severity in ALARM_SEVERITIES

    def to_json(self) -> dict[str, str]:
        return {"arc": self.arc, "source": self.source, "severity": self.severity, "text": self.text}


@dataclass(frozen=True)
class SignalEvent:
    """One message the tick adds to the stream."""

    event: str  # signal.raised | signal.cleared
    severity: str
    source: str
    arc: str
    text: str

    def fields(self, *, tick_id: str, ts: datetime) -> dict[str, str]:
        """The stream fields, in the documented order (``v`` + ``tick_id`` mark our own events)."""
        return {
            "v": EVENT_FORMAT_VERSION,
            "event": self.event,
            "severity": self.severity,
            "source": self.source,
            "arc": self.arc,
            "text": self.text,
            "tick_id": tick_id,
            "ts": iso(ts),
        }


@dataclass(frozen=True)
class PublishStep:
    """Set the published state of ``key`` to ``after`` (None: forget it), after sending ``event``.

    ``event`` None is a state-only step (a de-escalation, which is not broadcast).
    """

    key: str
    after: PublishedSignal | None
    event: SignalEvent | None


def _clean_signal(signal: PublishedSignal) -> PublishedSignal:
    return PublishedSignal(
        arc=fold(signal.arc, 200),
        source=fold(signal.source, SOURCE_MAX_CHARS),
        severity=signal.severity.strip().lower(),
        text=clean_text(signal.text, ALARM_TEXT_MAX_CHARS),
    )


def published_from_json(data: object) -> dict[str, PublishedSignal]:
    if not isinstance(data, Mapping) or not isinstance(data.get("signals"), list):
        return {}
    out: dict[str, PublishedSignal] = {}
    for entry in data["signals"]:
        if isinstance(entry, Mapping) and all(isinstance(entry.get(k), str) for k in ("arc", "source", "severity")):
            signal = PublishedSignal(entry["arc"], entry["source"], entry["severity"], str(entry.get("text", "")))
            if signal.is_open_alarm:
                out[signal.key] = signal
    return out


def published_to_json(published: Mapping[str, PublishedSignal]) -> dict[str, Any]:
    return {"version": 1, "signals": [published[key].to_json() for key in sorted(published)]}


def plan_signal_steps(
    published: Mapping[str, PublishedSignal], current: Sequence[PublishedSignal]
) -> list[PublishStep]:
    """What to send so the stream reflects ``current``, given what was ``published`` before.

    * a new open signal → ``signal.raised``;
    * a severity that rose (critical → nuclear) → ``signal.raised`` again, with the new severity;
    * a severity that fell but stays an alarm (nuclear → critical) → state only, nothing sent;
    * a published signal that is gone, or no longer critical / nuclear → ``signal.cleared``.

    Duplicate keys keep the most severe entry. Steps come sorted by key: deterministic.
    """
    wanted: dict[str, PublishedSignal] = {}
    closing: dict[str, PublishedSignal] = {}
    for raw in current:
        signal = _clean_signal(raw)
        bucket = wanted if signal.is_open_alarm else closing
        held = bucket.get(signal.key)
        if held is None or SEVERITY_RANK.get(signal.severity, 0) > SEVERITY_RANK.get(held.severity, 0):
            bucket[signal.key] = signal
    steps: list[PublishStep] = []
    for key in sorted(set(wanted) | set(published)):
        now_open, before = wanted.get(key), published.get(key)
        if now_open is not None and before is None:
            steps.append(PublishStep(key, now_open, _event(EVENT_RAISED, now_open)))
        elif now_open is not None and before is not None:
            rank_now, rank_before = SEVERITY_RANK[now_open.severity], SEVERITY_RANK[before.severity]
            if rank_now > rank_before:
                steps.append(PublishStep(key, now_open, _event(EVENT_RAISED, now_open)))
            elif rank_now < rank_before:
                steps.append(PublishStep(key, now_open, None))
        elif before is not None:
            reason = closing.get(key)
            text = reason.text if reason is not None and reason.text else before.text
            cleared = PublishedSignal(before.arc, before.source, CLEARED_SEVERITY, text)
            steps.append(PublishStep(key, None, _event(EVENT_CLEARED, cleared)))
    return steps


def _event(kind: str, signal: PublishedSignal) -> SignalEvent:
    return SignalEvent(kind, signal.severity, signal.source, signal.arc, signal.text)
