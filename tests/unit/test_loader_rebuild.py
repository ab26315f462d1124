"""A DataLoader a framework rebuilds from the script's (Lightning's ``_update_dataloader``
under DDP, adding a DistributedSampler; accelerate's ``prepare_data_loader``) is named at the
script's own ``DataLoader(...)`` line, where the fix and ``patch`` go. Under Lightning DDP it
was named at ``trainer.fit(...)``, and ``patch`` found no DataLoader there."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from mpsprofiler.probe import loader_sites

FRAMEWORK = '''from torch.utils.data import DataLoader


def {name}(dataloader, sampler=None):
    return DataLoader(dataloader.dataset, batch_size=dataloader.batch_size, sampler=sampler)
'''


@pytest.mark.parametrize("name", sorted(loader_sites.REBUILDERS))
def test_a_rebuilt_loader_keeps_the_scripts_line(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "framework"
    package.mkdir()
    (package / f"fw_{name.strip('_')}.py").write_text(FRAMEWORK.format(name=name))
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setattr(loader_sites, "_framework_dirs", lambda: (str(package) + os.sep,))
    sites = loader_sites.LoaderSites(lambda **fields: None)
    uninstall = loader_sites.install_construction_hook(sites, lambda exc: None)
    try:
        module = __import__(f"fw_{name.strip('_')}")
        line = sys._getframe().f_lineno + 1
        original = DataLoader(range(8), batch_size=2)
        rebuilt = getattr(module, name)(original)
    finally:
        uninstall()
        sys.modules.pop(f"fw_{name.strip('_')}", None)
    assert sites.site_fields(original)["line"] == line
    fields = sites.site_fields(rebuilt)
    assert (fields["file"], fields["line"]) == (os.path.abspath(__file__), line), fields
    assert fields["created"] == 2
