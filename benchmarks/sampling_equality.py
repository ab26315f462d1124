"""Old against new on real step-hook scripts: what backward sampling changes and what it must not.

Runs each script (run long enough to pass ``backward_sampling.WARM_STEPS``: hard-coded
loop lengths are raised in a copy) under ``mpsprof run --headless`` with a baseline package
(``--baseline``, e.g. a copy of b831b28's mpsprofiler) and with this checkout, and compares:

* must be equal: the exit status and stdout, the step count, mode, optimizer cycle and
  step indices, the batches, the ``probe_error`` events, the non-finite loss event's
  value and the findings' rules (a non-finite loss step may move to a later sampled step
  by design: both are printed);
* changed by design (printed): the steps whose backward time was measured, and the
  ``loss_checks`` summary (losses read, sampled from which step).

    OMP_NUM_THREADS=1 python benchmarks/sampling_equality.py --baseline /tmp/base/mpsprofiler
    OMP_NUM_THREADS=1 <frameworks venv>/bin/python benchmarks/sampling_equality.py --baseline ... \
        --only lightning_modes hf_trainer
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
T = REPO / "tests"
CASES: list[tuple[str, Path | str, dict[str, str], dict[str, str]]] = [
    # (name, script [argv...], env, {hard-coded text: its longer stand-in})
    ("train_small", T / "scripts/train_small.py", {}, {"range(2)": "range(12)"}),
    ("gan_two_optimizers", T / "scripts_core/gan_two_optimizers.py", {}, {"range(25)": "range(160)"}),
    ("manual_steps", T / "scripts_core/manual_steps.py", {}, {"range(12)": "range(160)"}),
    ("accumulate", T / "scripts_loops/accumulate.py", {"UPDATES": "150"}, {}),
    ("lbfgs_double", T / "scripts_loops/lbfgs_double.py", {"STEPS": "90"}, {}),
    ("gan_manual", T / "scripts_loops/gan_manual.py", {"ITERS": "150"}, {}),
    ("two_losses", T / "scripts_autograd/two_losses.py", {}, {"range(10)": "range(160)"}),
    ("amp_grad_scaler", T / "scripts_mac/amp_grad_scaler.py", {}, {"range(40)": "range(160)"}),
    ("compiled_optimizer", T / "scripts_compile/compiled_optimizer.py eager", {}, {"range(7)": "range(120)"}),
    ("compiled_function", T / "scripts_compile/compiled_function.py aot_eager", {}, {"range(7)": "range(120)"}),
    ("compiled_model", T / "scripts_compile/compiled_model.py aot_eager --fullgraph", {}, {"range(7)": "range(120)"}),
    # DDP through mpsprof's own launcher (mpsprof does not enter mp.spawn's ranks): both ranks' steps
    ("ddp_straggler", T / "scripts_dist/ddp_straggler.py", {"STEPS": "150", "MPSPROF_RUN_OPTIONS": "--nproc-per-node 2"},
     {}),
    ("nan_loss", T / "scripts_health/nan_loss.py", {"STEPS": "300", "NAN_AT": "200"}, {}),
    # in a Python with the frameworks (lightning, transformers, accelerate):
    ("lightning_modes", T / "scripts_frameworks/lightning_modes.py", {"STEPS": "150"}, {}),
    ("hf_trainer", T / "scripts_frameworks/hf_trainer.py", {"STEPS": "120", "ACCUM": "2"}, {}),
    ("regression", T / "scripts_loops/regression.py", {"MAX_BATCHES": "200"}, {}),
]


def run(package_root: Path, script: Path, argv: list[str], env: dict[str, str], out: Path) -> dict[str, Any]:
    environ = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(package_root), **env}
    environ.pop("MPSPROF_OPTIONS", None)
    options = environ.pop("MPSPROF_RUN_OPTIONS", "").split()
    proc = subprocess.run([sys.executable, "-P", "-m", "mpsprofiler", "run", "--headless", "--output", str(out),
                           *options, str(script), *argv], capture_output=True, env=environ, cwd=out.parent, timeout=600)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.strip()]
    # ranks print in any order: their lines are compared as a set; a Trainer's printed run
    # times are the machine's (train_runtime, ..._per_second)
    stdout = sorted(RUN_TIMES.sub(rb"\1 <t>", line) for line in proc.stdout.splitlines())
    return {"rc": proc.returncode, "stdout": stdout, "events": events,
            "summary": json.loads((out / "summary.json").read_text())}


def figures(r: dict[str, Any]) -> dict[str, Any]:
    steps = sorted((e for e in r["events"] if e["k"] == "steps"), key=lambda e: e.get("r", 0))
    idx: list[int] = []
    batches = 0
    timed = 0
    agg_n = 0
    for e in steps:
        idx += e.get("i", [])
        batches += sum(e.get("batches", []))
        timed += sum(1 for b in e.get("bwd", []) if b is not None)
        agg = e.get("agg")
        if agg:
            agg_n += agg["n"]
            batches += agg.get("batches", 0)
            timed += agg.get("phase_n", 0)
    health = [{k: v for k, v in e.items() if k not in ("ts",)} for e in r["events"] if e["k"] == "health"]
    loss = next((h for h in health if h.get("what") == "loss"), None)
    checks = next((h for h in health if h.get("what") == "loss_checks"), None)
    return {
        "rc": r["rc"], "stdout": r["stdout"],
        "steps": len(idx) + agg_n, "indices": idx, "batches": batches,
        "mode": [e.get("mode") for e in steps][-1:], "optimizers": [e.get("optimizers") for e in steps][-1:],
        "errors": sorted((e.get("instrument"), e.get("message", "")[:80]) for e in r["events"] if e["k"] == "probe_error"),
        "nan_value": loss and loss.get("value"),
        "rules": sorted(f["rule"] for f in r["summary"]["findings"]),
        "ranks": sorted({e.get("r") for e in steps if e.get("r") is not None}),
        # changed by design:
        "timed": timed, "nan_step": loss and (loss.get("last_finite_step"), loss.get("step"), loss.get("checked")),
        "checks": checks and {k: checks.get(k) for k in ("n", "checked", "sampled_from")},
    }


BY_DESIGN = ("timed", "nan_step", "checks")
RUN_TIMES = re.compile(rb"('?(?:train_runtime|train_samples_per_second|train_steps_per_second)'?:? *)'?[\d.e+-]+'?")
TIMING_RULES = re.compile(r"other-programs-busy|long-first-step|long-warmup|dataloader-|host-bound|cpu-contention|"
                          r"sync-heavy|straggler")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", required=True, help="the baseline's mpsprofiler package folder")
    p.add_argument("--only", nargs="*", help="case names")
    args = p.parse_args()
    base_root = Path(args.baseline).resolve().parent
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, command, env, edits in CASES:
            if args.only and name not in args.only:
                continue
            script, *argv = str(command).split(" ")
            script = Path(script)
            target = script
            if edits:
                text = script.read_text()
                for old, new in edits.items():
                    assert old in text, (name, old)
                    text = text.replace(old, new)
                target = Path(tmp) / name / script.name
                target.parent.mkdir(parents=True)
                target.write_text(text)
                for sibling in script.parent.glob("*.py"):  # helpers a script imports
                    if sibling.name != script.name and not (target.parent / sibling.name).exists():
                        (target.parent / sibling.name).write_text(sibling.read_text())
            old = figures(run(base_root, target, argv, env, Path(tmp) / f"{name}-old"))
            new = figures(run(REPO, target, argv, env, Path(tmp) / f"{name}-new"))
            diff = [k for k in old if k not in BY_DESIGN and old[k] != new[k]]
            rules_timing = diff == ["rules"] and all(TIMING_RULES.search(r) for r in set(old["rules"]) ^ set(new["rules"]))
            verdict = "same" if not diff else ("same but timing rules" if rules_timing else f"DIFFERENT: {diff}")
            same &= not diff or rules_timing
            print(f"{name}: {verdict}; steps {new['steps']} ({new['mode']}), timed {old['timed']} -> {new['timed']}, "
                  f"checks {old['checks']} -> {new['checks']}, nan {old['nan_step']} -> {new['nan_step']}")
            for k in diff:
                if k == "stdout":
                    print(f"    stdout, old only: {sorted(set(old[k]) - set(new[k]))[:5]}; "
                          f"new only: {sorted(set(new[k]) - set(old[k]))[:5]}")
                else:
                    print(f"    {k}: {str(old[k])[:200]} | {str(new[k])[:200]}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
