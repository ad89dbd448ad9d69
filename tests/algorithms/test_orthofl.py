"""OrthoFL and its variants against hand-computed cases, driven as the engine drives them."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from simfl.algorithms.configs import FedAsyncConfig, PolynomialStaleness
from simfl.algorithms.fedasync import FedAsync
from simfl.algorithms.orthofl import OrthoFL, OrthoFLConfig
from simfl.algorithms.orthofl_ablations import (
    OrthoFLNoCalib,
    OrthoFLNoCalibConfig,
    OrthoFLNoMA,
    OrthoFLNoMAConfig,
    OrthoFLPairwise,
    OrthoFLPairwiseConfig,
)
from tests.algorithms.algo_helpers import arrival, bn_layout, close, linear_layout, make_setup, vec

# Layout of every linear case: [weight_0, weight_1 | bias]; beta = 0.5, a = 1 so beta_t = 0.5 / s.


def test_paper_rule_three_arrivals() -> None:
    alg = OrthoFL(OrthoFLConfig(beta=0.5, a=1.0, shift_source="global"), make_setup(linear_layout(), [0, 0, 0], clients=2))
    w0 = alg.initial_weights(0)
    assert alg.initial_weights(1) is w0  # one shared tensor for clients sent the same version
    close(w0, [0, 0, 0])

    # t=1, client 0, s=1: no shift yet, client keeps [2,0|1]; W = 0.5*0 + 0.5*[2,0,1] = [1,0,0.5]
    sent0, beta = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, staleness=1, update=1))
    assert beta == 0.5
    close(sent0, [2, 0, 1])
    close(alg.global_weights(), [1, 0, 0.5])
    assert alg.state()["anchors"]["rows"][0] is alg.global_weights()  # W^(tau+) kept by reference

    # t=2, client 1 (started from W0), s=2, beta_t=0.25; dWm=[0,2|-1]; dW = W - W0 = [1,0|0.5]
    #   weight: <[1,0],[0,2]> = 0 -> [1,0];  bias: 0.5 - (-0.5/1)*(-1) = 0
    #   client 1 gets [0,2,-1] + [1,0,0] = [1,2,-1];  W = 0.75*[1,0,.5] + 0.25*[0,2,-1] = [.75,.5,.125]
    sent1, beta = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, staleness=2, update=2))
    assert beta == 0.25
    close(sent1, [1, 2, -1])
    close(alg.global_weights(), [0.75, 0.5, 0.125])

    # t=3, client 0 (started from [2,0|1]), trained to [3,1|1], s=3-1=2, beta_t=0.25
    #   dWm = [1,1|0];  dW = W - W^(1+) = [.75,.5,.125] - [1,0,.5] = [-.25,.5|-.375]
    #   weight: <dW,dWm> = .25, |dWm|^2 = 2, coef .125 -> [-.375, .375];  bias: update 0 -> -.375 passes
    #   client 0 gets [3-.375, 1+.375, 1-.375] = [2.625, 1.375, .625]
    #   W = .75*[.75,.5,.125] + .25*[3,1,1] = [1.3125, .625, .34375]
    sent0, beta = alg.on_arrival(arrival(0, vec(3, 1, 1), sent0, staleness=2, update=3))
    assert beta == 0.25
    close(sent0, [2.625, 1.375, 0.625])
    close(alg.global_weights(), [1.3125, 0.625, 0.34375])


def test_default_beta_t_is_point_six_over_root_s() -> None:
    alg = OrthoFL(OrthoFLConfig(shift_source="global"), make_setup(linear_layout(), [0, 0, 0], clients=2))
    w0 = alg.initial_weights(0)
    _, beta = alg.on_arrival(arrival(0, vec(1, 1, 1), w0, staleness=4, update=4))
    assert beta == pytest.approx(0.6 / 2)  # 0.6 * 4^(-0.5)
    close(alg.global_weights(), [0.3, 0.3, 0.3])


def test_first_weight_option() -> None:
    alg = OrthoFL(OrthoFLConfig(beta=0.5, a=1.0, first_weight=1.0, shift_source="global"),
                  make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    _, beta = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert beta == 1.0
    close(alg.global_weights(), [2, 0, 1])
    _, beta = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 2, 2))
    assert beta == 0.25  # only the very first update
    close(alg.global_weights(), [1.5, 0.5, 0.5])


def test_chain_follows_released_code_three_arrivals() -> None:
    # released code: G = last calibrated model sent; shift = G - (what the client was sent);
    # the moving average is evaluated only, first update mixed at weight 1.
    cfg = OrthoFLConfig(beta=0.5, a=1.0, shift_source="chain")
    alg = OrthoFL(cfg, make_setup(linear_layout(), [0, 0, 0], clients=2))
    w0 = alg.initial_weights(0)
    # t=1 client 0: shift = G0 - W0 = 0 -> sent [2,0|1] = G;  MA weight 1 -> W = [2,0,1]
    sent0, beta = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert beta == 1.0
    close(sent0, [2, 0, 1])
    close(alg.global_weights(), [2, 0, 1])
    # t=2 client 1 (sent W0), s=2: shift = G - W0 = [2,0|1], dWm = [0,2|-1]
    #   weight: orthogonal -> [2,0];  bias: 1 - (-1/1)(-1) = 0  -> sent [2,2|-1] = G
    #   MA: .75*[2,0,1] + .25*[0,2,-1] = [1.5,.5,.5]
    sent1, beta = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 2, 2))
    assert beta == 0.25
    close(sent1, [2, 2, -1])
    close(alg.global_weights(), [1.5, 0.5, 0.5])
    # t=3 client 0 (sent [2,0|1]) -> [3,1|1], s=2: shift = G - [2,0,1] = [0,2|-2], dWm = [1,1|0]
    #   weight: coef <[0,2],[1,1]>/2 = 1 -> [-1,1];  bias: update 0 -> -2 passes
    #   sent [3-1, 1+1, 1-2] = [2,2,-1] = G;  MA: .75*[1.5,.5,.5] + .25*[3,1,1] = [1.875,.625,.625]
    sent0, beta = alg.on_arrival(arrival(0, vec(3, 1, 1), sent0, 2, 3))
    close(sent0, [2, 2, -1])
    close(alg.global_weights(), [1.875, 0.625, 0.625])


def _released_code_reference(
    names: list[str],
    bn: set[str],
    init: dict[str, torch.Tensor],
    sequence: list[tuple[int, dict[str, torch.Tensor]]],
    clients: int,
) -> tuple[list[dict[str, torch.Tensor]], dict[str, torch.Tensor]]:
    """The released code's server loop, restated per layer with dicts (trained weights given as deltas)."""
    g = {k: v.clone() for k, v in init.items()}
    sent = {c: {k: v.clone() for k, v in init.items()} for c in range(clients)}
    avg = {k: v.clone() for k, v in init.items()}
    delay = [0] * clients
    out = []
    for cid, delta in sequence:
        trained = {k: sent[cid][k] + delta[k] for k in names}
        new = {}
        for k in names:
            if k in bn:
                new[k] = trained[k]
                continue
            shift = g[k] - sent[cid][k]
            upd = trained[k] - sent[cid][k]
            coef = torch.dot(shift.flatten(), upd.flatten()) / (torch.dot(upd.flatten(), upd.flatten()) + 1e-19)
            new[k] = trained[k] + (shift - coef * upd)
        alpha = 1.0 if sum(delay) == 0 else 0.6 * (delay[cid] + 1) ** (-0.5)
        avg = {k: (1 - alpha) * avg[k] + alpha * trained[k] for k in names}
        delay = [0 if c == cid else d + 1 for c, d in enumerate(delay)]
        g = new
        sent[cid] = {k: v.clone() for k, v in new.items()}
        out.append(new)
    return out, avg


