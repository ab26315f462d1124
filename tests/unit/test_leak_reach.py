"""probe/leak_reach.py: the tensors one attribute or entry away from a frame's variables,
and what an autograd graph keeps (its nodes, the tensors it saved and still holds)."""

from __future__ import annotations

import torch
from torch import nn

from mpsprofiler.probe.leak_between import _graph_tail
from mpsprofiler.probe.leak_reach import MAX_ENTRIES, graph_held, reached


class _Trainer:
    def __init__(self) -> None:
        self.model = nn.Linear(4, 2)
        self.opt = torch.optim.Adam(self.model.parameters())
        self.stats = {"loss": 0.0, 3: 0.0}
        self.total = 0.0
        self.plain = torch.ones(3)


def _loss(model: nn.Module) -> torch.Tensor:
    return model(torch.randn(8, 4)).pow(2).mean()


def test_attributes_and_entries_with_graphs_are_named_as_expressions() -> None:
    t = _Trainer()
    t.total = t.total + _loss(t.model)
    t.stats["loss"] = _loss(t.model)
    t.stats[3] = _loss(t.model)
    t.opt.zero_grad()
    _loss(t.model).backward()
    t.opt.step()  # Adam state: tensors without graphs, keyed by parameters
    names = {expr: owner for expr, _, owner in reached("self", t, set())}
    assert names == {"self.total": t, "self.stats['loss']": t, "self.stats[3]": t}


def test_a_local_dict_or_list_entry_is_named_by_its_key() -> None:
    m = nn.Linear(4, 2)
    stats = {"loss": _loss(m), "n": 3}
    assert [(e, o) for e, _, o in reached("stats", stats, set())] == [("stats['loss']", None)]
    running = [_loss(m), 0.0]
    assert [e for e, _, _ in reached("running", running, set())] == ["running[0]"]


def test_parameters_modules_detached_state_and_plain_values_are_not_reached() -> None:
    m = nn.Linear(4, 2)
    state = {"sum": _loss(m).detach()}
    for name, value in [("model", m), ("state", state), ("x", 3), ("torch", torch), ("cls", _Trainer)]:
        assert list(reached(name, value, set())) == [], name


def test_reading_is_bounded_and_runs_no_getattr() -> None:
    class Proxy:
        def __getattr__(self, name: str) -> object:
            raise AssertionError("a user __getattr__ ran")

    assert list(reached("p", Proxy(), set())) == []
    m = nn.Linear(4, 2)
    big = {f"k{i}": 0.0 for i in range(MAX_ENTRIES)}
    big["late"] = _loss(m)  # past the cap: not read
    assert list(reached("big", big, set())) == []


def test_reading_runs_no_getattribute_of_the_objects_it_looks_at() -> None:
    """``isinstance`` reads ``__class__`` of an instance of another type, which runs its
    ``__getattribute__`` (a transformers config's attribute map, a lazy proxy that loads or
    raises): the reach tells kinds by type and reads ``__dict__`` directly, so none runs;
    a kept graph behind such an object is still found, and so is one in a list of them."""
    ran: list[str] = []

    class Lazy:
        def __init__(self, held: object) -> None:
            self.held = held

        def __getattribute__(self, name: str) -> object:
            ran.append(name)
            raise RuntimeError("not loaded yet")

    m = nn.Linear(4, 2)
    loss = _loss(m)
    found = [e for e, _, _ in reached("box", Lazy(loss), set())]
    assert found == ["box.held"] and ran == []
    assert [e for e, _, _ in reached("boxes", [Lazy(loss), loss], set())] == ["boxes[1]"] and ran == []
    assert _graph_tail([Lazy(loss)]) is None and ran == []  # leak_between's look at a list's last item


def test_an_object_seen_once_is_read_once() -> None:
    t = _Trainer()
    t.total = _loss(t.model)
    seen: set[int] = set()
    assert len(list(reached("self", t, seen))) == 1
    assert list(reached("trainer", t, seen)) == []


def test_graph_held_counts_saved_tensors_until_backward_frees_them() -> None:
    m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
    loss = m(torch.randn(32, 64)).pow(2).mean()
    nodes, saved, capped = graph_held([loss.grad_fn], 5_000)
    assert nodes >= 5 and not capped
    # the input batch (32x64) and the ReLU's output (32x128) at least; no parameter
    assert saved >= (32 * 64 + 32 * 128) * 4
    assert saved < (32 * 64 + 32 * 128) * 4 + sum(p.numel() * 4 for p in m.parameters())
    loss.backward()
    after = graph_held([loss.grad_fn], 5_000)
    assert after[0] == nodes and after[1] == 0  # the nodes stay, what they saved is freed


def test_graph_held_stops_at_its_cap() -> None:
    x = torch.zeros((), requires_grad=True)
    total = x * 1
    for _ in range(50):
        total = total + x * 2
    nodes, _, capped = graph_held([total.grad_fn], 20)
    assert capped and nodes <= 20


def test_the_owner_of_a_kept_list_is_found_without_running_its_getattribute() -> None:
    """``leak_owner`` names the object whose attribute holds a leaking list (``self.outs``):
    it reads the referrers' ``__dict__`` as ``leak_reach`` does, so an owner whose class's
    ``__getattribute__`` raises (a lazy proxy) is still found, and its code never runs."""
    from mpsprofiler.probe.leak_owner import _owners

    ran: list[str] = []

    class Owner:
        def __init__(self) -> None:
            self.outs: list[torch.Tensor] = []

        def __getattribute__(self, name: str) -> object:
            ran.append(name)
            raise RuntimeError("not loaded yet")

    owner = Owner()
    outs = object.__getattribute__(owner, "__dict__")["outs"]
    assert [(o, a) for o, a in _owners(outs) if o is owner] == [(owner, "outs")] and ran == []
