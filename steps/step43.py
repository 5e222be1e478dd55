"""Step 43: samplers, and batches of sequences that differ in length.

A sampler decides which indices an epoch visits.  ``WeightedRandomSampler`` rebalances
rare classes; ``DistributedSampler`` gives each of several processes its own share, every
sample exactly once per epoch.  Sequences of different lengths must be padded to stack;
padding is wasted work, so ``BucketBatchSampler`` batches sequences of similar length
together (still shuffled) and ``PadCollate`` pads each batch and returns a mask.
Run: python steps/step43.py
"""
import numpy as np

from lezero.data import (BatchSampler, BucketBatchSampler, DataLoader, DistributedSampler,
                         PadCollate, RandomSampler, TensorDataset, WeightedRandomSampler,
                         padding_waste)

rng = np.random.default_rng(48)

# An imbalanced dataset: 90% of class 0, 10% of class 1.
labels = np.array([0] * 900 + [1] * 100)
data = TensorDataset(np.arange(1000), labels)
plain = np.concatenate([t for _, t in DataLoader(data, batch_size=100, shuffle=True, seed=0)])
weights = 1.0 / np.bincount(labels)[labels]            # rare samples drawn more often
sampler = WeightedRandomSampler(weights, num_samples=1000,
                                generator=np.random.default_rng(0))
balanced = np.concatenate([t for _, t in DataLoader(data, batch_size=100, sampler=sampler)])
print("class counts, shuffled:", np.bincount(plain).tolist(),
      "| weighted:", np.bincount(balanced).tolist())

# Three ranks share ten samples: each sample exactly once.
shards = [list(DistributedSampler(range(10), num_replicas=3, rank=r, seed=0))
          for r in range(3)]
print("DistributedSampler shards:", shards,
      "| all covered once:", sorted(sum(shards, [])) == list(range(10)))

# Variable-length sequences (think sentences of 5 to 120 tokens) with a label each.
lengths = rng.integers(5, 121, size=2000)
sequences = [rng.integers(1, 50, size=n) for n in lengths]


class Sentences:
    def __len__(self):
        return len(sequences)

    def __getitem__(self, i):
        return sequences[i], int(lengths[i] > 60)


random_batches = list(BatchSampler(RandomSampler(range(2000),
                                                 generator=np.random.default_rng(0)),
                                   32, drop_last=False))
bucketed = BucketBatchSampler(lengths, batch_size=32, generator=np.random.default_rng(0))
loader = DataLoader(Sentences(), batch_sampler=bucketed, collate_fn=PadCollate(0))
tokens, padded_positions = 0, 0
for padded, mask, label in loader:
    tokens += int(mask.sum())
    padded_positions += padded.size
print(f"padding waste: random batches {padding_waste(random_batches, lengths)['waste']:.1%}, "
      f"bucketed {bucketed.padding_stats()['waste']:.1%} "
      f"(measured from the masks: {1 - tokens / padded_positions:.1%})")
padded, mask, label = next(iter(loader))
print("one bucketed batch:", padded.shape, "lengths from the mask", mask.sum(1)[:6].tolist(),
      "labels", label[:6].tolist())