def test_chain_matches_released_code_on_random_sequence() -> None:
    layout = bn_layout()
    gen = torch.Generator().manual_seed(3)
    clients = 3
    init = torch.randn(layout.size, generator=gen)
    order = [0, 1, 2, 1, 1, 0, 2, 2, 0, 1]
    deltas = [torch.randn(layout.size, generator=gen) for _ in order]
    ref_sent, ref_avg = _released_code_reference(
        layout.names,
        {s.name for s in layout.segments if s.bn},
        layout.split(init),
        [(c, layout.split(d)) for c, d in zip(order, deltas, strict=True)],
        clients,
    )
    alg = OrthoFL(OrthoFLConfig(shift_source="chain", bn="local"), make_setup(layout, init.tolist(), clients))
    start = {c: alg.initial_weights(c) for c in range(clients)}
    last = [0] * clients
    for t, (c, d) in enumerate(zip(order, deltas, strict=True), start=1):
        sent, _ = alg.on_arrival(arrival(c, start[c] + d, start[c], staleness=t - last[c], update=t))
        torch.testing.assert_close(sent, layout.join(ref_sent[t - 1]), rtol=1e-5, atol=1e-6)
        start[c], last[c] = sent, t
    torch.testing.assert_close(alg.global_weights(), layout.join(ref_avg), rtol=1e-5, atol=1e-6)


