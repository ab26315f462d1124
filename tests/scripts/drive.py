"""Run a script through the real launcher with probe options the CLI does not offer
(``{"fault": [...]}`` for fault injection). argv: RUN_DIR OPTIONS_JSON SCRIPT ARGS..."""
import json
import sys
from pathlib import Path

from mpsprofiler.launcher.child import RunSpec
from mpsprofiler.launcher.headless import run_headless
from mpsprofiler.launcher.options import ProbeOptions
from mpsprofiler.report.console import print_summary
from mpsprofiler.rundir import prepare_run_dir

run_dir, error = prepare_run_dir(Path(sys.argv[1]))
assert error is None, error
spec = RunSpec(target=sys.argv[3], args=sys.argv[4:], run_dir=run_dir, options=ProbeOptions.from_wire(json.loads(sys.argv[2])))
code, _, finished = run_headless(spec, [])
print_summary(finished.results, str(finished.summary_dir) if finished.summary_dir else None)
sys.exit(code if code >= 0 else 128 - code)
