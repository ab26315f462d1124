"""A plain accelerate loop: Accelerator.prepare(model, optimizer, loader), accelerator.backward.

Env: STEPS (batches, default 50), ACCUM (gradient_accumulation_steps, default 1),
LEAK=1: every batch is kept in a list (a real leak of the loader's tensors).
Prints ``optimizer_steps N`` (the steps that really updated: ``accelerator.sync_gradients``).
"""

import os

import torch
from accelerate import Accelerator

STEPS = int(os.environ.get("STEPS", "50"))
ACCUM = int(os.environ.get("ACCUM", "1"))


def main():
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.utils.data.TensorDataset(torch.randn(16 * STEPS, 32), torch.randint(0, 2, (16 * STEPS,)))
    loader = torch.utils.data.DataLoader(data, batch_size=16, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    updates = 0
    kept = []
    for x, y in loader:
        if os.environ.get("LEAK") == "1":
            kept.append(x)
        with accelerator.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            updates += int(accelerator.sync_gradients)
    print(f"optimizer_steps {updates} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