# BN layout: [w0, w1, b | bn.weight, bn.bias | running_mean, running_var]
BN_INIT = [0, 0, 0, 1, 0, 0, 1]
BN_ARRIVAL_1 = [2, 0, 1, 2, 1, 2, 3]  # client 0; W after (beta_t .5) = [1,0,.5, 1.5,.5, 1,2]
BN_ARRIVAL_2 = [0, 2, -1, 2, -1, 1, 1]  # client 1, s=2; dWm = [0,2,-1, 1,-1, 1,0]; dW = [1,0,.5, .5,.5, 1,1]


@pytest.mark.parametrize(
    ("bn", "granularity", "expected"),
    [
        # per tensor, BN local: weight orthogonal -> [1,0]; bias scalar -> 0; BN entries = client's own
        ("local", "tensor", [1, 2, -1, 2, -1, 1, 1]),
        # whole model less BN: <[1,0,.5],[0,2,-1]> = -.5, |.|^2 = 5, coef -.1 -> [1, .2, .4]
        ("local", "model", [1, 2.2, -0.6, 2, -1, 1, 1]),
        # whole model with BN: <dW,dWm> = -.5+.5-.5+1 = .5, |dWm|^2 = 8, coef .0625
        #   dW_perp = [1, -.125, .5625, .4375, .5625, .9375, 1]
        ("project", "model", [1, 1.875, -0.4375, 2.4375, -0.4375, 1.9375, 2]),
        # per tensor with BN projected: each BN tensor is a scalar, so its shift vanishes where the
        # update moved it, and running_var (update 0) gets its whole shift 1: 1 + 1 = 2
        ("project", "tensor", [1, 2, -1, 2, -1, 1, 2]),
    ],
)
def test_batch_norm_policy_and_granularity(bn: str, granularity: str, expected: list[float]) -> None:
    cfg = OrthoFLConfig(beta=0.5, a=1.0, bn=bn, granularity=granularity, shift_source="global")  # type: ignore[arg-type]
    alg = OrthoFL(cfg, make_setup(bn_layout(), BN_INIT, clients=2))
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, vec(*BN_ARRIVAL_1), w0, 1, 1))
    sent1, _ = alg.on_arrival(arrival(1, vec(*BN_ARRIVAL_2), w0, 2, 2))
    close(sent1, expected)
    # the global average mixes BN tensors like any weight: .75*[1,0,.5,1.5,.5,1,2] + .25*arrival 2
    close(alg.global_weights(), [0.75, 0.5, 0.125, 1.625, 0.125, 1.0, 1.75])


def test_zero_client_update_passes_shift_without_nan() -> None:
    alg = OrthoFL(OrthoFLConfig(beta=0.5, a=1.0, shift_source="global"), make_setup(linear_layout(), [0, 0, 0], clients=2))
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))  # W = [1, 0, .5]
    sent1, _ = alg.on_arrival(arrival(1, w0.clone(), w0, 2, 2))  # client 1 did not move
    close(sent1, [1, 0, 0.5])  # gets the whole shift
    assert torch.isfinite(sent1).all()


def test_no_calib_equals_fedasync() -> None:
    setup = make_setup(linear_layout(), [0, 0, 0], clients=2)
    ab = OrthoFLNoCalib(OrthoFLNoCalibConfig(beta=0.5, a=1.0), setup)
    fa = FedAsync(FedAsyncConfig(alpha=0.5, staleness=PolynomialStaleness(a=1.0)), setup)
    w0 = ab.initial_weights(0)
    # t=1: W = .5*[2,0,1] = [1,0,.5]; t=2 (s=2, weight .25): W = [.75,.5,.125]; t=3 (s=3, weight 1/6)
    steps = [(0, vec(2, 0, 1), 1), (1, vec(0, 2, -1), 2), (0, vec(4, 4, 4), 2)]
    for t, (c, w, s) in enumerate(steps, start=1):
        sent_a, beta_a = ab.on_arrival(arrival(c, w, w0, s, t))
        sent_f, beta_f = fa.on_arrival(arrival(c, w, w0, s, t))
        assert beta_a == beta_f
        assert torch.equal(sent_a, sent_f)
        assert sent_a is ab.global_weights()  # the client gets the global model itself
    # t=3: .75*[.75,.5,.125] + .25*[4,4,4] = [1.5625, 1.375, 1.09375]
    close(ab.global_weights(), [1.5625, 1.375, 1.09375])


