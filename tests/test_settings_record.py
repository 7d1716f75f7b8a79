"""``Settings`` is a :mod:`brain.record` class at run time and a dataclass to the type checker:
the two must behave alike, and every dataclasses function must work on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from brain import record
from brain.settings import DEFAULTS, Settings
from brain.settings import values as settings_values


def _real() -> type:
    """The same declarations through the real ``@dataclass(frozen=True)``."""
    return dataclasses.make_dataclass(
        "Settings",
        [(f.name, f.type, dataclasses.field(default=f.default, metadata=dict(f.metadata))) for f in record.fields(Settings)],
        frozen=True,
    )


def test_fields_are_the_declared_ones_with_their_defaults_and_metadata() -> None:
    real = dataclasses.fields(Settings)
    assert [f.name for f in real] == list(Settings.__annotations__)
    assert [(f.name, f.type, f.default, dict(f.metadata)) for f in real] == [
        (f.name, f.type, f.default, dict(f.metadata)) for f in record.fields(Settings)]
    assert all(f.type == Settings.__annotations__[f.name] for f in real)  # the annotation strings
    assert DEFAULTS.feed_token_budget == 2000 and Settings.feed_token_budget == 2000
    assert dataclasses.is_dataclass(Settings) and dataclasses.is_dataclass(DEFAULTS)


def test_construction_equality_hash_and_repr_match_a_real_dataclass() -> None:
    real = _real()
    assert repr(Settings()) == repr(real())
    mine = Settings(vault=Path("/v"), feed_token_budget=5)
    theirs = real(vault=Path("/v"), feed_token_budget=5)
    assert repr(mine) == repr(theirs)
    assert hash(mine) == hash(theirs) == hash(Settings(vault=Path("/v"), feed_token_budget=5))
    assert mine == Settings(vault=Path("/v"), feed_token_budget=5) != Settings(vault=Path("/v"))
    assert mine != theirs  # a different class, as between two dataclasses
    assert Settings(Path("/v")) == Settings(vault=Path("/v"))  # positional, in field order
    assert dataclasses.asdict(mine) == dataclasses.asdict(theirs)
    assert dataclasses.replace(mine, feed_token_budget=9) == Settings(vault=Path("/v"), feed_token_budget=9)
    assert mine.replace(feed_token_budget=9).feed_token_budget == 9


def test_bad_construction_and_assignment_raise_as_a_dataclass_does() -> None:
    real = _real()
    for make in (Settings, real):
        with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
            make(nope=1)
        with pytest.raises(TypeError, match="multiple values for argument 'vault'"):
            make(Path("/a"), vault=Path("/b"))
        with pytest.raises(TypeError, match="positional arguments"):
            make(*range(len(record.fields(Settings)) + 1))
        made = make()
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'vault'"):
            made.vault = Path("/x")  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'vault'"):
            del made.vault  # type: ignore[misc]


def test_a_class_needs_frozen_and_a_default_for_every_field() -> None:
    with pytest.raises(TypeError, match="frozen"):
        record.dataclass(frozen=False)

    class Bare:
        x: int

    with pytest.raises(TypeError, match=r"Bare\.x"):
        record.dataclass(frozen=True)(Bare)


def test_values_are_asdict_without_building_the_dataclass_fields() -> None:
    # A class of its own, so no earlier test has made its __dataclass_fields__ yet.
    @record.dataclass(frozen=True)
    class Knobs:
        name: str = record.field(default="a", metadata={})
        paths: tuple[str, ...] = record.field(default=("x", "y"), metadata={})
        root: Path = record.field(default=Path("/v"), metadata={})

    knobs = Knobs(name="b")
    assert settings_values(knobs) == {"name": "b", "paths": ("x", "y"), "root": Path("/v")}
    assert type(Knobs.__dict__["__dataclass_fields__"]).__name__ == "_DataclassFields"  # still not built
    assert settings_values(knobs) == dataclasses.asdict(knobs)
    mine = Settings(vault=Path("/v"), feed_token_budget=5)
    assert settings_values(mine) == dataclasses.asdict(mine)
