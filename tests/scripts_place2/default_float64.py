"""A fit in float64 made by torch's default dtype, set once by a helper at the start; the
tensors come from factories (torch.linspace, nn.Linear's weights), no line names float64."""
import sys

import torch


def setup(precision: str) -> None:
    if precision == "double":
        torch.set_default_dtype(torch.float64)


setup(sys.argv[1] if len(sys.argv) > 1 else "double")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.linspace(-1, 1, 128).unsqueeze(1)
y = torch.sin(3 * x)
for step in range(30):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", round(loss.item(), 6), str(x.dtype))
