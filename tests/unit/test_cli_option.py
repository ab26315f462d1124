"""The command-line option a DataLoader's ``num_workers`` comes from (diagnosis side,
``analyzers/cli_option.py``), with the other calls that read it and the run's own value read
as argparse reads it; the module's hyperparameters (``self.hparams.num_workers``) too. Its
default takes the fix's number only where that changes this call alone (``movable``): the
finding's code and ``mpsprof patch`` both follow that one decision."""

from __future__ import annotations

from pathlib import Path

from mpsprofiler.diagnosis.analyzers.cli_option import call_option

SCRIPT = '''import argparse
from torch.utils.data import DataLoader
p = argparse.ArgumentParser()
p.add_argument("-w", "--num-workers", type=int, default=0)
p.add_argument("--val-workers", dest="vw", type=int, default=0)
args = p.parse_args()
train = DataLoader(range(8), num_workers=args.num_workers)
val = DataLoader(range(8), num_workers=args.vw)
'''


def _option(tmp_path: Path, source: str, line: int, argv: list[str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "train.py"
    path.write_text(source)
    return call_option(str(path), line, ("DataLoader",), "num_workers", argv or [])


def test_an_option_is_found_with_its_flag_its_line_and_what_the_run_gave_it(tmp_path: Path) -> None:
    found = _option(tmp_path, SCRIPT, 7)
    assert found is not None and (found.flag, found.expr, found.line, found.ran_with) == (
        "--num-workers", "args.num_workers", 4, None)
    assert _option(tmp_path, SCRIPT, 7, ["-w", "3"]).ran_with == "3"  # type: ignore[union-attr]
    assert _option(tmp_path, SCRIPT, 7, ["--num-workers=2", "--num-workers", "5"]).ran_with == "5"  # type: ignore[union-attr]
    dest = _option(tmp_path, SCRIPT, 8)
    assert dest is not None and (dest.flag, dest.expr) == ("--val-workers", "args.vw")


def test_an_option_another_call_reads_is_kept_and_not_movable(tmp_path: Path) -> None:
    shared = SCRIPT + "test = DataLoader(range(8), num_workers=args.vw)\n"
    found = _option(tmp_path, shared, 8)
    assert found is not None and found.others == (9,) and not found.movable  # its default would change the test loader
    assert _option(tmp_path, SCRIPT, 8).movable  # type: ignore[union-attr]
    assert not _option(tmp_path, SCRIPT, 7, ["-w", "3"]).movable  # type: ignore[union-attr]  # the run set it


def test_no_option_where_the_value_is_not_an_option(tmp_path: Path) -> None:
    assert _option(tmp_path, SCRIPT.replace("args.num_workers", "4"), 7) is None
    undefined = SCRIPT.replace('dest="vw", ', "")
    assert _option(tmp_path, undefined, 8) is None  # no add_argument stores into `vw`


HPARAMS = '''from torch.utils.data import DataLoader
class Module:
    def __init__(self, lr=0.1,
                 num_workers=0):
        self.save_hyperparameters()
    def train_dataloader(self):
        return DataLoader(range(8), num_workers=self.hparams.num_workers)
    def val_dataloader(self):
        return DataLoader(range(8), num_workers=self.hparams["val_workers"])
'''


def test_the_modules_hyperparameters_are_kept_with_their_init_default(tmp_path: Path) -> None:
    found = _option(tmp_path, HPARAMS, 7)
    assert found is not None and found.hparams and not found.movable
    assert (found.flag, found.expr, found.line) == ("num_workers", "self.hparams.num_workers", 4)
    keyed = _option(tmp_path, HPARAMS, 9)
    assert keyed is not None and (keyed.flag, keyed.expr, keyed.line) == ("val_workers", "self.hparams['val_workers']", 0)
