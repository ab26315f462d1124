"""The DataLoader fix for a setting taken from a command-line option goes to the option's
default (patch/cst/options.py), and only where that changes nothing else."""

from __future__ import annotations

from mpsprofiler.patch.cst import option_defaults

SCRIPT = """import argparse
p = argparse.ArgumentParser()
p.add_argument("-w", "--val-workers", type=int, default=0)
p.add_argument("--bs", type=int)
args = p.parse_args()
dl = DataLoader(ds, batch_size=args.bs, num_workers=args.val_workers)
print(f"{args.val_workers} workers")
"""


def test_the_options_default_takes_the_number_and_the_call_keeps_the_option() -> None:
    text, rest, moved = option_defaults(SCRIPT, 6, ("DataLoader",), {"num_workers": "4", "pin_memory": "True"},
                                        ["train.py"])
    assert 'p.add_argument("-w", "--val-workers", type=int, default=4)' in text
    assert "num_workers=args.val_workers)" in text and rest == {"pin_memory": "True"}
    assert moved == {"num_workers": ("--val-workers", "args.val_workers")}


def test_an_option_the_run_set_or_another_call_takes_keeps_the_number_at_the_call() -> None:
    for argv in (["--val-workers", "0"], ["--val-workers=2"], ["-w", "1"]):
        assert option_defaults(SCRIPT, 6, ("DataLoader",), {"num_workers": "4"}, argv)[2] == {}, argv
    shared = SCRIPT + "test_dl = DataLoader(ds, num_workers=args.val_workers)\n"
    text, rest, moved = option_defaults(shared, 6, ("DataLoader",), {"num_workers": "4"}, [])
    assert text == shared and rest == {"num_workers": "4"} and moved == {}
