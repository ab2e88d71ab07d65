"""Gates on an unchanged commit with a real approximate index rebuilt in every process:
how many block, with one build a side (the single-build test) and with `builds: K`.

    python scripts/bench_builds_lancedb.py [--gates 40] [--builds 3]

The retriever is LanceDB's IVF-PQ over the demo corpus (tests/data/ivf_index.py:
hashed bags of words, the k-means trained at random at every build). The criteria are
the demo's without their floors, so that only the regression check can block. For
each setting: the baseline refreshed once, then `--gates` gates, each printing its
recall@5 (tier A) and whether it blocked (exit 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def project(root: Path) -> Path:
    """The demo with the IVF-PQ retriever and floorless criteria."""
    for folder in ("config", "gold"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "tests" / "data" / "ivf_index.py", root / "ivf_index.py")
    config = (root / "config" / "llm-eval.yaml").read_text(encoding="utf-8")
    start, end = config.index("retriever:"), config.index("metrics:")
    retriever = "retriever:\n  kind: python\n  target: ivf_index:Index\n  python_path: ['.']\n"
    (root / "config" / "ivf.yaml").write_text(config[:start] + retriever + config[end:])
    criteria = (root / "config" / "ship-criteria.yaml").read_text(encoding="utf-8")
    lines = [line for line in criteria.splitlines() if not line.strip().startswith("threshold:")]
    (root / "config" / "no-floors.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def llm_eval(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("llm-eval")), *args]
    common = ["--config", "config/ivf.yaml", "--criteria", "config/no-floors.yaml"]
    return subprocess.run(command + common, cwd=root, capture_output=True, text=True, check=False)


def run(root: Path, builds: int, gates: int) -> None:
    refreshed = llm_eval(root, "baseline", "refresh", "--force", "--builds", str(builds))
    if refreshed.returncode != 0:
        raise SystemExit(refreshed.stdout + refreshed.stderr)
    print(f"builds {builds}: baseline refreshed", flush=True)
    blocked = 0
    for number in range(1, gates + 1):
        gate = llm_eval(root, "gate", "--builds", str(builds))
        if gate.returncode not in (0, 1):
            raise SystemExit(gate.stdout + gate.stderr)
        report = json.loads((root / ".llm-eval" / "report.json").read_text(encoding="utf-8"))
        recall = next(g for g in report["gates"] if g["name"] == "retrieval_recall_at_5")
        blocked += gate.returncode == 1
        print(
            f"  gate {number:>2}: recall@5 (tier A) {recall['value'] * 100:5.1f}% "
            f"(baseline {recall['baseline'] * 100:5.1f}%), {recall['status']}, exit "
            f"{gate.returncode}",
            flush=True,
        )
    print(f"builds {builds}: {blocked} of {gates} gates blocked the merge", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=40)
    parser.add_argument("--builds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = project(Path(folder))
        for builds in (1, args.builds):
            run(root, builds, args.gates)


if __name__ == "__main__":
    main()
