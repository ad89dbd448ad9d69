"""What a component states of itself, checked against what it does: a check a plugin's author can call.

A component states facts for ``simfl validate`` and the estimate (docs/plugins.md, "Stating its costs for the
estimate"): a delay model its round times (``round_times``), its trace's absences (``absences_of``) and whether it
reads the model's FLOPs (``flops_use``); an algorithm its work at an arrival without training (``arrival_passes``,
``arrival_work``) and its round size (``round_clients``); a dataset its shape and sizes (``facts()``); a model its
cost (``cost()``). Nothing checks such a statement at run time: one that is wrong is estimated wrong without a word.
Each function here builds the component, makes it do what a run makes it do, and sets what it did beside what it
states, one :class:`Line` per statement, in a :class:`Report`::

    report = check_latency(Steps, {"base": 0.7})
    print(report)
    assert report.ok, report.problems

- :func:`check_latency` draws every client's latencies (``draws`` each) and compares them with ``round_times``
  (clients, mean round, update rate, spread, each client's mean and shortest round, absences), and checks what the
  reproducibility of a run rests on: a client's draws the same in any order of clients and after ``state()`` /
  ``load_state()`` through a checkpoint's ``torch.load(weights_only=True)``;
- :func:`check_algorithm` runs the rule without training at two model sizes, as ``python -m
  benchmarks.arrival_bytes`` does for the built-ins, and reads its passes over the model's bytes per arrival
  (and, from the same run, its round size);
- :func:`check_dataset` loads the data and compares it with ``facts()``;
- :func:`check_model` builds the model and measures it as the estimate does where a model states nothing
  (:func:`simfl.models.measured.measure`), and compares that with ``cost()``.

Statements that no run here shows (``client_vectors``, ``keeps_client_models``, ``max_rounds``,
``replaces_training``, a delay model's ``setup`` and ``draw`` costs) are not checked.
"""

from __future__ import annotations

import copy
import io
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

Verdict = Literal["agrees", "differs", "not stated"]


@dataclass(frozen=True)
class Line:
    """One statement of a component beside what the component did."""

    what: str
    stated: str
    observed: str
    verdict: Verdict
    note: str = ""
    """Why it differs, or what to state (empty: nothing to add)."""

    def __str__(self) -> str:
        tail = f" ({self.note})" if self.note else ""
        return f"{self.verdict:>10}  {self.what}: stated {self.stated}, observed {self.observed}{tail}"


@dataclass(frozen=True)
class Report:
    """What :func:`check_latency`, :func:`check_algorithm`, :func:`check_dataset` or :func:`check_model` found."""

    subject: str
    lines: tuple[Line, ...] = field(default_factory=tuple)

    @property
    def problems(self) -> list[str]:
        """One line per statement that differs from the behaviour (empty: none)."""
        return [f"{self.subject}: {line.what}: stated {line.stated}, observed {line.observed}"
                + (f" ({line.note})" if line.note else "") for line in self.lines if line.verdict == "differs"]

    @property
    def ok(self) -> bool:
        """No statement differs from the behaviour (a statement not made is no problem: the estimate says so)."""
        return not self.problems

    def line(self, what: str) -> Line:
        """The line about ``what`` (its first words suffice)."""
        return next(line for line in self.lines if line.what.startswith(what))

    def __str__(self) -> str:
        return "\n".join([self.subject, *map(str, self.lines)])


def _component(kind: str, component: Any) -> Any:
    """The class ``component`` is, or names (built-in name, entry point or import path)."""
    if isinstance(component, type):
        return component
    from simfl.schema import plugins

    return plugins.resolve(kind, str(component))


DISCRIMINATORS = {"latency": "model", "algorithm": "name", "dataset": "dataset", "model": "name"}
"""The key naming a component in its scenario section."""


def _parsed(kind: str, cls: Any, config: Any) -> Any:
    """``config`` validated by ``cls.Config`` (a mapping: its scenario section, the key naming the component left
    out where the config has no such field), or as given (a config already)."""
    if not isinstance(config, Mapping) and config is not None:
        return config
    raw = dict(config or {})
    key = DISCRIMINATORS[kind]
    if key in raw and key not in cls.Config.model_fields:
        raw.pop(key)
    return cls.Config.model_validate(raw)


