"""A library's helper that builds the DataLoader for the caller (like a dataset package's
``get_loader``): the construction line is in this file, not in the training script."""
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):
    def __len__(self):
        return 200

    def __getitem__(self, i):
        time.sleep(0.005)  # a read from a slow disk
        return torch.full((8,), float(i % 7)), torch.tensor([float(i % 3)])


def get_loader(batch_size=4):
    return DataLoader(SlowReads(), batch_size=batch_size)
