"""A script with no `if __name__ == "__main__":` guard that starts processes by spawn."""
import multiprocessing

import torch
from torch.utils.data import DataLoader, TensorDataset

multiprocessing.set_start_method("spawn", force=True)
torch.set_num_threads(2)
data = TensorDataset(torch.arange(32.0).unsqueeze(1), torch.zeros(32, 1))
loader = DataLoader(data, batch_size=4)
model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
for x, y in loader:
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("batches done, threads", torch.get_num_threads())
