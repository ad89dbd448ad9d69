"""A round in phases: download, compute, upload (scenario ``network:``, docs/contention.md).

With a :class:`Network`, :meth:`World.dispatch <simfl.sim.world.World.dispatch>` starts a round with its download
instead of scheduling its end: the download moves the model's bytes from the server (its egress, shared), the
compute phase lasts the latency model's draw, and the upload moves the bytes back (the server's ingress, shared).
When the upload ends the round ends as any round does (:meth:`World.end_round <simfl.sim.world.World.end_round>`):
the scheduler takes the update, and while the server aggregates (``server_time``) later arrivals wait in its queue.
When transfers end is :mod:`simfl.sim.link`'s rule, the one place that decides it.

- A round that fails (``availability.p``) fails at the end of its compute: it sends nothing.
- A departure during any phase ends the round there (its transfer leaves the link, or its compute is cut), at its
  ``leave`` wake-up, created at dispatch: a departure at the very instant a phase ends takes the round.
- A recalled round (an asynchronous rule's recall, :meth:`Network.cut`) ends its compute at its next epoch boundary
  (one epoch when recalled before its compute began); its upload then moves the whole model as any upload does.
- The weights a client trains from are the server's at dispatch (the download carries that version), so an arrival's
  staleness counts the updates since its dispatch, as without phases.
- A client's ``latency`` is its compute draw while the round goes, and the round's whole time (dispatch to its
  upload's end, or to its failure) once it ends; a ``leave`` row keeps the draw.
- Every events.csv row has the phase times of its round (:data:`~simfl.sim.link.PHASE_COLUMNS`): a download waits
  for a connection from ``dispatch_time`` to ``download_start``, an upload from ``compute_end`` to
  ``upload_start``, and an update waits for the server from ``upload_end`` to ``time``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simfl.sim.clock import Wake, wake_of
from simfl.sim.configs import NetworkConfig
from simfl.sim.link import PHASE_COLUMNS, Links, NetState, RoundPhases, Transfer, bandwidths
from simfl.sim.recall import boundary
from simfl.sim.state import ClientState

if TYPE_CHECKING:
    from simfl.sim.world import World

_BLANK: tuple[float | None, ...] = (None,) * len(PHASE_COLUMNS)


@dataclass(frozen=True)
class Phased:
    """What a run in phases takes besides its state: the section, the bytes each transfer moves (the model's
    exchanged bytes, :class:`~simfl.latency.base.Workload`'s ``model_bytes``) and, for ``bandwidth: fleet``, the
    fleet trace's bandwidth per device (bytes/s, in file order)."""

    config: NetworkConfig
    model_bytes: int
    fleet: tuple[float, ...] | None = None


class Network:
    """The phases of every round of one run, and the server's links they share (a :class:`~simfl.sim.link.Links`
    over the state's :class:`~simfl.sim.link.NetState`)."""

    def __init__(self, world: World, phased: Phased, seed: int) -> None:
        self.world = world
        config, fleet = phased.config, phased.fleet
        st = world.state
        if st.network is None:  # a fresh run (a resumed one brings its own)
            st.network, st.phases = NetState(), []
        self.state: NetState = st.network
        clients = len(st.clients)
        self.size = float(phased.model_bytes)
        """Bytes each transfer moves: the model's exchanged bytes."""
        self.down = bandwidths(config.download, clients, seed, "download", fleet)
        self.up = bandwidths(config.upload, clients, seed, "upload", fleet)
        server = config.server
        self.links = Links(math.inf if server.egress is None else server.egress,
                           math.inf if server.ingress is None else server.ingress, server.connections, self.state)
        world.handle("link", self._link)
        world.handle("compute", self._computed)

    # -- a round's phases ------------------------------------------------------------------

    def begin(self, client: ClientState, leave: float | None) -> None:
        """``client``'s round starts now (its ``latency``: the compute draw): its departure, if one comes, is
        scheduled, and its download asks for a connection."""
        w = self.world
        phases = RoundPhases(client.latency)
        if leave is not None:
            phases.leave = (leave, w.wake("leave", leave, client.index).order)
        self.state.rounds[client.index] = phases
        self.links.ask(w.clock.now, client.index, False, self.size, self.down[client.index])
        self._schedule()

    def _downloaded(self, client: ClientState, phases: RoundPhases, now: float) -> None:
        w = self.world
        phases.compute_start = now
        end = now + phases.compute
        phases.computing = (end, w.wake("compute", end, client.index).order)

    def _computed(self, wake: Wake) -> None:
        """A client's compute ends: a failed round ends here, else its upload asks for a connection."""
        assert wake.target is not None
        w = self.world
        now = w.clock.now
        client = w.state.clients[wake.target]
        phases = self.state.rounds[client.index]
        phases.computing = None
        phases.compute_end = now
        if self._leaving(phases, now):
            return
        if client.fails:
            self._end(client, phases, now)
            return
        self.links.ask(now, client.index, True, self.size, self.up[client.index])
        self._schedule()

    def cut(self, client: ClientState, epochs: int) -> int | None:
        """A recall (:meth:`World.recall <simfl.sim.world.World.recall>`): ``client``'s compute ends at its next epoch
        boundary of ``epochs`` (:func:`simfl.sim.recall.boundary`), its compute wake-up moved there; a round still
        downloading or waiting for its connection computes one epoch once it is downloaded. The epochs it then trains,
        or None when nothing is cut (its compute ended: the upload carries the whole round; or its last epoch)."""
        w = self.world
        phases = self.state.rounds[client.index]
        if phases.compute_start is None:
            cut = boundary(0.0, 0.0, phases.compute, epochs)
        elif phases.computing is not None:
            cut = boundary(phases.compute_start, w.clock.now, phases.compute, epochs)
        else:
            return None
        if cut is None:
            return None
        k, compute = cut
        phases.compute = client.latency = compute
        if phases.computing is not None:
            assert phases.compute_start is not None
            w.cancel(wake_of("compute", phases.computing[1], phases.computing[0], client.index))
            end = phases.compute_start + compute
            phases.computing = (end, w.wake("compute", end, client.index).order)
        return k

    def _uploaded(self, client: ClientState, phases: RoundPhases, now: float) -> None:
        self._end(client, phases, now)

    def _end(self, client: ClientState, phases: RoundPhases, now: float) -> None:
        """The round ends now (its upload done, or failed): its departure is off, and the world ends it."""
        if phases.leave is not None:
            self.world.cancel(wake_of("leave", phases.leave[1], phases.leave[0], client.index))
            phases.leave = None
        client.latency = now - client.dispatch_time
        self.world.end_round(client)

    @staticmethod
    def _leaving(phases: RoundPhases, now: float) -> bool:
        """Whether the client's departure is due now (its ``leave`` wake-up, pending at this instant, ends the
        round: a departure at the end of a phase takes the round)."""
        return phases.leave is not None and phases.leave[0] <= now

    def drop(self, client: ClientState) -> None:
        """``client`` departs during its round (its ``leave`` wake-up fired): its transfer leaves the links, or its
        compute is cut."""
        w = self.world
        now = w.clock.now
        phases = self.state.rounds[client.index]
        phases.leave = None
        if phases.computing is not None:
            w.cancel(wake_of("compute", phases.computing[1], phases.computing[0], client.index))
            phases.computing = None
        transfer = self.links.drop(now, client.index)
        if transfer is not None:
            self._started(phases, transfer)
            self._schedule()

    # -- the links' wake-up -----------------------------------------------------------------

    def _schedule(self) -> None:
        """One wake-up at the next end of all transfers; the one pending is kept when that time is unchanged, else
        cancelled (and a wake-up of an older generation that fires anyway is ignored)."""
        st, w = self.state, self.world
        end = self.links.next_end()
        if st.wake is not None:
            if st.wake[0] == end:
                return
            w.cancel(wake_of("link", st.wake[1], st.wake[0], st.wake[2]))
            st.wake = None
        if end is not None:
            st.generation += 1
            st.wake = (end, w.wake("link", end, st.generation).order, st.generation)

    def _link(self, wake: Wake) -> None:
        """Transfers end: each ended download starts its compute, each ended upload ends its round, in the order
        they began."""
        st = self.state
        if st.wake is None or wake.target != st.generation:
            return
        st.wake = None
        now = self.world.clock.now
        done = self.links.due(now)
        self._schedule()
        clients = self.world.state.clients
        for transfer in done:
            phases = st.rounds[transfer.client]
            self._started(phases, transfer)
            if transfer.up:
                phases.upload_end = now
            else:
                phases.download_end = now
            if self._leaving(phases, now):
                continue
            (self._uploaded if transfer.up else self._downloaded)(clients[transfer.client], phases, now)

    @staticmethod
    def _started(phases: RoundPhases, transfer: Transfer) -> None:
        if transfer.up:
            phases.upload_start = transfer.start
        else:
            phases.download_start = transfer.start

    # -- rows ----------------------------------------------------------------------------------

    def ended(self, client: ClientState) -> float:
        """When ``client``'s upload ended (its update reached the server)."""
        end = self.state.rounds[client.index].upload_end
        assert end is not None
        return end

    def stamp(self, client: ClientState, timed: bool) -> None:
        """The phase times of the event row just written for ``client``: its round's (``timed``: the row ends a
        round, whose phases are then let go), or none (a return)."""
        phases = self.state.rounds.pop(client.index, None) if timed else None
        rows = self.world.state.phases
        assert rows is not None
        rows.append(_BLANK if phases is None else phases.times())
