"""Crashes inside the first training step (the model's forward raises), like a
LightningModule under torch.compile failing in ``self.log``. SETUP_S seconds of setup
first (default 3.2: a framework's imports), so the run is long enough for "no steps".

The message is a Dynamo-style one: a first line, then a "from user code:" traceback."""

import os
import time

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, x):
        out = self.fc(x)
        if out.shape[1] != 3:
            raise RuntimeError(
                f"shape mismatch in the first step: expected [4, 3], got {list(out.shape)}\n\n"
                f"from user code:\n   File \"{__file__}\", line 19, in forward\n"
                f"    out = self.fc(x)\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
            )
        return out


def main():
    time.sleep(float(os.environ.get("SETUP_S", "3.2")))
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    for x, y in torch.utils.data.DataLoader(data, batch_size=4):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
