"""An accelerate loop by MODE: a class-based loop with a scheduler, an eval pass after training.
MODE: clean | slowload | leak | accum | eval | compile (default clean); STEPS. Prints the framework's own step count last.
"""
import os
import time

import torch
from accelerate import Accelerator

MODE = os.environ.get("MODE", "clean")
STEPS = int(os.environ.get("STEPS", "40"))


class Slow(torch.utils.data.Dataset):
    def __init__(self, n, slow):
        g = torch.Generator().manual_seed(3)
        self.x = torch.randn(n, 48, generator=g)
        self.y = torch.randn(n, 1, generator=g)
        self.slow = slow

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.slow:
            time.sleep(0.003)
        return self.x[i], self.y[i]


class Loop:
    def __init__(self):
        accum = 4 if MODE == "accum" else 1
        self.acc = Accelerator(cpu=True, gradient_accumulation_steps=accum)
        model = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.Tanh(), torch.nn.Linear(96, 1))
        if MODE == "compile":
            model = torch.compile(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        train = torch.utils.data.DataLoader(Slow(32 * STEPS * accum, MODE == "slowload"), batch_size=32, shuffle=True)
        val = torch.utils.data.DataLoader(Slow(32 * 8, False), batch_size=32)
        self.model, self.opt, self.sched, self.train, self.val = self.acc.prepare(model, opt, sched, train, val)
        self.outs = []
        self.updates = 0

    def fit(self):
        self.model.train()
        for x, y in self.train:
            with self.acc.accumulate(self.model):
                pred = self.model(x)
                if MODE == "leak":
                    self.outs.append(pred)
                loss = torch.nn.functional.mse_loss(pred, y)
                self.acc.backward(loss)
                self.opt.step()
                self.sched.step()
                self.opt.zero_grad()
                self.updates += int(self.acc.sync_gradients)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        total = 0.0
        for x, y in self.val:
            total += torch.nn.functional.mse_loss(self.model(x), y).item()
        return total


def main():
    torch.manual_seed(0)
    loop = Loop()
    loop.fit()
    if MODE in ("eval", "accum"):
        print("val", loop.evaluate())
    print(f"optimizer_steps {loop.updates}", flush=True)


if __name__ == "__main__":
    main()
