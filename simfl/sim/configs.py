"""The simulated world's choices that a scenario makes, light to import (no numba, no torch).

The scenario schema validates ``server.selection`` against :data:`Selection` without loading the selection
machinery (:mod:`simfl.sim.selection`, compiled with numba), so that ``simfl validate`` stays quick; the
``network:`` section (:class:`NetworkConfig`) likewise, without the phases' machinery (:mod:`simfl.sim.phases`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simfl.fields import NonNegFloat, PositiveFloat, PositiveInt, Section

Selection = Literal["uniform", "by_data"]
"""How cross-device serving draws the next client among the idle, present ones: uniformly, or by sample count."""


class Spread(Section):
    """Each client's bandwidth drawn once, from a lognormal of this mean and standard deviation."""

    mean: PositiveFloat = Field(description="Mean bandwidth over the clients, bytes/s.")
    std: NonNegFloat = Field(description="Standard deviation over the clients, bytes/s (0: every client the mean).")


Bandwidth = PositiveFloat | Literal["fleet"] | Spread
"""A client link's speed in one direction: bytes/s for every client, ``fleet`` (the fleet trace's ``bandwidth``
column: client m plays device m mod n) or a :class:`Spread` drawn per client."""


class Direction(Section):
    """The clients' own links in one direction."""

    bandwidth: Bandwidth = Field(
        description="Bytes/s of each client's link: a number (every client alike), 'fleet' (the latency model's "
        "fleet trace's bandwidth column, client m playing device m mod n), or {mean, std}: a lognormal of that "
        "mean and standard deviation in bytes/s, drawn once per client from the seed's stream "
        "(seed, 'network', 'download' or 'upload').")


class ServerLinks(Section):
    """The server's side of every transfer, shared by the transfers in progress."""

    ingress: PositiveFloat | None = Field(
        None, description="Bytes/s into the server, shared by the uploads in progress (max-min fair: an equal "
        "share each, a client whose own link is slower keeps its speed and leaves the rest to the others). "
        "Default: unlimited.")
    egress: PositiveFloat | None = Field(
        None, description="Bytes/s out of the server, shared by the downloads in progress, as ingress. "
        "Default: unlimited.")
    connections: PositiveInt | None = Field(
        None, description="Transfers in progress at once, downloads and uploads together; more wait in one "
        "first-come-first-served queue. Default: no limit.")


class NetworkConfig(Section):
    """A round as three phases: download, compute, upload (docs/contention.md).

    The compute phase lasts the latency model's draw; a transfer moves the model's exchanged bytes (its trainable
    state, float32) over the client's link and the server's, shared by the transfers in progress. Off when the
    section is absent: a round is then the latency model's one draw. The static estimate counts the phases as
    :func:`simfl.sim.link.round_times` states them.
    """

    download: Direction | None = Field(
        None, description="The clients' download links (default: they do not limit; the server's egress must).")
    upload: Direction | None = Field(
        None, description="The clients' upload links (default: they do not limit; the server's ingress must).")
    server: ServerLinks = Field(default_factory=ServerLinks, description="The server's links and connections.")

    @model_validator(mode="after")
    def _finite(self) -> NetworkConfig:
        for name, link, side in (("download", self.download, self.server.egress),
                                 ("upload", self.upload, self.server.ingress)):
            if link is None and side is None:
                key = "egress" if name == "download" else "ingress"
                raise ValueError(f"every {name} needs a finite speed: give {name}.bandwidth or server.{key} (bytes/s)")
        return self

    def fleet(self) -> bool:
        """Whether a direction reads the fleet trace's bandwidth."""
        return any(d is not None and d.bandwidth == "fleet" for d in (self.download, self.upload))
