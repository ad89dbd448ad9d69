"""Partitions: sizes, coverage, label skew growing as alpha shrinks, determinism, explicit classes."""

from __future__ import annotations

import numpy as np
import pytest

from simfl import rng
from simfl.data.partition import BySubjectConfig, ClassesConfig, DirichletConfig, IIDConfig, split
from simfl.errors import InputError

LABELS = np.repeat(np.arange(10), 200)


def skew(parts: list[np.ndarray]) -> float:
    """Mean over clients of the largest class share (1 = one class per client, 0.1 = uniform)."""
    return float(np.mean([np.bincount(LABELS[p], minlength=10).max() / len(p) for p in parts]))


@pytest.mark.parametrize("sizes", ["equal", "draw"])
def test_dirichlet_disjoint_and_sizes(sizes: str) -> None:
    parts = split(DirichletConfig(clients=10, alpha=0.1, sizes=sizes), LABELS, rng.stream(0, "partition"))
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx)
    if sizes == "equal":
        assert [len(p) for p in parts] == [200] * 10
    else:
        assert len(allidx) == len(LABELS)


def test_skew_grows_as_alpha_shrinks() -> None:
    values = [np.mean([skew(split(DirichletConfig(clients=10, alpha=a), LABELS, rng.stream(s, "partition")))
                       for s in range(3)]) for a in (100.0, 1.0, 0.1, 0.01)]
    assert values == sorted(values) and values[0] < 0.25 and values[-1] > 0.5


def test_deterministic_per_seed() -> None:
    cfg = DirichletConfig(clients=5, alpha=0.5)
    a = split(cfg, LABELS, rng.stream(7, "partition"))
    b = split(cfg, LABELS, rng.stream(7, "partition"))
    c = split(cfg, LABELS, rng.stream(8, "partition"))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_iid_equal_shares() -> None:
    parts = split(IIDConfig(clients=3), LABELS, rng.stream(0, "partition"))
    assert sorted(len(p) for p in parts) == [666, 667, 667]


def test_classes_two_client_study() -> None:
    cfg = ClassesConfig(classes=[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]])
    a, b = split(cfg, LABELS, rng.stream(0, "partition"))
    assert set(LABELS[a]) == {0, 1, 2, 3, 4} and set(LABELS[b]) == {5, 6, 7, 8, 9} and len(a) == len(b) == 1000
    shared = split(ClassesConfig(classes=[[0, 1], [1]]), LABELS, rng.stream(0, "partition"))
    assert len(shared[0]) == 300 and len(shared[1]) == 100 and not set(shared[0]) & set(shared[1])
    with pytest.raises(InputError, match="class 12"):
        split(ClassesConfig(classes=[[12]]), LABELS, rng.stream(0, "partition"))


def test_by_subject() -> None:
    groups = np.repeat([5, 2, 9], [3, 4, 5])
    parts = split(BySubjectConfig(), np.zeros(12, dtype=np.int64), rng.stream(0, "partition"), groups)
    assert [p.tolist() for p in parts] == [[3, 4, 5, 6], [0, 1, 2], [7, 8, 9, 10, 11]]
    with pytest.raises(InputError, match="subject ids"):
        split(BySubjectConfig(), np.zeros(12, dtype=np.int64), rng.stream(0, "partition"))
    with pytest.raises(InputError, match="one client per subject: 3"):
        split(BySubjectConfig(clients=21), np.zeros(12, dtype=np.int64), rng.stream(0, "partition"), groups)


# ---- explicit set-ups: label counts and index files ------------------------------------------------------


def test_counts_give_exact_per_client_label_counts() -> None:
    from simfl.data.partition import CountsConfig

    counts = [[10, 0, 5, 0, 0, 0, 0, 0, 0, 1], [0, 200, 0, 0, 0, 0, 0, 0, 0, 0], [190, 0, 195, 3, 0, 0, 0, 0, 0, 0]]
    parts = split(CountsConfig(counts=counts), LABELS, rng.stream(0, "partition"))
    assert [np.bincount(LABELS[p], minlength=10).tolist() for p in parts] == counts
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(allidx)  # disjoint
    again = split(CountsConfig(counts=counts), LABELS, rng.stream(0, "partition"))
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))  # same seed, same samples
    other = split(CountsConfig(counts=counts), LABELS, rng.stream(1, "partition"))
    assert not np.array_equal(parts[0], other[0])  # which samples: drawn from the seed's stream


