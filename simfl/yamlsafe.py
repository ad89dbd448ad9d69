"""YAML reading that cannot be made to exhaust the stack or the memory.

PyYAML's safe loader composes nested collections recursively (3,000 levels of
``[[[...]]]`` end in a RecursionError) and lets aliases share nodes, so a few
lines (``a: &a [x, x]``, ``b: &b [*a, *a]``, ...) describe a document with
billions of nodes once expanded, which every later step (validation, copies,
dumping) would walk. :func:`load` refuses nesting deeper than
:data:`MAX_DEPTH` and documents whose expanded size exceeds :data:`MAX_NODES`,
quickly and with a one-line :class:`ValueError`-style message. It also refuses a
key repeated in one mapping, which PyYAML would silently resolve to its last value
(a sweep listing ``train.lr`` twice would run only the second list).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from simfl.errors import InputError

MAX_DEPTH = 64
"""Deepest nesting of collections accepted (a scenario needs fewer than 10)."""
MAX_NODES = 200_000
"""Most nodes a document may have once every alias is expanded."""
MAX_ALIASES = 1_000
"""Most alias references (``*name``) in one document."""


class LimitError(yaml.YAMLError):
    """A document refused: over a size limit, or a key repeated in one mapping; ``problem`` says which."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None


class _Loader(yaml.SafeLoader):
    """A SafeLoader that counts nesting and aliases while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise LimitError(f"more than {MAX_ALIASES} aliases (*name)")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise LimitError(f"nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)  # type: ignore[no-any-return, misc]
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping, refusing a key that appears twice in it (merge keys ``<<`` aside, which may repeat by design)."""
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen.setdefault(key, line)
            except TypeError:  # an unhashable key: PyYAML's own constructor names it
                continue
            if first is not None:
                where = f"line {line}" if first == line else f"lines {first} and {line}"
                raise LimitError(f"key {key!r} appears twice in one mapping ({where}); give it once")
        return super().construct_mapping(node, deep=deep)


def _expanded(node: Node, memo: dict[int, int], depth: int = 0) -> int:
    """Nodes below ``node`` with every alias expanded (capped just above :data:`MAX_NODES`)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if depth > MAX_DEPTH * 4:  # alias chains add depth the composer did not see
        raise LimitError(f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")
    memo[key] = MAX_NODES + 1  # a node that reaches itself (a recursive alias) counts as too big
    total = 1
    if isinstance(node, SequenceNode):
        children: list[Node] = list(node.value)
    elif isinstance(node, MappingNode):
        children = [n for pair in node.value for n in pair]
    else:
        children = []
    for child in children:
        total += _expanded(child, memo, depth + 1)
        if total > MAX_NODES:
            break
    memo[key] = min(total, MAX_NODES + 1)
    return memo[key]


def load(text: str) -> Any:
    """Parse one YAML document safely (plain data only), within the size limits above."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded(node, {}) > MAX_NODES:
            raise LimitError(f"expands to more than {MAX_NODES} values (aliases referring to aliases)")
        return loader.construct_document(node)
    except RecursionError:
        raise LimitError("nested too deeply") from None
    finally:
        loader.dispose()


def load_file(text: str, where: str) -> Any:
    """:func:`load` of a file's text, every refusal one :class:`~simfl.errors.InputError` naming ``where`` (a tag
    naming a Python object, or any tag of another's, is malformed here: nothing is constructed from it)."""
    try:
        return load(text)
    except LimitError as exc:
        raise InputError(where, f"YAML refused: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(where, f"malformed YAML{at}: {problem}") from None


def check_value(value: Any, where: str) -> None:
    """Hold a Python value given in place of YAML (a dict passed to the API) to the same limits as a document.

    Nested at most :data:`MAX_DEPTH` levels and at most :data:`MAX_NODES` values once shared
    references are counted at every place they appear (a list holding itself is too big);
    raises :class:`simfl.errors.InputError` naming ``where``.
    """
    memo: dict[int, int] = {}
    busy: set[int] = set()

    def size(item: Any, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise InputError(where, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, Mapping):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple, set, frozenset)):
            children = list(item)
        else:
            return 1
        key = id(item)
        if key in memo:
            return memo[key]
        if key in busy:
            raise InputError(where, "contains itself (a list or mapping that refers back to itself)")
        busy.add(key)
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_NODES:
                raise InputError(where, f"holds more than {MAX_NODES} values (shared references counted where "
                                 "they appear), the limit of a scenario")
        busy.discard(key)
        memo[key] = total
        return total

    size(value, 0)


def short_value(value: Any) -> str:
    """A value as shown in messages and tables: compact YAML flow style on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return text.removesuffix("...").strip()
