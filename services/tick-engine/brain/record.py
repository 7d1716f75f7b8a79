"""A frozen record class without the :mod:`dataclasses` module, for :class:`brain.settings.Settings`.

``brain hook session-start`` runs at every agent session start and reads a handful of settings.
Importing :mod:`dataclasses` (and :mod:`inspect` under it) and generating the 50-field settings
class took a third of its time. :mod:`brain.settings` therefore declares ``Settings`` with the
real ``@dataclass(frozen=True)`` for the type checker and with this module at run time: the
same fields, defaults, constructor, ``==``, ``hash``, ``repr`` and frozenness (a test compares the
two), and ``__dataclass_fields__`` built on first use, so :func:`dataclasses.fields`,
:func:`dataclasses.replace` and :func:`dataclasses.asdict` work on it as on any dataclass.

Only what ``Settings`` uses is here: frozen classes whose every field has a default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

_FIELDS = "__record_fields__"


class Field:
    """A field as :func:`field` declares it; ``name`` and ``type`` are set by :func:`dataclass`."""

    __slots__ = ("default", "metadata", "name", "type")

    def __init__(self, default: Any, metadata: Mapping[str, Any]) -> None:
        self.name = ""
        self.type: Any = None
        self.default = default
        self.metadata = MappingProxyType(dict(metadata))


def field(*, default: Any, metadata: Mapping[str, Any]) -> Any:
    return Field(default, metadata)


def fields(class_or_instance: Any) -> tuple[Field, ...]:
    found: tuple[Field, ...] = getattr(class_or_instance, _FIELDS)
    return found


def replace(obj: Any, /, **changes: Any) -> Any:
    """A copy of ``obj`` with ``changes`` (an unknown name raises ``TypeError``, as the constructor does)."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    return type(obj)(**{**values, **changes})


def _frozen_error(verb: str, name: str) -> AttributeError:
    from dataclasses import FrozenInstanceError  # only on this error path

    return FrozenInstanceError(f"cannot {verb} field {name!r}")


class _DataclassFields:
    """``__dataclass_fields__``, made by the dataclasses module itself the first time it is read."""

    def __get__(self, instance: Any, owner: type) -> Any:
        import dataclasses

        shadow = dataclasses.make_dataclass(
            owner.__name__,
            [(f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata)) for f in fields(owner)],
            frozen=True,
        )
        real = getattr(shadow, "__dataclass_fields__")  # noqa: B009 - made at run time
        type.__setattr__(owner, "__dataclass_fields__", real)
        return real


def dataclass(*, frozen: bool) -> Callable[[type], type]:
    """``@dataclass(frozen=True)`` for a class whose every field is ``name: type = field(...)``."""
    if not frozen:
        raise TypeError("brain.record makes frozen classes only")

    def build(cls: type) -> type:
        declared: list[Field] = []
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 - inspect is what this avoids
            spec = cls.__dict__.get(name)
            if not isinstance(spec, Field):
                raise TypeError(f"{cls.__name__}.{name}: every field needs field(default=...)")
            spec.name, spec.type = name, annotation
            setattr(cls, name, spec.default)
            declared.append(spec)
        _complete(cls, tuple(declared))
        return cls

    return build


def _complete(cls: type, declared: tuple[Field, ...]) -> None:
    names = tuple(f.name for f in declared)
    defaults = {f.name: f.default for f in declared}
    title = cls.__qualname__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{title}.__init__() takes {len(names) + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        values = dict(defaults)
        values.update(zip(names, args, strict=False))  # the first fields, positionally
        for name, value in kwargs.items():
            if name not in values:
                raise TypeError(f"{title}.__init__() got an unexpected keyword argument '{name}'")
            if name in names[: len(args)]:
                raise TypeError(f"{title}.__init__() got multiple values for argument '{name}'")
            values[name] = value
        object.__setattr__(self, "__dict__", values)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise _frozen_error("assign to", name)

    def __delattr__(self: Any, name: str) -> None:
        raise _frozen_error("delete", name)

    def _values(self: Any) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in names])

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return _values(self) == _values(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(_values(self))

    def __repr__(self: Any) -> str:
        return f"{title}(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in names) + ")"

    for function in (__init__, __setattr__, __delattr__, __eq__, __hash__, __repr__):
        function.__qualname__ = f"{title}.{function.__name__}"
        setattr(cls, function.__name__, function)
    setattr(cls, _FIELDS, declared)
    setattr(cls, "__match_args__", names)  # noqa: B010 - cls is a plain type to the type checker
    setattr(cls, "__dataclass_fields__", _DataclassFields())  # noqa: B010
