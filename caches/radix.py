"""A radix tree over token ids with compressed edges: one node per shared run of tokens.

The tree only knows token ids and an opaque value per node; what a value is (a cache
snapshot) and when one may serve a prompt is the prefix cache's business.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(eq=False)
class Node(Generic[V]):
    edge: list[int]  # the tokens from the parent to this node
    parent: Node[V] | None
    depth: int  # tokens from the root to the end of this node
    children: dict[int, Node[V]] = field(default_factory=dict)  # by the first token of the child's edge
    value: V | None = None


@dataclass
class Match(Generic[V]):
    """Where a token sequence leaves the tree."""

    path: list[Node[V]]  # nodes matched to their end, root first
    length: int  # tokens matched
    partial: Node[V] | None  # the child whose edge matched only in part, if any


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix (binary search over slice comparisons, which run in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _shared(edge: list[int], tokens: Sequence[int], start: int) -> int:
    n = 0
    limit = min(len(edge), len(tokens) - start)
    while n < limit and edge[n] == tokens[start + n]:
        n += 1
    return n


class RadixTree(Generic[V]):
    def __init__(self) -> None:
        self.root: Node[V] = Node([], None, 0)

    def match(self, tokens: Sequence[int]) -> Match[V]:
        node, matched, path = self.root, 0, [self.root]
        while matched < len(tokens):
            child = node.children.get(tokens[matched])
            if child is None:
                return Match(path, matched, None)
            shared = _shared(child.edge, tokens, matched)
            matched += shared
            if shared < len(child.edge):
                return Match(path, matched, child)
            node = child
            path.append(child)
        return Match(path, matched, None)

    def find(self, tokens: Sequence[int]) -> Node[V] | None:
        """The node ending exactly at ``tokens``, if there is one (nothing is created)."""
        found = self.match(tokens)
        if found.partial is not None or found.length < len(tokens) or not tokens:
            return None
        return found.path[-1]

    def node_at(self, tokens: Sequence[int]) -> Node[V]:
        """The node ending exactly at ``tokens``, created (splitting an edge if needed)."""
        found = self.match(tokens)
        node = found.path[-1]
        if found.partial is not None:
            node = self._split(found.partial, found.length - node.depth)
        if node.depth < len(tokens):
            rest = list(tokens[node.depth:])
            child = Node(rest, node, len(tokens))
            node.children[rest[0]] = child
            node = child
        return node

    def prune(self, node: Node[V]) -> None:
        """Remove ``node`` and its empty ancestors if they hold no value and lead nowhere; re-join chains."""
        while node is not self.root and node.value is None and not node.children:
            parent = node.parent
            del parent.children[node.edge[0]]
            node = parent
        if node is not self.root and node.value is None and len(node.children) == 1:
            self._join(node)

    def values_below(self, node: Node[V]) -> Iterator[Node[V]]:
        """Nodes with a value in ``node``'s subtree, shallowest first (``node`` itself included)."""
        queue = deque([node])
        while queue:
            current = queue.popleft()
            if current.value is not None:
                yield current
            queue.extend(current.children.values())

    def tokens_of(self, node: Node[V]) -> list[int]:
        parts = []
        while node is not None:
            parts.append(node.edge)
            node = node.parent
        return [token for edge in reversed(parts) for token in edge]

    def _split(self, child: Node[V], at: int) -> Node[V]:
        """Cut ``child``'s edge after ``at`` tokens; returns the new middle node."""
        parent = child.parent
        middle = Node(child.edge[:at], parent, parent.depth + at)
        parent.children[middle.edge[0]] = middle
        child.edge = child.edge[at:]
        child.parent = middle
        middle.children[child.edge[0]] = child
        return middle

    def _join(self, node: Node[V]) -> None:
        """Merge a value-less node with its only child (keeps one node per shared run)."""
        (child,) = node.children.values()
        parent = node.parent
        child.edge = node.edge + child.edge
        child.parent = parent
        parent.children[child.edge[0]] = child