@pytest.mark.parametrize(
    ("counts", "clients", "message"),
    [
        ([[150] + [0] * 9, [51] + [0] * 9], None, r"class 0: the clients ask for 201 samples, the training set holds 200"),
        ([[1] * 9], None, r"rows need one count per class \(10\), got 9"),
    ],
)
def test_counts_errors(counts: list[list[int]], clients: int | None, message: str) -> None:
    from simfl.data.partition import CountsConfig

    with pytest.raises(InputError, match=message):
        split(CountsConfig(counts=counts, clients=clients), LABELS, rng.stream(0, "partition"))


def test_counts_rows_checked_by_the_scenario() -> None:
    from pydantic import ValidationError

    from simfl.data.partition import CountsConfig

    with pytest.raises(ValidationError, match="clients is 3 but counts has 2 rows"):
        CountsConfig(counts=[[1, 2], [3, 4]], clients=3)
    with pytest.raises(ValidationError, match="same number of classes"):
        CountsConfig(counts=[[1, 2], [3]])
    with pytest.raises(ValidationError, match="client 1 holds no sample"):
        CountsConfig(counts=[[1, 2], [0, 0]])


@pytest.mark.parametrize("fmt", ["json_list", "json_map", "csv"])
def test_indices_file_gives_exact_samples(tmp_path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    import json

    from simfl.data.partition import IndicesConfig

    lists = [[5, 1, 1999], [0, 7], [100]]
    if fmt == "json_list":
        path = tmp_path / "parts.json"
        path.write_text(json.dumps(lists))
    elif fmt == "json_map":
        path = tmp_path / "parts.json"
        path.write_text(json.dumps({str(m): v for m, v in enumerate(lists)}))
    else:
        path = tmp_path / "parts.csv"
        path.write_text("client,index\n" + "".join(f"{m},{i}\n" for m, v in enumerate(lists) for i in v))
    parts = split(IndicesConfig(path=path, clients=3), LABELS, rng.stream(0, "partition"))
    assert [p.tolist() for p in parts] == [sorted(v) for v in lists]


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ("[[1, 2], [2, 3]]", ".json", r"index 2 is listed on clients 0 and 1"),
        ("[[1, 1]]", ".json", r"index 1 is listed twice"),
        ("[[1, 2000]]", ".json", r"client 0: index 2000 is outside the training set \[0, 1999\]"),
        ("[[1, -1]]", ".json", r"index -1 is outside"),
        ("[[1], [2], [3]]", ".json", r"has 3 clients but data.partition.clients is 2"),
        ("[[1], []]", ".json", r"client 1 holds no sample"),
        ("[[1, 2.5]]", ".json", r"indices must be integers, got 2.5"),
        ("[[1, 2]", ".json", r"malformed JSON at line 1"),
        ("client,index\n0,1\n2,3\n", ".csv", r"no row for client 1"),
        ("client,index\n0,x\n", ".csv", r"line 2: client and index must be integers"),
        ("0,1,2\n", ".csv", r"line 1: expected two columns"),
    ],
)
def test_indices_file_errors(tmp_path, content: str, suffix: str, message: str) -> None:  # type: ignore[no-untyped-def]
    from simfl.data.partition import IndicesConfig

    path = tmp_path / f"parts{suffix}"
    path.write_text(content)
    clients = 2 if "clients is 2" in message else None
    with pytest.raises(InputError, match=message) as info:
        split(IndicesConfig(path=path, clients=clients), LABELS, rng.stream(0, "partition"))
    assert str(info.value).startswith(f"data.partition.path ({path})")


def test_indices_missing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from simfl.data.partition import IndicesConfig

    with pytest.raises(InputError, match="no such file"):
        split(IndicesConfig(path=tmp_path / "nope.json"), LABELS, rng.stream(0, "partition"))
