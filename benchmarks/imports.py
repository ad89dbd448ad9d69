"""What the light commands cost to start: CPU seconds of `simfl --help`, `validate`, `reference` and `report`.

Each command runs in a fresh process (``python -m simfl ...``, from the repository root) so that
every import it makes is counted; user plus system CPU time of the child, median of ``--repeat``
runs. `report` reads the committed results/quickstart-300s and writes to a temporary folder.
Prints ``name=value`` lines (seconds).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_cpu(argv: list[str]) -> float:
    """CPU seconds (user + system) of one ``python -m simfl ARGV`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "simfl", *argv], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(tmp: Path) -> dict[str, list[str]]:
    """The measured commands by name."""
    return {
        "help": ["--help"],
        "validate_quickstart": ["validate", "scenarios/quickstart.yaml"],
        "reference": ["reference"],
        "report_quickstart": ["report", "results/quickstart-300s", "--out", str(tmp / "report"), "--force"],
    }


def main(argv: list[str] | None = None) -> None:
    """Print ``<command>_cpu_s=<median seconds>`` for each command."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per command (median)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in commands(Path(tmp)).items():
            times = [child_cpu(cmd) for _ in range(args.repeat)]
            print(f"{name}_cpu_s={statistics.median(times):.2f}", flush=True)


if __name__ == "__main__":
    main()