def _num(x: float) -> str:
    return f"{x:.4g}"


def _within(stated: float, observed: float, tolerance: float) -> bool:
    return math.isclose(stated, observed, rel_tol=tolerance, abs_tol=1e-12)


# -- delay models --------------------------------------------------------------------------------------------------


class _CountedFlops:
    """The model's training FLOPs per sample, remembering whether anything read them."""

    def __init__(self, flops: int) -> None:
        self.flops = flops
        self.read = False

    def __call__(self) -> int:
        self.read = True
        return self.flops


def _expanded(weights: np.ndarray, clients: int) -> list[int] | None:
    """Each row's weight as a whole number of clients adding up to ``clients`` (None: the rows stand for shares)."""
    whole = np.rint(weights)
    if not np.allclose(weights, whole, rtol=0, atol=1e-9) or int(whole.sum()) != clients:
        return None
    return [int(w) for w in whole]


def _absences(trace: Any) -> list[tuple[tuple[float, float | None], ...]] | None:
    return None if trace is None else [tuple((float(a), None if b is None else float(b)) for a, b in c) for c in trace]


def check_latency(model: Any, config: Mapping[str, Any] | Any = None, clients: int = 12, seed: int = 0,
                  workload: Any = None, draws: int = 400, tolerance: float = 0.06) -> Report:
    """Draw ``draws`` latencies of each of ``clients`` clients of delay model ``model`` (a class, or a name a
    scenario could give) under ``config`` (its ``latency:`` section as a mapping, or its validated ``Config``) and
    ``seed``, and set them beside what the model states.

    ``workload`` is the :class:`simfl.latency.base.Workload` the model is built and states its round times with
    (default: 200,000 model bytes, 1.5 MFLOPs per training sample, 600 samples per client, one epoch). Means and
    rates agree within ``tolerance`` (relative); a client's mean within ``tolerance`` and four standard errors of its
    draws; the spread of a client's rounds (root mean square over the clients) within four times ``tolerance``; no
    draw below the stated shortest round. The model's own refusal of ``config`` (its ``check``) is raised, as
    ``simfl validate`` would.
    """
    import torch

    from simfl import rng
    from simfl.latency.base import RoundTimes, Workload

    cls = _component("latency", model)
    parsed = _parsed("latency", cls, config)
    counted = _CountedFlops(1_500_000)
    if workload is None:
        workload = Workload(model_bytes=200_000, flops=counted, samples=(600,) * clients, epochs=1)
    else:
        counted = _CountedFlops(workload.flops if isinstance(workload.flops, int) else int(workload.flops()))
        workload = replace(workload, flops=counted)
    cls.check(parsed, clients)
    lines: list[Line] = []

    def built() -> Any:
        return cls(parsed, clients, seed, workload)

    first = built()
    drawn = np.array([[first.sample(m) for _ in range(draws)] for m in range(clients)], dtype=np.float64)
    # the same draws, the clients interleaved, with the process's global generators set elsewhere
    again = built()
    with rng.global_generators(seed, "plugin-check"):
        interleaved = np.array([[again.sample(m) for m in range(clients)] for _ in range(draws)], dtype=np.float64).T
    same = np.array_equal(drawn, interleaved)
    where = "" if same else "client {}, draw {}".format(*map(int, np.argwhere(drawn != interleaved)[0]))
    lines.append(Line("a client's k-th draw the same in any order of clients", "each client's own stream",
                      "the same" if same else f"other values ({where})", "agrees" if same else "differs",
                      "" if same else "draw only from gen, keep nothing in self that a draw changes, "
                      "use no global generator"))
    # a checkpoint halfway: the state through torch.save / torch.load(weights_only=True), a new model built
    half = draws // 2
    before = built()
    for m in range(clients):
        for _ in range(half):
            before.sample(m)
    buffer = io.BytesIO()
    torch.save(before.state(), buffer)
    buffer.seek(0)
    after = built()
    after.load_state(torch.load(buffer, weights_only=True))
    resumed = np.array([[after.sample(m) for _ in range(draws - half)] for m in range(clients)], dtype=np.float64)
    same = np.array_equal(resumed, drawn[:, half:])
    lines.append(Line("draws after state() / load_state() at a checkpoint", "the draws without one",
                      "the same" if same else "other values", "agrees" if same else "differs",
                      "" if same else "what a draw depends on beyond gen must be in state() and load_state()"))

    stated = cls.round_times(parsed, clients, seed, workload)
    means = drawn.mean(axis=1)
    if stated is None:
        lines.append(Line("round_times", "nothing", f"mean round {_num(float(drawn.mean()))} s", "not stated",
                          "the estimate counts no updates within budget.time, no horizon of budget.updates and no "
                          "wall time"))
    elif not isinstance(stated, RoundTimes):
        lines.append(Line("round_times", type(stated).__name__, "a RoundTimes expected", "differs"))
    else:
        lines.extend(_round_times_lines(stated, drawn, means, clients, tolerance))
        trace = _absences(first.absences())
        if stated.absences is not None or trace is not None:
            lines.append(_absence_line(stated, trace, clients))

    trace = _absences(first.absences())
    of = _absences(cls.absences_of(parsed, clients))
    if trace is not None or of is not None:
        lines.append(Line("absences_of(config, clients)", "none" if of is None else f"{sum(map(len, of))} intervals",
                          "none" if trace is None else f"{sum(map(len, trace))} intervals in absences()",
                          "agrees" if of == trace else "differs",
                          "" if of == trace else "simfl validate checks the departures against absences_of"))
    use = cls.flops_use(parsed)
    lines.append(Line("flops_use (reads the model's training FLOPs)", "no" if use is None else "yes",
                      "read" if counted.read else "not read",
                      "differs" if counted.read and use is None else "agrees",
                      "a model without FLOPs (a Flower app's) is then refused by the run, not by simfl validate"
                      if counted.read and use is None else ""))
    name = getattr(parsed, "model", None) or cls.__name__
    return Report(f"latency.model {name} ({clients} clients, seed {seed}, {draws} draws each)", tuple(lines))


