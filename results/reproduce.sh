#!/usr/bin/env bash
# Rebuilds the paper runs committed under results/ (see results/README.md), one after another.
# Scale: main5, har5 and ablation5 run the paper's setting as the scenario files give it (E = 5, OrthoFL in
# both readings as labelled entries), about 16 hours of one core for the two main comparisons (measured:
# cpu_minutes of results/derived.py); fedadam_lr is the
# short search that fixed FedAdam's server learning rate. The older steps (main, har, ablation, heterogeneity,
# delays) use local epochs E = 1 (one fifth of the training per update) to fit the CPU time then available, about
# nine hours of one core; rerun today they list OrthoFL as the two labelled entries the scenario files now hold
# (the committed E = 1 folders have one entry, 'orthofl', the paper's reading). The motivating study keeps
# E = 5. Every method runs for the same virtual time (the scenario's budget, or the one set below). Each run
# trains with one thread, and each step runs its runs side by side on every core (`simfl run --workers`), so a
# table takes about as long as its longest run on a machine with a core per run.
# Usage: results/reproduce.sh [main5|har5|ablation5|ca2fl_readings|bn_stats|bn_variance|tuned5|fedadam_lr|main|har|ablation|heterogeneity|delays|
#   newsgroups|motivation|examples|scaffold|cross_device|stragglers|bandwidth|async_rules|report]...
# (default: all but tuned5, the long tuned comparison). The report step's `simfl report` lines are also what tests/studies/test_report.py rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
SIMFL=${SIMFL:-simfl}
PYTHON=${PYTHON:-python}
E1=(--set train.epochs=1)

