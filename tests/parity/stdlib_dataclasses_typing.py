from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass, field


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Flags(enum.IntFlag):
    R = 4
    W = 2


@dataclass(order=True, frozen=True)
class Item:
    name: str
    price: float = 0.0
    tags: tuple[str, ...] = field(default_factory=tuple)


T = typing.TypeVar("T")


class Box(typing.Generic[T]):
    def __init__(self, value: T) -> None:
        self.value = value


class Movie(typing.TypedDict):
    title: str
    year: int


def first(xs: list[T]) -> T | None:
    return xs[0] if xs else None


items = sorted([Item("b", 2.0), Item("a", 3.0, ("x",)), Item("a", 1.0)])
print(items)
print(dataclasses.asdict(items[0]), dataclasses.replace(items[1], price=9.5))
try:
    items[0].name = "z"
except dataclasses.FrozenInstanceError as exc:
    print("frozen:", type(exc).__name__, exc)
print([f.name for f in dataclasses.fields(Item)], Item.__annotations__)
print(Color.RED, Color(2), list(Color), Flags.R | Flags.W, repr(Color.GREEN))
print(typing.get_type_hints(first), Box[int](3).value, first([]))
m: Movie = {"title": "x", "year": 1999}
print(m, Movie.__required_keys__ == frozenset({"title", "year"}))
print(typing.get_origin(list[int]), typing.get_args(dict[str, int]), typing.Optional[int])