def _round_times_lines(stated: Any, drawn: np.ndarray, means: np.ndarray, clients: int, tolerance: float
                       ) -> list[Line]:
    """The lines of a stated :class:`~simfl.latency.base.RoundTimes` against the draws (clients by rows)."""
    lines = []
    weight = stated.weight
    ok = math.isclose(stated.clients, clients, rel_tol=1e-9)
    lines.append(Line("clients the rows stand for", _num(stated.clients), str(clients),
                      "agrees" if ok else "differs"))
    mean = float((weight * stated.mean).sum() / weight.sum())
    observed = float(drawn.mean())
    lines.append(Line("mean round time", f"{_num(mean)} s", f"{_num(observed)} s",
                      "agrees" if _within(mean, observed, tolerance) else "differs"))
    rate = float((weight / stated.mean).sum() * clients / weight.sum())
    observed = float((1.0 / means).sum())
    lines.append(Line("updates per second, every client in flight", _num(rate), _num(observed),
                      "agrees" if _within(rate, observed, tolerance) else "differs"))
    spread = math.sqrt(float((weight * stated.std**2).sum() / weight.sum()))
    observed = math.sqrt(float(drawn.var(axis=1, ddof=1).mean())) if drawn.shape[1] > 1 else 0.0
    lines.append(Line("spread (std) of a client's rounds", f"{_num(spread)} s", f"{_num(observed)} s",
                      "agrees" if _within(spread, observed, 4 * tolerance) else "differs",
                      "root mean square over the clients"))
    counts = _expanded(weight, clients)
    if counts is None:
        low = float(stated.low.min())
        least = float(drawn.min())
        lines.append(Line("shortest round", f"{_num(low)} s", f"{_num(least)} s (least draw)",
                          "agrees" if low <= least else "differs"))
        return lines
    # each client's figures: the rows expanded to one per client, matched with the clients by mean round time
    rows = sorted(zip(np.repeat(stated.mean, counts), np.repeat(stated.low, counts), strict=True))
    order = np.argsort(means, kind="stable")
    spreads = drawn.std(axis=1, ddof=1) if drawn.shape[1] > 1 else np.zeros(clients)
    n = drawn.shape[1]
    worst = (0.0, "")
    low_bad = ""
    for (m_stated, l_stated), client in zip(rows, order.tolist(), strict=True):
        m = float(means[client])
        bound = tolerance * m_stated + 4 * float(spreads[client]) / math.sqrt(n)
        excess = abs(m - m_stated) / bound if bound else (0.0 if m == m_stated else math.inf)
        if excess > worst[0]:
            worst = (excess, f"client {client}: {_num(m_stated)} s stated, {_num(m)} s drawn")
        least = float(drawn[client].min())
        if l_stated > least and not low_bad:
            low_bad = f"client {client}: {_num(l_stated)} s stated, {_num(least)} s drawn"
    lines.append(Line("each client's mean round time", "per row", "per client's draws",
                      "differs" if worst[0] > 1 else "agrees", worst[1] if worst[0] > 1 else ""))
    lines.append(Line("each client's shortest round", "per row", "least draw per client",
                      "differs" if low_bad else "agrees", low_bad))
    return lines


