# ruff: noqa: UP008, UP032  (the example's own style, kept)
"""pytorch/examples mnist/main.py, faithfully small: same Net, train/test, argparse and
``**train_kwargs`` DataLoader, with synthetic 28x28 digits instead of the download.

Each sample is decoded on the fly (a PIL-like uint8 image through ToTensor and Normalize,
plus the read time of a slow disk), and no ``num_workers`` is passed on the CPU (the
example adds workers only on an accelerator), so the training waits for its data.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import Dataset


class SyntheticMNIST(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        self.targets = rng.integers(0, 10, size=n)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        time.sleep(0.004)  # reading and decoding one PNG
        img = torch.from_numpy(self.images[index]).float().div(255.0).unsqueeze(0)  # ToTensor
        img = (img - 0.1307) / 0.3081  # Normalize((0.1307,), (0.3081,))
        return img, int(self.targets[index])


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(2304, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{}]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset), loss.item()))


def test(model, device, test_loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            correct += model(data).argmax(dim=1).eq(target).sum().item()
    print('Test set: Accuracy: {}/{}'.format(correct, len(test_loader.dataset)))


def main():
    parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument('--test-batch-size', type=int, default=64)
    parser.add_argument('--epochs', type=int, default=1)
    parser.add_argument('--samples', type=int, default=640)
    parser.add_argument('--lr', type=float, default=1.0)
    parser.add_argument('--log-interval', type=int, default=5)
    args = parser.parse_args()
    use_accel = torch.accelerator.is_available() if hasattr(torch, "accelerator") else False
    torch.manual_seed(1)
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

    train_kwargs = {'batch_size': args.batch_size}
    test_kwargs = {'batch_size': args.test_batch_size}
    if use_accel:
        accel_kwargs = {'num_workers': 1, 'persistent_workers': True, 'pin_memory': True, 'shuffle': True}
        train_kwargs.update(accel_kwargs)
        test_kwargs.update(accel_kwargs)

    dataset1 = SyntheticMNIST(args.samples, seed=0)
    dataset2 = SyntheticMNIST(128, seed=1)
    train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()


if __name__ == '__main__':
    main()
