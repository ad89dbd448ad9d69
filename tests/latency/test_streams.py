"""Per-client streams derived all at once (simfl.rng.Streams) are NumPy's SeedSequence and PCG64, bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from simfl import rng
from simfl.latency import LATENCY_MODELS, Workload
from simfl.latency.availability import Availability, AvailabilityConfig

SEEDS = [0, 1, 12345, 2**32 + 7, 2**40 + 3]
NAMES: list[tuple[rng.Name, ...]] = [("latency",), ("failure",), ("latency-speed",), ("a", 3), ()]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("names", NAMES, ids=str)
def test_seed_words_are_seed_sequences_words(seed: int, names: tuple[rng.Name, ...]) -> None:
    words = rng.seed_words(seed, names, 400)
    expected = np.stack([rng.seed_sequence(seed, *names, m).generate_state(4, np.uint64) for m in range(400)])
    assert words.dtype == np.uint64 and (words == expected).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_streams_give_the_generators_of_stream_and_their_first_doubles(seed: int) -> None:
    streams = rng.Streams(seed, "latency", count=300)
    start = streams.first(5)
    assert start.shape == (300, 5)
    flat = start.ravel().tolist()

    def claimed(m: int, n: int) -> list[float]:
        at = streams.claim(m, n)
        return flat[at:at + n] if at >= 0 else streams[m].random(n).tolist()

    for m in range(300):
        reference = rng.stream(seed, "latency", m)
        assert start[m].tolist() == rng.stream(seed, "latency", m).random(5).tolist()
        if m % 3 == 0:  # built at once: nothing more to claim
            got = streams[m].random(9).tolist()
            assert streams.claim(m, 1) == -1
        elif m % 3 == 1:  # within the derived start, then past it (the generator advanced by what was claimed)
            got = claimed(m, 2) + claimed(m, 3) + claimed(m, 4)
        else:  # part of the start, then the generator itself
            got = claimed(m, 4) + streams[m].random(5).tolist()
        assert got == reference.random(9).tolist()
        assert rng.generator_state(streams[m]) == rng.generator_state(reference)
    with pytest.raises(ValueError, match="before any draw"):
        streams.first(5)


def test_pcg64_start_words_and_doubles_follow_numpy() -> None:
    words = np.stack([rng.seed_sequence(9, "x", m).generate_state(4, np.uint64) for m in range(300)])
    lanes = rng.pcg64_start(words)
    raw, doubles = rng.pcg64_words(lanes, 7), rng.pcg64_doubles(lanes, 7)
    assert raw.dtype == np.uint64 and raw.shape == (300, 7) and doubles.shape == (300, 7)
    for m in range(300):
        gen = rng.stream(9, "x", m)
        state = int(lanes.state_hi[m]) << 64 | int(lanes.state_lo[m])
        inc = int(lanes.inc_hi[m]) << 64 | int(lanes.inc_lo[m])
        assert gen.bit_generator.state["state"] == {"state": state, "inc": inc}
        assert doubles[m].tolist() == gen.random(7).tolist()
        assert raw[m].tolist() == rng.stream(9, "x", m).bit_generator.random_raw(7).tolist()


def test_streams_save_and_load_as_a_list_of_generators_does() -> None:
    streams = rng.Streams(4, "latency", count=6)
    streams.first(4)
    streams.claim(1, 2)
    streams[2].random(3)
    saved = [rng.generator_state(g) for g in streams]
    plain = [rng.stream(4, "latency", m) for m in range(6)]
    plain[1].random(2)
    plain[2].random(3)
    assert saved == [rng.generator_state(g) for g in plain]
    restored = rng.Streams(4, "latency", count=6)
    restored.first(4)
    restored.load(saved)
    assert restored.claim(3, 1) == -1
    assert [restored[m].random(3).tolist() for m in range(6)] == [streams[m].random(3).tolist() for m in range(6)]
    assert len(restored) == 6 and len(restored[1:4]) == 3


def test_streams_states_are_the_generators_states_without_building_them() -> None:
    """Unbuilt streams' states computed all at once (PCG64's start, one LCG step per output claimed) are those of
    their generators; a built one's is its own; nothing is built."""
    streams = rng.Streams(7, "latency", count=40)
    streams.first(64)
    streams.claim(3, 10), streams.claim(5, 64), streams.claim(9, 1)
    streams[7].random(3)
    plain = [rng.stream(7, "latency", m) for m in range(40)]
    for m, n in ((3, 10), (5, 64), (9, 1)):
        plain[m].bit_generator.advance(n)
    plain[7].random(3)
    assert streams.states() == [rng.generator_state(g) for g in plain]
    assert [m for m, g in enumerate(streams.gens) if g is not None] == [7]