def _absence_line(stated: Any, trace: list[tuple[tuple[float, float | None], ...]] | None, clients: int) -> Line:
    """The stated absences (per row) against the model's ``absences()`` (per client)."""
    rows = None if stated.absences is None else [tuple(a) for a in stated.absences]
    counts = _expanded(stated.weight, clients)
    if rows is None or trace is None:
        same = rows is None and trace is None
    elif counts is None:
        same = set(rows) == set(trace)
    else:
        expanded = [r for r, c in zip(rows, counts, strict=True) for _ in range(c)]
        same = sorted(expanded, key=repr) == sorted(trace, key=repr)
    return Line("round_times absences", "none" if rows is None else f"{sum(map(len, rows))} intervals over the rows",
                "none" if trace is None else f"{sum(map(len, trace))} intervals in absences()",
                "agrees" if same else "differs")


# -- algorithms ----------------------------------------------------------------------------------------------------


def _mlp_bytes(hidden: int, features: int, classes: int) -> int:
    """Bytes of an MLP's float32 parameters (``features`` inputs, ``hidden`` units, ``classes`` outputs)."""
    return 4 * (features * hidden + hidden + hidden * classes + classes)


FEATURES, CLASSES = 64, 10
"""The timed MLP's inputs and outputs (as ``python -m benchmarks.arrival_bytes``)."""


def _scenario(entry: Mapping[str, Any], synchronous: bool, clients: int, hidden: int, updates: int) -> Any:
    """The engine's probe with ``entry`` over ``clients`` clients, an MLP of ``hidden`` units, ``updates``
    updates: no training, every client in flight (a synchronous rule: its own rounds)."""
    from simfl.launch.measure_speeds import PROBE
    from simfl.schema.scenario import validate

    raw: dict[str, Any] = {**copy.deepcopy(PROBE), "algorithms": [dict(entry)],
                           "model": {"name": "mlp", "hidden": [hidden]}, "budget": {"updates": updates}}
    raw["data"] = {**raw["data"], "features": FEATURES, "classes": CLASSES,
                   "train_size": max(raw["data"]["train_size"], 2 * clients),
                   "partition": {"kind": "iid", "clients": clients}}
    if synchronous:
        raw.pop("server")
    else:
        raw["server"] = {"concurrency": clients}
    return validate(raw, "plugin check")


def _per_arrival(entry: Mapping[str, Any], synchronous: bool, clients: int, hidden: int, warm: int, timed: int
                 ) -> tuple[float, Any]:
    """CPU seconds an arrival of the timed run (after a warm-up run in the same federation), and its state."""
    from simfl.launch import experiment

    first, second = (_scenario(entry, synchronous, clients, hidden, n) for n in (warm, timed))
    fed = experiment.federation(first, experiment.load_dataset(first), 0)
    experiment.run_one(first, fed, 0)
    start = time.process_time()
    result = experiment.run_one(second, fed, 0)
    return (time.process_time() - start) / max(result.state.updates, 1), result.state


def _pass_seconds_per_byte(hidden: int, calls: int = 2_000) -> float:
    """CPU seconds per byte of one ``a + b`` over the large MLP's vector: the shortest of five rounds of ``calls``."""
    import torch

    n = _mlp_bytes(hidden, FEATURES, CLASSES) // 4
    a, b = torch.randn(n), torch.randn(n)
    for _ in range(200):
        a + b
    best = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(calls):
            a + b
        best.append((time.process_time() - start) / calls)
    return min(best) / (4 * n)


