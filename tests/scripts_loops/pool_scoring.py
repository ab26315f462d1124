"""A spawn Pool of 2 helpers scores the checkpoints that the main process trains and saves
(``torch.load`` in each helper); all training is the main process's own optimizer steps."""
import multiprocessing as mp
import os
import tempfile

import torch


def score(path):
    state = torch.load(path)
    return os.path.basename(path), round(float(sum(v.abs().sum() for v in state.values())), 4)


def main():
    folder = tempfile.mkdtemp(prefix="pool_scoring_")
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    paths = []
    with mp.get_context("spawn").Pool(2) as pool:
        for epoch in range(3):
            for _ in range(10):
                loss = model(torch.randn(32, 16)).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            paths.append(os.path.join(folder, f"ep{epoch}.pt"))
            torch.save(model.state_dict(), paths[-1])
        for name, value in pool.map(score, paths):
            print(name, value, flush=True)
    print("scored", len(paths), flush=True)


if __name__ == "__main__":
    main()