@pytest.mark.parametrize("model", ["lognormal", "uniform", "halfnormal"])
def test_reading_a_models_state_changes_nothing_it_draws(model: str) -> None:
    """A checkpoint reads every stream's state, also of clients that have not drawn yet: the streams must not be
    built there, or a client's first block (derived beforehand) would no longer move its generator past it, and
    its next block would repeat it (a run checkpointed before such a client's first round diverged from the same
    run without checkpoints once that client had drawn its first block)."""
    work = Workload(model_bytes=100, flops=10, samples=(3,) * 8, epochs=1)
    cls = LATENCY_MODELS[model]
    config = cls.Config(model=model)
    read, plain = cls(config, 8, 5, work), cls(config, 8, 5, work)
    assert read.width == 64  # first blocks derived for every client
    read.sample(0), plain.sample(0)
    saved = read.state()
    first = rng.stream(5, "latency", 0)
    first.bit_generator.advance(64)  # past client 0's first block
    assert saved["rngs"] == [rng.generator_state(g) for g in [first, *(rng.stream(5, "latency", m) for m in range(1, 8))]]
    for m in range(8):
        assert [read.sample(m) for _ in range(3 * read.width)] == [plain.sample(m) for _ in range(3 * read.width)]
    assert read.rngs.states() == plain.rngs.states()
    restored = cls(config, 8, 5, work)
    restored.load_state(saved)
    fresh = cls(config, 8, 5, work)
    fresh.sample(0)
    assert [[restored.sample(m) for _ in range(100)] for m in range(8)] == [
        [fresh.sample(m) for _ in range(100)] for m in range(8)]


def test_models_and_availability_draw_the_streams_they_drew_before() -> None:
    work = Workload(model_bytes=100, flops=10, samples=(3,) * 17000, epochs=1)
    uniform = LATENCY_MODELS["uniform"]
    model = uniform(uniform.Config(model="uniform", low=1.0, high=4.0), 17000, 3, work)
    assert model.ahead_n == 4  # a population large enough for the derived first blocks
    for m in (0, 5, 16999):
        gen = rng.stream(3, "latency", m)
        assert [model.sample(m) for _ in range(6)] == [max(1.0 + 3.0 * u, 0.0) for u in gen.random(6).tolist()]
    per_client = uniform(uniform.Config(model="uniform", mode="per_client"), 40, 3, work)
    assert per_client.speeds == [per_client.base_draw(rng.stream(3, "latency-speed", m)) for m in range(40)]
    availability = Availability(AvailabilityConfig(p=0.5), 30, 3)
    assert [availability.fails(m) for m in range(30)] == [bool(rng.stream(3, "failure", m).random() < 0.5)
                                                          for m in range(30)]


@pytest.mark.parametrize("clients", [3, 17000])
def test_first_blocks_derived_at_construction_keep_values_and_checkpoints(clients: int) -> None:
    """Taking each client's first block from the values derived at construction gives the values, and the
    state (generators advanced by a whole block at the first sample, drawn-ahead values), of drawing it."""
    work = Workload(model_bytes=100, flops=10, samples=(3,) * clients, epochs=1)
    uniform = LATENCY_MODELS["uniform"]
    config = uniform.Config(model="uniform", low=0.5, high=9.0, scaling={"compute": 1.7, "comm": 0.4})

    def make() -> Any:
        return uniform(config, clients, 11, work)

    derived, drawn = make(), make()
    drawn.firsts, drawn.width = [], 0  # every block drawn from the generators
    assert derived.width == derived.ahead_n
    w = derived.width
    plan = {0: 1, 1: 2, 2: w, clients - 1: w + 3}  # client: samples taken
    same_samples_and_resume(derived, drawn, make, plan)


def same_samples_and_resume(derived: Any, drawn: Any, make: Callable[[], Any], plan: dict[int, int]) -> None:
    """``derived`` (first blocks derived) and ``drawn`` (every block from the generators) give the same samples for
    each ``client: samples taken`` of ``plan``, the same state, and a model made anew and resumed from that state
    continues as ``drawn`` does for a block and two more samples."""
    for m, k in plan.items():
        assert [derived.sample(m) for _ in range(k)] == [drawn.sample(m) for _ in range(k)]
    saved = derived.state()
    assert saved == drawn.state()
    resumed = make()
    resumed.load_state(saved)
    n = derived.width + 2
    for m in plan:
        assert [resumed.sample(m) for _ in range(n)] == [drawn.sample(m) for _ in range(n)]
