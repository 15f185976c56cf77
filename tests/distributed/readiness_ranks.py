"""One rank of the readiness test (started by torchrun, tests/distributed/test_readiness.py): every
model of argv[1] (a JSON list of ModelConfig keyword arguments) through kan.probes.readiness.run on one gloo
process group; rank 0 writes {label: checks} to argv[2]."""

import json
import sys

import torch.distributed as dist
import torch

from kan.contract.point import ModelConfig, Placement, Point, TrainConfig
from kan.probes.readiness import run


def main(models: str, out: str) -> None:
    dist.init_process_group("gloo")
    train = TrainConfig(samples=512, batch_per_rank=32, epochs=1, max_steps=6, warmup_steps=0, lr=0.01)
    place = Placement(nodes=1, gpus_per_node=dist.get_world_size(), device="cpu")
    found = {}
    for kw in json.loads(models):
        m = ModelConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
        point = Point(experiment="readiness", model=m, train=train, placement=place)
        found[m.label] = run(point, torch.device("cpu"), dist.get_rank())["readiness"]["checks"]
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(found, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