def check_algorithm(entry: Mapping[str, Any], clients: int = 10, updates: int = 3_000, warm: int = 500,
                    small: int = 8, large: int = 256, tolerance: float = 1.5) -> Report:
    """Run the algorithm entry ``entry`` (a scenario's ``algorithms[i]``: ``name``, a class, built-in name, entry
    point or import path, and its options) without training and set what it does beside what its config states.

    Its passes over the model's bytes at an arrival (``arrival_work(clients)``, by default ``arrival_passes``) are
    measured as ``python -m benchmarks.arrival_bytes`` measures the built-ins': the engine's probe (lognormal
    latencies, ``executor: {kind: none}``) with the rule over ``clients`` clients (every one in flight) at an MLP of
    ``small`` and of ``large`` hidden units over 64 features and 10 classes, ``updates`` updates timed in CPU time
    after a warm-up run of ``warm``; the difference of the two per arrival over the difference of the models'
    bytes, over the CPU time per byte of one ``a + b`` over the large model's vector. It agrees when within a factor
    ``tolerance`` of the statement. CPU time on one thread under simfl's numerics pin: another process's load
    changes it less than wall time, but it still shares the caches; measure on a quiet machine. About a second for
    the defaults (a rule with a costly arrival, more).

    From the same run: a synchronous rule's round size (updates over rounds; no failures, deadline or departures
    in the probe, so every member delivers) against ``round_clients(clients)``, and an asynchronous one's rounds (none)
    against a ``round_clients`` of None.
    """
    from simfl.algorithms.base import SyncAlgorithm
    from simfl.launch.measure_speeds import measuring

    cls = _component("algorithm", entry["name"])
    synchronous = issubclass(cls, SyncAlgorithm)
    with measuring():
        per = {}
        for hidden in (small, large):
            per[hidden], state = _per_arrival(entry, synchronous, clients, hidden, warm, updates)
        pass_seconds = _pass_seconds_per_byte(large)
    config = _scenario(entry, synchronous, clients, small, 1).algorithms[0]
    extra = _mlp_bytes(large, FEATURES, CLASSES) - _mlp_bytes(small, FEATURES, CLASSES)
    measured = (per[large] - per[small]) / extra / pass_seconds
    stated = config.arrival_work(clients)
    timing = (f"{per[small] * 1e6:.1f} us and {per[large] * 1e6:.1f} us an arrival at {small} and {large} hidden "
              f"units, a pass {pass_seconds * 1e9:.3f} ns a byte")
    lines = []
    if stated is None:
        lines.append(Line("arrival_passes", "nothing", f"{measured:.1f} passes", "not stated",
                          f"state arrival_passes = {max(round(measured), 1)}; {timing}"))
    else:
        ratio = measured / stated if stated else math.inf
        agrees = 1 / tolerance <= ratio <= tolerance
        lines.append(Line("arrival_passes", f"{stated:g} passes", f"{measured:.1f} passes",
                          "agrees" if agrees else "differs", timing))
    k = config.round_clients(clients)
    if synchronous:
        observed = state.updates / state.rounds if state.rounds else math.nan
        shown = f"{observed:g} updates a round over {state.rounds} rounds" if state.rounds else "no round closed"
        lines.append(Line("round_clients (K)", "None (asynchronous)" if k is None else str(k), shown,
                          "agrees" if k is not None and observed == k else "differs",
                          "" if k is not None else "the estimate counts the rule as asynchronous: state "
                          "round_clients, or a clients_per_round field"))
    else:
        lines.append(Line("round_clients (K)", "None (asynchronous)" if k is None else str(k),
                          "each arrival aggregated on its own", "agrees" if k is None else "differs",
                          "" if k is None else "the estimate counts synchronous rounds of an asynchronous rule"))
    name = getattr(cls, "__name__", str(entry["name"]))
    return Report(f"algorithm {name} ({clients} clients, {updates} updates without training)", tuple(lines))


# -- datasets and models -------------------------------------------------------------------------------------------


