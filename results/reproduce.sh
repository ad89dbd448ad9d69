#!/usr/bin/env bash
# Rebuilds the paper runs committed under results/ (see results/README.md), one after another.
# Scale: local epochs E = 1 instead of the paper's 5 (one fifth of the training per update; the motivating
# study keeps E = 5); every method
# runs for the same virtual time (the scenario's budget, or the one set below). Everything else is the
# scenario file's setting. About nine hours of one core (each run trains with one thread, so two
# steps can run side by side on two cores).
# Usage: results/reproduce.sh [main|har|ablation|heterogeneity|delays|newsgroups|motivation|examples|report]...
# (default: all). The report step's `simfl report` lines are also what tests/studies/test_report.py rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
SIMFL=${SIMFL:-simfl}
PYTHON=${PYTHON:-python}
E1=(--set train.epochs=1)

main() {  # MNIST main comparison: 7 methods x 3 seeds, 12,000 virtual seconds
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
report() {
  $SIMFL report results/quickstart-300s results/quickstart-delays-300s --out results/report --force
  $SIMFL report results/paper-mnist-e1 results/paper-har-e1 --out results/report-main --force
  $SIMFL report results/ablation-mnist-e1 --baseline orthofl_no_calib --out results/report-ablation --force
  $SIMFL report results/heterogeneity-mnist-e1-6000s --out results/report-heterogeneity --force
  $SIMFL report results/delays-mnist-e1-6000s --out results/report-delays --force
  $SIMFL report results/newsgroups-small --out results/report-newsgroups --force
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(main har ablation heterogeneity delays newsgroups motivation examples report)
for step in "${steps[@]}"; do "$step"; done