table() {  # $1 scenario, $2 output folder, then extra `simfl run` options: the whole table in one command, its runs
  # side by side on every core (--workers, default: all the cores hold); a killed or interrupted step continues where it
  # stopped (a finished folder is kept, a .partial one is resumed: finished runs kept, runs with a checkpoint continued)
  local file=$1 out=$2
  shift 2
  if [ -d "$out" ]; then return; fi
  if [ -d "$out.partial" ]; then
    $SIMFL run --resume "$out" --quiet
  else
    $SIMFL run "$file" --checkpoint-every 50 --quiet --out "$out" "$@"
  fi
}
main5() {  # MNIST main comparison at the paper's E = 5: 8 entries (OrthoFL in both readings) x 3 seeds, 12,000 s
  table scenarios/paper/mnist.yaml results/paper-mnist-e5
}
har5() {  # HAR main comparison at the paper's E = 5: 8 entries x 3 seeds, 11,000 virtual seconds
  table scenarios/paper/har.yaml results/paper-har-e5
}
ablation5() {  # MNIST ablation at E = 5, seed 0: w/o MA and pairwise. The other three rows are runs of the main
  # comparison: w/o Calib. is FedAsync with alpha = beta (its `fedasync` entry; tests/algorithms/test_orthofl.py) and
  # the two OrthoFL readings are its seed-0 entries, the very runs the ablation file would repeat (the scenario name
  # enters no random stream). The two runs take the main scenario's name, so that the report pools them with those.
  table scenarios/studies/ablation.yaml results/ablation-mnist-e5 --only orthofl_no_ma,orthofl_pairwise --seeds 0 \
    --set name=paper-mnist
}
ca2fl_readings() {  # CA2FL's two readings of a repeated arrival within one buffer, MNIST at E = 5: 'latest' x 3 seeds.
  # 'round_start' (the default) is the main comparison's `ca2fl` entry, the same runs, so these take its scenario name
  # and pool with it
  table scenarios/studies/ca2fl_readings.yaml results/ca2fl-readings-mnist-e5 --only ca2fl_latest --set name=paper-mnist
}
bn_stats() {  # batch norm's running statistics in the buffered rules, HAR at E = 5: 'mean' for FedBuff and CA2FL, seed 0.
  # 'step' (the default) is the main comparison's `fedbuff` and `ca2fl` entries, the same runs, so these take its
  # scenario name and pool with them
  table scenarios/studies/bn_stats.yaml results/bn-stats-har-e5 --only fedbuff_bn_mean,ca2fl_bn_mean --seeds 0 \
    --set name=paper-har
}
bn_variance() {  # why CA2FL's HAR evaluations are not finite under 'step': its seed 0 to its first such evaluation
  # (400 s), recording the first batch-norm layer's running variance after every arrival (record.layer)
  table scenarios/paper/har.yaml results/bn-variance-har-e5 --only ca2fl --seeds 0 --set budget.time=400 \
    --set record.layer=1.running_var
}
tuned5() {  # MNIST Table 2 at E = 5 tuned on equal terms (docs/fair-comparisons.md), in three parts (synchronous
  # baselines, asynchronous baselines, OrthoFL): each entry 6 trials of 6,000 s on seed 3, scored on 10% of each
  # client's rows held out (scenarios/paper/mnist_tune_*.yaml); then each part's tuned entries on the test set with
  # seeds 0-2 at the full 12,000 s (its best.yaml). Every command resumes where it stopped.
  local part
  for part in sync async orthofl; do
    if [ -d "results/tune-mnist-e5-$part" ]; then
      $SIMFL tune --resume "results/tune-mnist-e5-$part" --quiet
    else
      $SIMFL tune "scenarios/paper/mnist_tune_$part.yaml" --out "results/tune-mnist-e5-$part" --quiet
    fi
    table "results/tune-mnist-e5-$part/best.yaml" "results/paper-mnist-e5-tuned-$part" --set budget.time=12000
  done
  # The tuned table: every part's best.yaml is one scenario name, so the report pools the three parts.
  $SIMFL report results/paper-mnist-e5-tuned-sync results/paper-mnist-e5-tuned-async results/paper-mnist-e5-tuned-orthofl --out results/report-tuned-e5 --force
}
fedadam_lr() {  # FedAdam's server learning rate: 4 values, MNIST, E = 5, seed 0, 6,000 s (two runs side by side)
  $SIMFL run scenarios/studies/fedadam_lr.yaml --only fedadam_lr0.003,fedadam_lr0.03 --quiet --out results/fedadam-lr-mnist-e5-a
  $SIMFL run scenarios/studies/fedadam_lr.yaml --only fedadam_lr0.01,fedadam_lr0.1 --quiet --out results/fedadam-lr-mnist-e5-b
}
main() {  # MNIST main comparison at E = 1 (7 methods before the labelled OrthoFL readings) x 3 seeds, 12,000 s
  $SIMFL run scenarios/paper/mnist.yaml "${E1[@]}" --quiet --out results/paper-mnist-e1
}
har() {  # HAR (HAPT-derived windows): 7 methods x 3 seeds, 11,000 virtual seconds
  $SIMFL run scenarios/paper/har.yaml "${E1[@]}" --quiet --out results/paper-har-e1
}
ablation() {  # MNIST ablation (paper section 4.4), seed 0, 12,000 virtual seconds
  $SIMFL run scenarios/studies/ablation.yaml "${E1[@]}" --seeds 0 --quiet --out results/ablation-mnist-e1
}
heterogeneity() {  # MNIST, Dirichlet alpha in {0.01, 0.1, 0.5, 10^4}, seed 0, half the main budget
  $SIMFL sweep scenarios/studies/heterogeneity_mnist.yaml "${E1[@]}" --set budget.time=6000 --seeds 0 \
    --out results/heterogeneity-mnist-e1-6000s
}
delays() {  # MNIST, rpi_gaussian / lognormal / halfnormal / uniform delays, seed 0, half the main budget
  $SIMFL sweep scenarios/studies/delays.yaml "${E1[@]}" --set budget.time=6000 --seeds 0 \
    --out results/delays-mnist-e1-6000s
}
newsgroups() {  # 20 Newsgroups at small scale (the scenario file's header says what and why)
  $SIMFL run scenarios/studies/newsgroups_small.yaml --quiet --out results/newsgroups-small
}
motivation() {  # paper section 2.2: fast client 10 s, slow client 100 s, then 30 / 60 s; FedAsync, E = 5 as in the paper
  if [ ! -d results/motivation-10-100s ]; then
    $SIMFL run scenarios/studies/motivation.yaml --set "latency.seconds=[10.0,100.0]" --quiet \
      --out results/motivation-10-100s
    $PYTHON -m simfl.studies.motivation results/motivation-10-100s
  fi
  # a sweep skips its finished cells: on the committed folder this runs the 60 s cell only
  $SIMFL sweep scenarios/studies/motivation.yaml --set "sweep={latency.seconds: [[10.0, 30.0], [10.0, 60.0]]}" \
    --workers 1 --out results/motivation-10-30-60s
  $PYTHON -m simfl.studies.motivation results/motivation-10-30-60s
}
examples() {  # small examples of the file formats on the quickstart scenario (seconds)
  $SIMFL run scenarios/quickstart.yaml --set budget.time=300 --quiet --out results/quickstart-300s
  $SIMFL sweep scenarios/quickstart.yaml --set budget.time=300 \
    --set "sweep={latency: [{model: exponential, mean: 10.0, floor: 5.0}, {model: uniform, low: 5.0, high: 25.0}]}" \
    --out results/quickstart-delays-300s
}
scaffold() {  # SCAFFOLD beside FedAvg and FedProx, MNIST at E = 1, seed 0, 12,000 virtual seconds
  table scenarios/studies/scaffold_mnist.yaml results/scaffold-mnist-e1
}
cross_device() {  # cross-device MNIST: 1,000 clients, concurrency 50, fleet latencies and windows, 7 entries x 3 seeds
  table scenarios/studies/cross_device.yaml results/cross-device-mnist
}
sensitivity() {  # paper section 4.6, Figure 8, MNIST at the main table's settings: OrthoFL (default reading) and
  # FedAvg at beta 0.2/0.4/0.8 (E = 5) and at E 1/10 (beta 0.6), 3 seeds; beta 0.6 at E = 5 is the main table's
  # orthofl_chain and fedavg runs (the same settings), which FedAvg's beta cells share too. One folder per
  # (setting, entry, seed), seed 0 of every setting first, two runs side by side (one per core). The runs use
  # SIMFL_NUMERICS=native, as the main table's runs did before the numerics pin, so that the reused runs pool with them.
  local jobs=()
  local seed
  for seed in 0 1 2; do
    jobs+=("epochs e1 orthofl $seed" "epochs e1 fedavg $seed")
    jobs+=("beta 0.2 orthofl $seed" "beta 0.4 orthofl $seed" "beta 0.8 orthofl $seed")
    jobs+=("epochs e10 orthofl $seed" "epochs e10 fedavg $seed")
  done
  printf '%s\n' "${jobs[@]}" | xargs -P "${SIMFL_WORKERS:-2}" -L 1 "$0" sensitivity_run
}
sensitivity_run() {  # one run of the sensitivity study: $1 beta|epochs, $2 setting, $3 entry, $4 seed
  local study=$1 value=$2 entry=$3 seed=$4
  local file=scenarios/studies/sensitivity_$study.yaml
  local set="algorithms[0].beta=$value" name="$entry-beta$value-seed$seed"
  if [ "$study" = epochs ]; then set="train.epochs=${value#e}" name="$entry-$value-seed$seed"; fi
  export SIMFL_NUMERICS=native
  table "$file" "results/sensitivity-$study-mnist/$name" --set sweep=null --set "$set" --only "$entry" --seeds "$seed" \
    --workers 1
}
stragglers() (  # a share p of the clients 10x slower, MNIST at E = 1: a tune (halving, 2 rungs) at p = 0.2 on seed 100,
  # the same tune without halving (the full search, to compare the choices), then each p with the tuned values and
  # sequential seeds (3, at most 6); run with this machine's own kernels, as committed (results/README.md)
  export SIMFL_NUMERICS=native
  [ -d results/stragglers-mnist-tune ] || $SIMFL tune scenarios/studies/stragglers_mnist.yaml --out results/stragglers-mnist-tune --quiet
  [ -d results/stragglers-mnist-tune-full ] || $SIMFL tune scenarios/studies/stragglers_mnist.yaml --set tune.halving=false \
    --out results/stragglers-mnist-tune-full --quiet
  for p in 0 20 50; do
    if [ $p = 0 ]; then s=null; else s="{share: 0.$p, slowdown: 10}"; fi
    table results/stragglers-mnist-tune/best.yaml "results/stragglers-mnist-p$p" --set 'seeds={first: 3, most: 6}' --set "stragglers=$s"
  done
)
bandwidth() (  # a shared server link of 100 KB/s and 25 KB/s against none, MNIST at E = 1, 100 clients, 20 at work
  export SIMFL_NUMERICS=native  # as committed
  [ -d results/bandwidth-mnist ] || $SIMFL sweep scenarios/studies/bandwidth_mnist.yaml --out results/bandwidth-mnist --quiet
)
async_rules() (  # every asynchronous rule on MNIST at E = 1: each tuned on equal terms (the same grid size, halving
  # over 2 rungs, seed 100), PORT in its own tune of the same terms, then the tuned values on seeds 0, 1, 2; run with
  # this machine's own kernels, as committed (results/README.md, "Every asynchronous rule")
  export SIMFL_NUMERICS=native
  [ -d results/async-rules-mnist-tune ] || $SIMFL tune scenarios/studies/async_rules_mnist.yaml --out results/async-rules-mnist-tune --quiet
  [ -d results/async-rules-mnist-port-tune ] || $SIMFL tune scenarios/studies/async_rules_mnist_port.yaml \
    --out results/async-rules-mnist-port-tune --quiet
  table results/async-rules-mnist-tune/best.yaml results/async-rules-mnist
  table results/async-rules-mnist-port-tune/best.yaml results/async-rules-mnist-port
)
report() {
  $SIMFL report results/quickstart-300s results/quickstart-delays-300s --out results/report --force
  $SIMFL report results/paper-mnist-e1 results/paper-har-e1 --out results/report-main --force
  $SIMFL report results/ablation-mnist-e1 --baseline orthofl_no_calib --out results/report-ablation --force
  $SIMFL report results/heterogeneity-mnist-e1-6000s --out results/report-heterogeneity --force
  $SIMFL report results/delays-mnist-e1-6000s --out results/report-delays --force
  $SIMFL report results/newsgroups-small --out results/report-newsgroups --force
  $SIMFL report results/paper-mnist-e5 results/paper-har-e5 --out results/report-main-e5 --force
  # The committed E = 5 folders hold one sub-folder per (entry, seed), from the launches this script made before a
  # table's runs went side by side in one command; the next two lines name three seed-0 runs of the main comparison
  # there. A fresh `main5` writes one folder of all 24 runs, from which `simfl report` cannot pick single runs yet.
  $SIMFL report results/ablation-mnist-e5 results/paper-mnist-e5/fedasync-seed0 results/paper-mnist-e5/orthofl_global-seed0 results/paper-mnist-e5/orthofl_chain-seed0 --baseline fedasync --out results/report-ablation-e5 --force
  $SIMFL report results/ca2fl-readings-mnist-e5 results/paper-mnist-e5/ca2fl-seed0 --baseline ca2fl --out results/report-ca2fl-readings --force
  $SIMFL report results/bn-stats-har-e5 results/paper-har-e5/fedavg-seed0 results/paper-har-e5/fedbuff-seed0 results/paper-har-e5/ca2fl-seed0 --baseline fedavg --out results/report-bn-stats --force
  $SIMFL report results/fedadam-lr-mnist-e5-a results/fedadam-lr-mnist-e5-b --baseline fedadam_lr0.01 --out results/report-fedadam-lr --force
  $SIMFL report results/scaffold-mnist-e1 --baseline fedavg --out results/report-scaffold --force
  $SIMFL report results/cross-device-mnist --baseline fedasync --out results/report-cross-device --force
  $SIMFL report results/stragglers-mnist-p0 results/stragglers-mnist-p20 results/stragglers-mnist-p50 --apart --out results/report-stragglers --force
  $SIMFL report results/bandwidth-mnist --out results/report-bandwidth --force
  $SIMFL report results/async-rules-mnist results/async-rules-mnist-port --baseline fedasync --out results/report-async-rules --force
  # Figure 8: the main table's beta = 0.6, E = 5 runs fill that cell (its chain entry is the default OrthoFL)
  $SIMFL report results/sensitivity-beta-mnist results/paper-mnist-e5/orthofl_chain-seed0 results/paper-mnist-e5/orthofl_chain-seed1 results/paper-mnist-e5/orthofl_chain-seed2 results/paper-mnist-e5/fedavg-seed0 results/paper-mnist-e5/fedavg-seed1 results/paper-mnist-e5/fedavg-seed2 --by beta --as orthofl_chain=orthofl --out results/report-sensitivity-beta --force
  $SIMFL report results/sensitivity-epochs-mnist results/paper-mnist-e5/orthofl_chain-seed0 results/paper-mnist-e5/orthofl_chain-seed1 results/paper-mnist-e5/orthofl_chain-seed2 results/paper-mnist-e5/fedavg-seed0 results/paper-mnist-e5/fedavg-seed1 results/paper-mnist-e5/fedavg-seed2 --by train.epochs --as orthofl_chain=orthofl --target-from 5 --out results/report-sensitivity-epochs --force
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(fedadam_lr main5 har5 ablation5 ca2fl_readings bn_stats bn_variance main har ablation heterogeneity delays newsgroups
  motivation examples scaffold cross_device report)
if [ "${steps[0]}" = sensitivity_run ]; then sensitivity_run "${steps[@]:1}"; exit; fi
for step in "${steps[@]}"; do "$step"; done
