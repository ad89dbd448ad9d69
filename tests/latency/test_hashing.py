"""The compiled SHA-256 of numbered paths (simfl.hashing) gives hashlib's digests, and the stream keys built with it
are SeedSequence's words."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from simfl import hashing, rng

# paths of one, two and three 64-byte blocks once padded (55 bytes fit in one, 56 need two), and UTF-8
PREFIXES = [b"", b"latency/", b"x" * 53, b"x" * 54, b"y" * 55, b"z" * 56, b"w" * 119, b"a/" * 70, "\u00e9/".encode() * 30]


@pytest.mark.parametrize("prefix", PREFIXES, ids=lambda p: f"{len(p)}B")
def test_numbered_digests_are_hashlibs(prefix: bytes) -> None:
    count = 1_200  # one to four digits: every padded length around a block boundary
    got = hashing.numbered_digests(prefix, count)
    want = [hashlib.sha256(prefix + str(m).encode()).digest() for m in range(count)]
    assert got.dtype == np.uint8 and got.shape == (count, 32)
    assert [bytes(row) for row in got] == want


def test_numbered_digests_of_large_numbers_and_widths() -> None:
    got = hashing.numbered_digests(b"latency/", 1_000_013, 16)
    for m in (0, 9, 10, 99_999, 100_000, 999_999, 1_000_000, 1_000_012):
        assert bytes(got[m]) == hashlib.sha256(f"latency/{m}".encode()).digest()[:16]
    with pytest.raises(ValueError, match="width"):
        hashing.numbered_digests(b"", 3, 33)
    assert hashing.numbered_digests(b"", 0).shape == (0, 32)


def test_the_round_constants_are_the_standards() -> None:
    """FIPS 180-4, 4.2.2 and 5.3.3: the first and last of K and of H(0)."""
    assert int(hashing._ROUNDS[0]) == 0x428A2F98 and int(hashing._ROUNDS[63]) == 0xC67178F2
    assert int(hashing._INITIAL[0]) == 0x6A09E667 and int(hashing._INITIAL[7]) == 0x5BE0CD19


def test_seed_words_of_a_large_population_are_seed_sequences_words() -> None:
    count = rng.COMPILED_KEYS + 5
    words = rng.seed_words(7, ("latency",), count)
    for m in (0, 1, 12_345, count - 1):
        assert (words[m] == rng.seed_sequence(7, "latency", m).generate_state(4, np.uint64)).all()
    below = rng.seed_words(7, ("latency",), 300)
    assert (words[:300] == below).all()
