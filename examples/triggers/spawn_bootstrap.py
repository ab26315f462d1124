"""Trigger for `spawn-bootstrap-crash`: a training script without an
`if __name__ == "__main__":` guard, with DataLoader workers started by `spawn`.

`spawn` is the default on macOS: each worker imports this file again, and since the
training runs at import time the worker tries to start workers of its own. Python stops
it ("An attempt has been made to start a new process before the current process has
finished its bootstrapping phase"), and the training process sees its workers die.
`multiprocessing_context="spawn"` makes Linux behave like a Mac here.
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:  # runs again in every worker: there is no __main__ guard
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
