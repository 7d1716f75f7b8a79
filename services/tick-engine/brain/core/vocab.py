"""The closed vocabularies of the arc schema and the marker grammar (SPEC §4, §6)."""

from __future__ import annotations

REGIONS = ("left-hemisphere", "right-hemisphere", "amygdala", "pineal", "frontal-lobe")
STATUSES = ("active", "complete", "stalled", "abandoned", "resolved", "graduated", "merged", "split")
TOMBSTONE_STATUSES = frozenset({"merged", "split"})
#: An arc in one of these states is "closed": its @hot floor and @inject blocks no longer count.
CLOSED_STATUSES = frozenset({"complete", "resolved", "abandoned", "graduated", "merged", "split"})
#: @inject blocks in these arcs never reach the feed (SPEC §7).
NO_INJECT_STATUSES = frozenset({"resolved", "merged", "graduated", "split"})

MARKER_TYPES = ("hot", "lesson", "signal", "decision", "edge", "inject", "todo", "milestone")
#: Types that only exist as blocks (an opening tag without its closing tag is unterminated).
BLOCK_ONLY_TYPES = frozenset({"lesson", "signal", "decision", "inject", "todo"})
#: Types that only exist inline.
INLINE_ONLY_TYPES = frozenset({"edge"})

SEVERITIES = ("info", "warning", "critical", "nuclear", "resolved")
#: Higher is more severe; "resolved" sorts last.
SEVERITY_RANK = {"nuclear": 4, "critical": 3, "warning": 2, "info": 1, "resolved": 0}
ALARM_SEVERITIES = frozenset({"critical", "nuclear"})

EDGE_TYPES = ("parent", "child", "sibling", "related", "unblocks", "supersedes")
INJECT_TARGETS_FIXED = ("claude.md", "all")

#: The files a project feed's "used here" line keeps at the least: the tick lists more when its file
#: fits its budget with them (:mod:`brain.core.project_feed`), and the hook cuts the line back to
#: these before it drops a whole line (``brain.pipeline.hook.shorter_files``).
TIGHT_FILES = 60

#: Where agents and operators leave notes for the next tick to drain (SPEC §15).
INBOX = "raw/inbox"

#: The global feed's files (SPEC §7), built by :mod:`brain.core.feed`; named here, where the
#: session-start hook reads them without importing the feed builder.
HOT_ARCS, SIGNALS, INJECT, INTENT, LAST_DIFF, AMYGDALA_ACTIVE, RECENT_WORK = (
    "hot-arcs.md",
    "signals.md",
    "inject.md",
    "intent.md",
    "last-tick-diff.md",
    "amygdala-active.md",
    "recent-work.md",
)

#: Graduation folder by region (SPEC §7); anything else graduates to left/projects.
GRADUATION_FOLDERS = {
    "left-hemisphere": "left/projects",
    "right-hemisphere": "right/ideas",
    "pineal": "pineal",
    "amygdala": "left/incidents",
}
DEFAULT_GRADUATION_FOLDER = "left/projects"

CONSCIOUS = "frontal-lobe/conscious"
UNCONSCIOUS = "frontal-lobe/unconscious"
CLUSTERS = "clusters"
AMYGDALA = "amygdala"

#: Folders `brain init` creates (SPEC §3).
COMPARTMENTS = (
    "clusters",
    CONSCIOUS,
    UNCONSCIOUS,
    AMYGDALA,
    "pineal",
    "left/projects",
    "left/research",
    "left/reference",
    "left/incidents",
    "left/decisions",
    "right/ideas",
    "right/strategy",
    "right/life",
    "right/creative",
    "right/risk",
    "brain-feed",
)
#: Top-level folders the keeper manages; arcs elsewhere are the operator's to place.
MANAGED_ROOTS = frozenset({"clusters", "frontal-lobe", "pineal", "left", "right"})
