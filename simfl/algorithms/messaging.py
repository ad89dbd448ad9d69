"""What a server that messages nodes one message at a time asks of the simulation (a Flower ServerApp's grid).

A :class:`Messaging` algorithm is not driven round by round: at each of its turns it hands the simulation the
messages it pushed (each to one node, by key) and what it waits for (:class:`Request`), and hears each message's
end as it comes (:meth:`Messaging.started`, :meth:`Messaging.replied`, :meth:`Messaging.ended`).
:class:`simfl.sim.messages.MessageServer` times them: each node works its messages first come, first served, each
its own client round (its node's next latency draw), and the algorithm's next turn comes when what it waits for is
there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

import torch

from simfl.algorithms.base import Arrival

WaitKind = Literal["all", "any", "nodes", "done"]


@dataclass(frozen=True)
class Request:
    """The end of a turn: messages to send now, in order, and what the next turn waits for.

    ``all``: every message of ``keys`` ended (replied, failed, lost), or ``timeout`` virtual seconds passed (its
    unfinished messages are then dropped: their replies, late, are thrown away); ``any``: a reply to one of ``keys``
    arrived, or all of them ended; ``nodes``: a node's work ended or a node came back (the node list may change);
    ``done``: no turn comes again."""

    wait: WaitKind
    sends: list[tuple[int, int]] = field(default_factory=list)
    """(client, key) of each message pushed since the last turn, in the order pushed."""
    keys: frozenset[int] = frozenset()
    timeout: float | None = None


class Messaging(ABC):
    """An algorithm whose server takes turns between messages (:class:`simfl.sim.messages.MessageServer`)."""

    @abstractmethod
    def turn(self, listed: list[int]) -> Request:
        """The server's turn now (``listed``: the clients it may message, ascending); the first at time 0."""

    @abstractmethod
    def round_weights(self) -> torch.Tensor:
        """The weights a message's client round starts from (its job's input)."""

    @abstractmethod
    def started(self, client: int, key: int) -> None:
        """Message ``key`` leaves for ``client`` now (the dispatch that follows asks for its content)."""

    @abstractmethod
    def replied(self, key: int, arrival: Arrival) -> None:
        """Message ``key``'s reply arrived now (in arrival order)."""

    @abstractmethod
    def ended(self, key: int) -> None:
        """Message ``key`` ended without a reply (its node failed or left) or was dropped when it ran late."""
