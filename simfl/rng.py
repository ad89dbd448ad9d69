"""Named, seeded random streams: the only source of randomness in simfl.

Every random decision draws from a stream named by the scenario seed and a
path of names, e.g. ``stream(seed, "latency", client)``. A stream depends on
nothing but its name, so adding a draw in one place never shifts another
(the k-th latency of client m is the same for every algorithm compared), and
simfl's own code never draws from the global Python, NumPy or torch generators; user code that does (a
Flower app) runs with them set from a stream and put back after (:func:`global_generators`).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, overload

import numpy as np
from numpy.random.bit_generator import ISeedSequence

if TYPE_CHECKING:
    import torch

Name = str | int


def _key(names: tuple[Name, ...]) -> list[int]:
    """Stable 32-bit words derived from a name path (independent of PYTHONHASHSEED)."""
    text = "/".join(str(n) for n in names).encode()
    digest = hashlib.sha256(text).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def seed_sequence(seed: int, *names: Name) -> np.random.SeedSequence:
    """The SeedSequence behind ``stream(seed, *names)``."""
    return np.random.SeedSequence(entropy=[int(seed) & 0xFFFFFFFF, *_key(names)])


def stream(seed: int, *names: Name) -> np.random.Generator:
    """A NumPy generator for the stream ``names`` under ``seed``.

    Parameters
    ----------
    seed:
        The scenario seed.
    names:
        The stream's path, e.g. ``("latency", 3)`` for client 3's latencies.
    """
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *names)))


def torch_seed(seed: int, *names: Name) -> int:
    """A 63-bit integer seed for the stream ``names``, for torch generators."""
    return int(seed_sequence(seed, *names).generate_state(2, np.uint64)[0] >> np.uint64(1))


def torch_generator(seed: int, *names: Name, device: str = "cpu") -> torch.Generator:
    """A torch generator for the stream ``names`` under ``seed`` (torch imported here: the rest of this module is light)."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(torch_seed(seed, *names))
    return gen


@contextlib.contextmanager
def global_generators(seed: int, *names: Name) -> Iterator[None]:
    """The process's global generators set from the stream ``names`` within, put back as they were after.

    simfl itself draws only from named streams; user code (a Flower ClientApp, a ServerApp, a strategy) draws
    from the globals: Python's ``random``, NumPy's legacy ``np.random`` and torch's default CPU generator, from
    which a ``DataLoader`` draws its shuffles and its workers' seeds. Seeded here per call (the call's seed, node,
    round and message in ``names``), such code gives the same numbers for the same seed in any process and after
    a resume, and the caller's own draws are untouched. torch is seeded only when imported: it starts from its
    fixed default seed when something imports it later.
    """
    import random
    import sys

    loaded: Any = sys.modules.get("torch")
    py_state, np_state = random.getstate(), np.random.get_state()
    torch_state = None if loaded is None else loaded.random.get_rng_state()
    draw = stream(seed, *names)
    random.seed(int(draw.integers(2**63)))
    np.random.seed(int(draw.integers(2**32)))
    torch_value = int(draw.integers(2**63))
    if loaded is not None:
        loaded.random.default_generator.manual_seed(torch_value)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        if torch_state is not None:
            loaded.random.set_rng_state(torch_state)


def importing() -> contextlib.AbstractContextManager[None]:
    """:func:`global_generators` for importing user code: what its modules draw at import is the same in every
    process (a module is imported once per process, whatever seeds the process then runs, so the key is fixed)."""
    return global_generators(0, "import")


def generator_state(gen: np.random.Generator) -> dict[str, object]:
    """The plain-data state of a NumPy generator (for checkpoints)."""
    return dict(gen.bit_generator.state)


def restore_generator(state: dict[str, object]) -> np.random.Generator:
    """Rebuild a NumPy generator from :func:`generator_state` output."""
    bitgen = np.random.PCG64()
    bitgen.state = state  # type: ignore[assignment]
    return np.random.Generator(bitgen)


