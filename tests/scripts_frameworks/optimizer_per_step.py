"""An optimizer created inside the loop at every step (a freshly built SGD each batch).

The old optimizer is freed at once, so CPython reuses its id for the next one.
Env: STEPS (default 60).
"""

import os

import torch

STEPS = int(os.environ.get("STEPS", "60"))


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    data = torch.utils.data.TensorDataset(torch.randn(8 * STEPS, 16), torch.randn(8 * STEPS, 1))
    for x, y in torch.utils.data.DataLoader(data, batch_size=8):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    print("done", flush=True)


if __name__ == "__main__":
    main()