def check_dataset(dataset: Any, config: Mapping[str, Any] | Any) -> Report:
    """Load dataset ``dataset`` (a class, or a name a scenario could give) under ``config`` (its ``data:``
    section, ``partition`` included, or its validated ``Config``) and set what it loaded beside its ``facts()``."""
    cls = _component("dataset", dataset)
    parsed = _parsed("dataset", cls, config)
    facts = parsed.facts() if callable(getattr(parsed, "facts", None)) else None
    data = cls.load(parsed)
    x = data.x_train
    observed = {
        "sample shape": tuple(int(d) for d in data.input_shape),
        "classes": int(data.num_classes),
        "training samples": len(data.y_train),
        "test samples": len(data.y_test),
        "bytes of one value": int(x.element_size()),
        "kind": "values" if x.is_floating_point() else "tokens",
    }
    name = f"data.dataset {getattr(parsed, 'dataset', None) or cls.__name__}"
    if facts is None:
        return Report(name, (Line("facts()", "nothing", ", ".join(f"{k} {v}" for k, v in observed.items()),
                                  "not stated", "the estimate counts the data's memory and sizes the model once "
                                  "loaded"),))
    stated = {"sample shape": tuple(facts.shape), "classes": facts.classes, "training samples": facts.train,
              "test samples": facts.test, "bytes of one value": facts.item_bytes, "kind": facts.kind}
    return Report(name, tuple(Line(k, str(stated[k]), str(v), "agrees" if stated[k] == v else "differs")
                              for k, v in observed.items()))


def check_model(model: Any, config: Mapping[str, Any] | Any, shape: Sequence[int], classes: int,
                tolerance: float = 0.1) -> Report:
    """Build model ``model`` (a class, or a name a scenario could give) under ``config`` (its ``model:`` section or
    its validated ``Config``) for samples of ``shape`` in ``classes``, measure it as the estimate does where a model
    states nothing (:func:`simfl.models.measured.measure`: parameters, bytes, exchanged tensors, training FLOPs per
    sample, activation bytes per sample), and set that beside its config's ``cost(shape, classes)``. Counts agree
    exactly; FLOPs and activations within ``tolerance`` (relative)."""
    from simfl.models import measured

    cls = _component("model", model)
    parsed = _parsed("model", cls, config)
    shape = tuple(int(d) for d in shape)
    name = f"model {getattr(parsed, 'name', None) or cls.__name__}"
    built = measured.measure(cls.build, parsed, shape, classes)
    stated = measured.stated(parsed, shape, classes)
    if stated is None:
        return Report(name, (Line("cost()", "nothing", f"{built.params} parameters, {built.bytes} bytes",
                                  "not stated", "the estimate measures it by building it, as here"),))
    if stated.unknown is not None:
        return Report(name, (Line("cost()", f"sized only when the run starts ({stated.unknown})",
                                  f"{built.params} parameters", "not stated"),))
    lines = [
        Line("parameters", str(stated.params), str(built.params),
             "agrees" if stated.params == built.params else "differs"),
        Line("bytes", str(stated.bytes), str(built.bytes), "agrees" if stated.bytes == built.bytes else "differs"),
        Line("exchanged tensors", "None" if stated.tensors is None else f"{len(stated.tensors)} tensors",
             f"{len(built.tensors or {})} tensors", "not stated" if stated.tensors is None
             else "agrees" if stated.tensors == built.tensors else "differs"),
    ]
    from simfl.latency.base import counted

    if stated.flops is None:
        lines.append(Line("training FLOPs per sample", "nothing", "-", "not stated"))
    else:
        s, b = counted(stated.flops), counted(built.flops)  # type: ignore[arg-type]
        lines.append(Line("training FLOPs per sample", str(s), str(b), "agrees" if _within(s, b, tolerance) else
                          "differs"))
    acts, seen = measured.activations_of(stated), measured.activations_of(built)
    if acts is None or seen is None:
        lines.append(Line("activation bytes per sample", "nothing" if acts is None else str(acts), str(seen),
                          "not stated", "the memory estimate counts none"))
    else:
        agrees = all(_within(a, b, tolerance) for a, b in zip(acts, seen, strict=True))
        lines.append(Line("activation bytes per sample (training, evaluation)", str(acts), str(seen),
                          "agrees" if agrees else "differs"))
    return Report(name, tuple(lines))
