"""Crashes inside the first training step (the model's forward raises), like a
LightningModule under torch.compile failing in ``self.log``."""

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, x):
        out = self.fc(x)
        if out.shape[1] != 3:
            raise RuntimeError(f"shape mismatch in the first step: expected [4, 3], got {list(out.shape)}")
        return out


def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    for x, y in torch.utils.data.DataLoader(data, batch_size=4):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
