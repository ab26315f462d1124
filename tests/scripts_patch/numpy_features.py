"""Features from NumPy (float64 by default) go into the model each step: every op on them
is float64, which MPS refuses and CUDA runs slowly."""
import numpy as np
import torch


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = torch.nn.Linear(16, 1).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(60):
        features = rng.normal(size=(64, 16))
        x = torch.from_numpy(features)
        y = x.sum(dim=1, keepdim=True)
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
