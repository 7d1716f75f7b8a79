"""Sessions -> arcs (SPEC §4, §5), kept as one import path for older callers.

The work is split by job: :mod:`brain.core.session` (the session model and the bundle),
:mod:`brain.core.grouping` (which arc a session updates, joins or starts) and
:mod:`brain.core.arc_text` (the markdown of new arcs and the edits to existing ones).
"""

from __future__ import annotations

from brain.core.arc_text import (
    ACTIVE_HOURS,
    SLUG_CHARS,
    TITLE_CHARS,
    RenderedArc,
    cluster_id,
    initial_region,
    initial_status,
    neutral,
    recorded_sessions,
    render_new_arc,
    session_figures,
    slug,
    source_line,
    timeline_line,
    title_from_prompt,
    update_arc_text,
)
from brain.core.grouping import JOINABLE_STATUSES, ArcUpdate, Assignment, ExistingArc, NewArc, assign
from brain.core.session import BUNDLE_VERSION, SESSION_ID_RE, BundleError, Session, is_joyful, parse_bundle

__all__ = [
    "ACTIVE_HOURS",
    "BUNDLE_VERSION",
    "JOINABLE_STATUSES",
    "SESSION_ID_RE",
    "SLUG_CHARS",
    "TITLE_CHARS",
    "ArcUpdate",
    "Assignment",
    "BundleError",
    "ExistingArc",
    "NewArc",
    "RenderedArc",
    "Session",
    "assign",
    "cluster_id",
    "initial_region",
    "initial_status",
    "is_joyful",
    "neutral",
    "parse_bundle",
    "recorded_sessions",
    "render_new_arc",
    "session_figures",
    "slug",
    "source_line",
    "timeline_line",
    "title_from_prompt",
    "update_arc_text",
]
