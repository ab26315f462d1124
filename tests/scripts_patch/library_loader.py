"""Training whose DataLoader a library builds (``slowdata.get_loader``, on PYTHONPATH, not
in this script's directory): the stall's fix cannot be written into this script."""
import torch
from slowdata import get_loader


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(get_loader()):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