# -- many streams at once --------------------------------------------------------------------------
#
# A population of N clients has N streams (seed, name, m). Building each through SeedSequence costs
# about 40 us (a million clients: 40 s before the first event). Streams below derives all N seeds in
# one vectorised pass: NumPy's SeedSequence mixing (numpy/random/bit_generator.pyx: mix_entropy,
# generate_state) restated on arrays of uint32 words, one lane per stream, every operation modulo
# 2^32 as in the original. It builds a stream's generator from those words at its first use, and can
# give every stream's first outputs at once without building any, from PCG64's own recurrence
# (numpy/random/src/pcg64: the 128-bit LCG step, then the XSL-RR output) on arrays of 64-bit words,
# one lane per stream: the raw 64-bit outputs (next_uint64, from which NumPy's ziggurat draws normals,
# see simfl.latency.normals) and the doubles of Generator.random (an output's top 53 bits times 2^-53).
# NumPy keeps both stable across versions (its stream-compatibility policy for bit generators and
# SeedSequence); tests/latency/test_streams.py compares them with the originals.

_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R, _MASK32 = 0xCA01F9DD, 0x4973F715, 0xFFFFFFFF
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645


def _hashmix(value: np.ndarray, const: int) -> tuple[np.ndarray, int]:
    """SeedSequence's hashmix on every lane; returns the value and the next hash constant."""
    value = value ^ np.uint32(const)
    const = const * _MULT_A & _MASK32
    value = value * np.uint32(const)
    return value ^ (value >> np.uint32(16)), const


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SeedSequence's mix on every lane."""
    result: np.ndarray = x * np.uint32(_MIX_MULT_L) - y * np.uint32(_MIX_MULT_R)
    return result ^ (result >> np.uint32(16))


COMPILED_KEYS = 250_000
"""From this many streams on, :func:`seed_words` hashes their paths in one compiled loop (:mod:`simfl.hashing`:
the same digests in under half of hashlib's time); below it numba's start in a process (about 0.5 s) would cost more."""


def seed_words(seed: int, names: tuple[Name, ...], count: int) -> np.ndarray:
    """Row m: ``seed_sequence(seed, *names, m).generate_state(4, np.uint64)``, for m < ``count``; shape (count, 4)."""
    prefix = "/".join(str(n) for n in names) + "/" if names else ""
    if count >= COMPILED_KEYS:
        from simfl.hashing import numbered_digests  # numba: its first call in a process costs about 0.5 s

        digests = numbered_digests(prefix.encode(), count, 16).tobytes()
    else:
        digests = b"".join(hashlib.sha256(f"{prefix}{m}".encode()).digest()[:16] for m in range(count))
    keys = np.frombuffer(digests, dtype="<u4").reshape(count, 4).astype(np.uint32)
    # the entropy [seed, *key] is five words (each below 2^32), one more than the pool of four
    entropy = [np.full(count, int(seed) & _MASK32, dtype=np.uint32), *keys.T]
    const = _INIT_A
    pool = []
    for i in range(4):
        value, const = _hashmix(entropy[i], const)
        pool.append(value)
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                value, const = _hashmix(pool[i_src], const)
                pool[i_dst] = _mix(pool[i_dst], value)
    for i_dst in range(4):
        value, const = _hashmix(entropy[4], const)
        pool[i_dst] = _mix(pool[i_dst], value)
    const = _INIT_B
    words32 = []
    for i in range(8):  # generate_state(4, uint64): eight uint32 words, two per uint64, low word first
        word: np.ndarray = pool[i % 4] ^ np.uint32(const)
        const = const * _MULT_B & _MASK32
        word = word * np.uint32(const)
        words32.append(word ^ (word >> np.uint32(16)))
    low, high = np.array(words32[0::2], dtype=np.uint64), np.array(words32[1::2], dtype=np.uint64)
    return (low | (high << np.uint64(32))).T.copy()


class Pcg64Lanes(NamedTuple):
    """PCG64 states of many streams, one lane each: the 128-bit state and increment as high and low 64-bit words."""

    state_hi: np.ndarray
    state_lo: np.ndarray
    inc_hi: np.ndarray
    inc_lo: np.ndarray


