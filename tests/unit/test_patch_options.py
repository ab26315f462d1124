"""A command-line option's default set to the fix's number (patch/cst/options.py): the edit
only; whether it may be made is the diagnosis' decision (tests/unit/test_cli_option.py)."""

from __future__ import annotations

from mpsprofiler.patch.cst import set_option_default

SCRIPT = """import argparse
p = argparse.ArgumentParser()
p.add_argument("-w", "--val-workers", type=int, default=0)
p.add_argument("--bs", type=int)
args = p.parse_args()
dl = DataLoader(ds, batch_size=args.bs, num_workers=args.val_workers)
print(f"{args.val_workers} workers")
"""


def test_the_options_default_takes_the_number() -> None:
    text = set_option_default(SCRIPT, "val_workers", "4")
    assert 'p.add_argument("-w", "--val-workers", type=int, default=4)' in text
    assert text.replace("default=4", "default=0") == SCRIPT
    assert 'p.add_argument("--bs", type=int, default=8)' in set_option_default(SCRIPT, "bs", "8")


def test_no_edit_where_no_single_add_argument_stores_it() -> None:
    assert set_option_default(SCRIPT, "workers", "4") == SCRIPT
    twice = SCRIPT + 'p.add_argument("--val-workers", type=int)\n'
    assert set_option_default(twice, "val_workers", "4") == twice