def test_no_ma_global_is_calibrated_client_model() -> None:
    alg = OrthoFLNoMA(OrthoFLNoMAConfig(), make_setup(linear_layout(), [0, 0, 0], clients=2))
    w0 = alg.initial_weights(0)
    # t=1: shift 0 -> W = [2,0,1]
    sent0, beta = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert beta is None
    close(alg.global_weights(), [2, 0, 1])
    # t=2: shift = W - W0 = [2,0|1], dWm = [0,2|-1] -> [2,0|0] -> W = [2,2,-1]
    alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 2, 2))
    close(alg.global_weights(), [2, 2, -1])
    # t=3: client 0 sent [2,0,1] trains to [3,1,1]: shift = [0,2|-2], dWm = [1,1|0] -> [-1,1|-2]
    sent0, _ = alg.on_arrival(arrival(0, vec(3, 1, 1), sent0, 2, 3))
    close(sent0, [2, 2, -1])
    assert sent0 is alg.global_weights()


def test_pairwise_projects_incoming_update_off_other_clients_latest() -> None:
    alg = OrthoFLPairwise(OrthoFLPairwiseConfig(beta=0.5, a=1.0), make_setup(linear_layout(), [0, 0, 0], 3))
    w0 = alg.initial_weights(0)
    # t=1 client 0: no other updates, no shift -> sent [1,0,1]; W = [.5,0,.5]
    sent0, _ = alg.on_arrival(arrival(0, vec(1, 0, 1), w0, 1, 1))
    close(sent0, [1, 0, 1])
    # t=2 client 1 (s=2): dWm = [1,1|2]; others: client 0's [1,0|1]
    #   weight: [1,1] - 1*[1,0] = [0,1]; bias: a scalar along a nonzero scalar -> 0
    #   sent = W0 + [0,1|0] + dW [.5,0|.5] = [.5,1,.5];  W = .75*[.5,0,.5] + .25*[1,1,2] = [.625,.25,.875]
    sent1, _ = alg.on_arrival(arrival(1, vec(1, 1, 2), w0, 2, 2))
    close(sent1, [0.5, 1, 0.5])
    close(alg.global_weights(), [0.625, 0.25, 0.875])
    # t=3 client 0 again (s=2), [1,0,1] -> [1,2,1]: dWm = [0,2|0]; others: only client 1's [1,1|2]
    #   (its own latest is excluded, else the weight layer would be spanned and give 0)
    #   weight: coef <[0,2],[1,1]>/2 = 1 -> [-1,1]; bias: update 0 -> 0
    #   dW = W - W^(1+) = [.125,.25|.375]; sent = [1,0,1] + [-1,1,0] + dW = [.125,1.25,1.375]
    #   W = .75*[.625,.25,.875] + .25*[1,2,1] = [.71875,.6875,.90625]
    sent0, _ = alg.on_arrival(arrival(0, vec(1, 2, 1), sent0, 2, 3))
    close(sent0, [0.125, 1.25, 1.375])
    close(alg.global_weights(), [0.71875, 0.6875, 0.90625])
    # t=4 client 2 (s=4, beta_t=.125), dWm = [3,2|0]; others [0,2|0], [1,1|2] span the weight plane
    #   -> projected update 0; sent = W0 + 0 + dW = W = [.71875,.6875,.90625]
    #   W = .875*[.71875,.6875,.90625] + .125*[3,2,0] = [1.00390625, .8515625, .79296875]
    sent2, beta = alg.on_arrival(arrival(2, vec(3, 2, 0), w0, 4, 4))
    assert beta == 0.125
    close(sent2, [0.71875, 0.6875, 0.90625])
    close(alg.global_weights(), [1.00390625, 0.8515625, 0.79296875])


def test_pairwise_local_bn_keeps_client_values() -> None:
    alg = OrthoFLPairwise(OrthoFLPairwiseConfig(beta=0.5, a=1.0), make_setup(bn_layout(), BN_INIT, 2))
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, vec(*BN_ARRIVAL_1), w0, 1, 1))
    # client 1, per tensor: weight [0,2] is orthogonal to client 0's [2,0] -> kept; bias -1 along 1 -> 0
    #   dW non-BN (not projected) [1,0,.5]: sent non-BN = W0 + [0,2,0] + [1,0,.5] = [1,2,.5]
    #   BN entries: its own trained values [2,-1,1,1] (no shift, no projection)
    sent1, _ = alg.on_arrival(arrival(1, vec(*BN_ARRIVAL_2), w0, 2, 2))
    close(sent1, [1, 2, 0.5, 2, -1, 1, 1])
    # whole-model granularity: [0,2,-1] off [2,0,1]: coef -1/5 -> [.4,2,-.8]; + dW -> [1.4,2,-.3]
    alg = OrthoFLPairwise(
        OrthoFLPairwiseConfig(beta=0.5, a=1.0, granularity="model"), make_setup(bn_layout(), BN_INIT, 2)
    )
    alg.on_arrival(arrival(0, vec(*BN_ARRIVAL_1), w0, 1, 1))
    sent1, _ = alg.on_arrival(arrival(1, vec(*BN_ARRIVAL_2), w0, 2, 2))
    close(sent1, [1.4, 2, -0.3, 2, -1, 1, 1])