_U32, _32 = np.uint64(_MASK32), np.uint64(32)
_MULT_HI, _MULT_LO = np.uint64(_PCG_MULT >> 64), np.uint64(_PCG_MULT & 0xFFFFFFFFFFFFFFFF)
_MULT_L1, _MULT_L0 = np.uint64(_PCG_MULT >> 32 & _MASK32), np.uint64(_PCG_MULT & _MASK32)


def _lcg_step(hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step ``state * _PCG_MULT + inc`` modulo 2^128 on every lane, as (high, low) words.

    uint64 arithmetic wraps modulo 2^64, so only the low words' product needs its high half: it is taken
    from 32-bit halves (each partial product below 2^64); the cross terms count modulo 2^64.
    """
    a1, a0 = lo >> _32, lo & _U32
    p00, p01, p10 = a0 * _MULT_L0, a0 * _MULT_L1, a1 * _MULT_L0
    mid = (p00 >> _32) + (p01 & _U32) + (p10 & _U32)  # below 3 * 2^32
    new_lo = (mid << _32) | (p00 & _U32)
    new_hi = a1 * _MULT_L1 + (p01 >> _32) + (p10 >> _32) + (mid >> _32) + lo * _MULT_HI + hi * _MULT_LO
    out_lo = new_lo + inc_lo
    return new_hi + inc_hi + (out_lo < new_lo), out_lo  # with the carry of the low words


def pcg64_start(words: np.ndarray) -> Pcg64Lanes:
    """PCG64's state on every row of ``words`` (shape (count, 4), uint64: the seed words of :func:`seed_words`),
    as pcg64_set_seed leaves it (pcg_setseq_128_srandom_r: the increment, then one step from the increment
    plus the initial state)."""
    w = np.asarray(words, dtype=np.uint64).reshape(-1, 4)
    w0, w1, w2, w3 = (np.ascontiguousarray(w[:, i]) for i in range(4))
    inc_hi, inc_lo = (w2 << np.uint64(1)) | (w3 >> np.uint64(63)), (w3 << np.uint64(1)) | np.uint64(1)
    lo = w1 + inc_lo
    hi, lo = _lcg_step(w0 + inc_hi + (lo < w1), lo, inc_hi, inc_lo)
    return Pcg64Lanes(hi, lo, inc_hi, inc_lo)


def pcg64_words(lanes: Pcg64Lanes, n: int) -> np.ndarray:
    """The next ``n`` raw 64-bit outputs (next_uint64) of every lane, shape (count, n); ``lanes`` is not updated."""
    hi, lo, inc_hi, inc_lo = lanes
    out = np.empty((len(hi), n), dtype=np.uint64)
    for j in range(n):
        hi, lo = _lcg_step(hi, lo, inc_hi, inc_lo)
        x = hi ^ lo  # XSL-RR: the xor of the halves rotated right by the state's top six bits
        rot = hi >> np.uint64(58)
        out[:, j] = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
    return out


def to_doubles(words: np.ndarray) -> np.ndarray:
    """next_double of raw PCG64 outputs: the top 53 bits times 2^-53 (exact: below 2^53, then a power of two)."""
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def pcg64_doubles(lanes: Pcg64Lanes, n: int) -> np.ndarray:
    """The next ``n`` doubles of every lane, shape (count, n), as ``Generator.random(n)`` gives them; ``lanes`` is
    not updated."""
    return to_doubles(pcg64_words(lanes, n))


class _Words(ISeedSequence):
    """A seed sequence that hands PCG64 words derived beforehand (those of :func:`seed_sequence`)."""

    def __init__(self, words: np.ndarray) -> None:
        self.words = words

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        assert n_words == 4 and np.dtype(dtype) == np.uint64, "PCG64 asks for four 64-bit words"
        return self.words


class Streams(Sequence[np.random.Generator]):
    """The generators of the streams ``(seed, *names, m)`` for ``m < count``, each built at its first use.

    ``streams[m]`` has the state ``stream(seed, *names, m)`` would have after the same draws.
    :meth:`first` (doubles) or :meth:`first_words` (raw outputs) and :meth:`claim` let a model take each
    stream's first draws without building it (a model drawing uniforms or, through NumPy's ziggurat, normals,
    whose clients may train only a few times each).
    """

    def __init__(self, seed: int, *names: Name, count: int) -> None:
        self.words = seed_words(seed, names, count)
        self.gens: list[np.random.Generator | None] = [None] * count
        self.used = [0] * count
        """Per unbuilt stream, outputs :meth:`claim` handed out from its start."""
        self.width = 0
        self.drawn = False
        """Some stream has handed out an output (claimed, or its generator built or loaded)."""

    def first(self, n: int) -> np.ndarray:
        """The first ``n`` doubles of every stream, shape (count, n), as ``self[m].random(n)`` would give them
        before any draw; :meth:`claim` then hands them out."""
        return to_doubles(self.first_words(n))

    def first_words(self, n: int) -> np.ndarray:
        """The first ``n`` raw 64-bit outputs of every stream, shape (count, n), as its bit generator's next_uint64
        would give them before any draw; :meth:`claim` then hands them out (one output each)."""
        if self.drawn:
            raise ValueError("first() must come before any draw")
        self.width = n
        return pcg64_words(pcg64_start(self.words), n)

    def claim(self, m: int, n: int) -> int:
        """Take the next ``n`` outputs of stream ``m`` from :meth:`first`'s: their offset in its flattened output,
        or -1 when the stream is built or fewer are left (its generator, once built, starts after them)."""
        used = self.used[m]
        if used + n > self.width or self.gens[m] is not None:
            return -1
        self.used[m] = used + n
        self.drawn = True
        return m * self.width + used

    def states(self) -> list[dict[str, object]]:
        """Every stream's :func:`generator_state`, as ``[generator_state(g) for g in self]`` gives it, without building
        a generator: reading the state must not change what the streams draw next (a stream built here would start
        at its beginning, and :meth:`claim` would then no longer advance it past the outputs it hands out). The
        streams not built are computed all at once: PCG64's start (:func:`pcg64_start`), one LCG step per output
        claimed."""
        idle = np.flatnonzero(np.fromiter((g is None for g in self.gens), dtype=bool, count=len(self.gens)))
        computed: dict[int, dict[str, object]] = {}
        if idle.size:
            hi, lo, inc_hi, inc_lo = pcg64_start(self.words[idle])
            used = np.asarray(self.used, dtype=np.int64)[idle]
            for step in range(int(used.max())):  # at most a first block's width
                on = used > step
                hi[on], lo[on] = _lcg_step(hi[on], lo[on], inc_hi[on], inc_lo[on])
            state, inc = ((high.astype(object) << 64) | low.astype(object) for high, low in ((hi, lo), (inc_hi, inc_lo)))
            for m, s, i in zip(idle.tolist(), state.tolist(), inc.tolist(), strict=True):
                computed[m] = {"bit_generator": "PCG64", "state": {"state": s, "inc": i}, "has_uint32": 0, "uinteger": 0}
        return [computed[m] if g is None else generator_state(g) for m, g in enumerate(self.gens)]

    def load(self, states: list[dict[str, object]]) -> None:
        """Take the generators from :func:`generator_state` outputs (a resumed run)."""
        self.gens = [restore_generator(s) for s in states]
        self.used = [0] * len(states)
        self.width = 0
        self.drawn = True

    def __len__(self) -> int:
        return len(self.gens)

    @overload
    def __getitem__(self, m: int) -> np.random.Generator: ...

    @overload
    def __getitem__(self, m: slice) -> list[np.random.Generator]: ...

    def __getitem__(self, m: int | slice) -> np.random.Generator | list[np.random.Generator]:
        if isinstance(m, slice):
            return [self[i] for i in range(len(self))[m]]
        gen = self.gens[m]
        if gen is None:
            # NumPy takes any ISeedSequence; its type stubs name only SeedSequence
            bitgen = np.random.PCG64(_Words(self.words[m]))  # type: ignore[arg-type]
            if self.used[m]:
                bitgen.advance(self.used[m])  # one LCG step per output handed out
            gen = self.gens[m] = np.random.Generator(bitgen)
            self.drawn = True
        return gen

    def __iter__(self) -> Iterator[np.random.Generator]:
        return (self[m] for m in range(len(self)))