@pytest.mark.parametrize("bad", [{"beta": 1.0}, {"beta": 0.0}, {"a": -1.0}, {"bn": "x"}, {"first_weight": 0.0}, {"x": 1}])
def test_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        OrthoFLConfig(**bad)  # type: ignore[arg-type]


def test_sqrt_staleness_default_not_exact_binary() -> None:
    # guard: beta_t uses s^(-a) with the paper's s >= 1 (not the released code's s - 1)
    alg = OrthoFL(OrthoFLConfig(shift_source="global"), make_setup(linear_layout(), [0, 0, 0], clients=1))
    w0 = alg.initial_weights(0)
    _, beta = alg.on_arrival(arrival(0, vec(1, 1, 1), w0, staleness=3, update=3))
    assert beta == pytest.approx(0.6 / math.sqrt(3))


def test_no_ma_client_trajectory_equals_chain_orthofl() -> None:
    """Under 'chain' the clients of OrthoFL and of OrthoFL w/o MA are sent the same models: the chain G is
    exactly w/o MA's global model; the two differ only in what is evaluated (moving average vs G)."""
    layout = bn_layout()
    gen = torch.Generator().manual_seed(5)
    clients = 3
    init = torch.randn(layout.size, generator=gen)
    order = [0, 1, 2, 1, 1, 0, 2, 2, 0, 1]
    chain = OrthoFL(OrthoFLConfig(shift_source="chain"), make_setup(layout, init.tolist(), clients))
    no_ma = OrthoFLNoMA(OrthoFLNoMAConfig(), make_setup(layout, init.tolist(), clients))
    starts = {c: (chain.initial_weights(c), no_ma.initial_weights(c)) for c in range(clients)}
    last = [0] * clients
    for t, c in enumerate(order, start=1):
        delta = torch.randn(layout.size, generator=gen)
        s_chain, s_no_ma = starts[c]
        sent_chain, _ = chain.on_arrival(arrival(c, s_chain + delta, s_chain, staleness=t - last[c], update=t))
        sent_no_ma, _ = no_ma.on_arrival(arrival(c, s_no_ma + delta, s_no_ma, staleness=t - last[c], update=t))
        torch.testing.assert_close(sent_chain, sent_no_ma, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(no_ma.global_weights(), chain.chain, rtol=1e-5, atol=1e-6)
        starts[c], last[c] = (sent_chain, sent_no_ma), t
    assert not torch.allclose(chain.global_weights(), no_ma.global_weights())  # the evaluated models differ


def test_pairwise_is_refused_above_its_population_limit(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Its arrival orthogonalises every other client's latest update (work in the square of their number):
    validate refuses it above PAIRWISE_MAX_CLIENTS in one line, and so does a run whose partition makes more."""
    import yaml

    from simfl.algorithms.configs import PAIRWISE_MAX_CLIENTS
    from simfl.cli import main
    from tests.conftest import tiny_scenario

    def write(partition: dict, name: str) -> str:
        raw = tiny_scenario(data={"dataset": "synthetic", "train_size": 1_000, "test_size": 20, "features": 4,
                                  "classes": 2, "partition": partition},
                            latency={"model": "uniform", "low": 1.0, "high": 2.0}, server={"concurrency": 5},
                            algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "orthofl_pairwise"}])
        path = tmp_path / name
        path.write_text(yaml.safe_dump(raw))
        return str(path)

    assert main(["validate", write({"kind": "iid", "clients": PAIRWISE_MAX_CLIENTS}, "ok.yaml")]) == 0
    capsys.readouterr()
    assert main(["validate", write({"kind": "iid", "clients": PAIRWISE_MAX_CLIENTS + 1}, "big.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "algorithms[1]: orthofl_pairwise runs over at most 100 clients and the partition makes 101" in err
    assert "grows with the square" in err
    counts = write({"kind": "counts", "counts": [[3, 3]] * (PAIRWISE_MAX_CLIENTS + 1)}, "counts.yaml")  # no clients key
    assert main(["run", counts, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "partition makes 101" in err, err
