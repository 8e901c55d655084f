"""The PyTorch engine's part of the environment record: the framework, how the ranks came up, the GPUs.

Called by ``train.environment`` (which writes the same keys for ChainerMN); imports
nothing of torch itself: the runner carries it.
"""

from __future__ import annotations


def torch_gpu(r) -> dict | None:
    """This rank's GPU as torch sees it (the PyTorch engine with --gpu), else None."""
    if not r.args.gpu:
        return None
    props = r.torch.cuda.get_device_properties(r.device)
    bus = "{:04x}:{:02x}:{:02x}.0".format(getattr(props, "pci_domain_id", 0), getattr(props, "pci_bus_id", 0),
                                          getattr(props, "pci_device_id", 0))
    return {"device": r.device.index, "name": props.name, "pci_bus_id": bus}


def framework_record(r) -> dict:
    """Which framework ran, its version, and how its ranks were brought up (the same keys for both)."""
    if getattr(r, "framework", "chainer") != "pytorch":
        return {"framework": "chainer", "chainer": r.chainer.__version__, "torch": None,
                "communicator_class": type(r.comm).__name__, "distributed": None}
    torch = r.torch
    launch = r.launch
    return {"framework": "pytorch", "chainer": None, "torch": torch.__version__,
            "communicator_class": type(r.ddp).__name__,
            "distributed": {**launch, "host_communicator": r.host_path,
                            "note": "how the ranks learnt their rank, world size and rendezvous: "
                                    "launcher (mpiexec, slurm for srun --mpi=pmix, torchrun, none), the "
                                    "variables read, the master address and where it came from, and the "
                                    "process group's backend"}}


def gpu_environment(r, ranks: list[dict]) -> dict:
    """The environment's GPU keys as torch sees them (--gpu): device, gpus, cuDNN, NCCL, torch's CUDA."""
    out = {}
    torch = r.torch
    out["device"] = f"cuda ({ranks[0]['gpu']['name']})"
    out["gpus"] = [dict(rec["gpu"], rank=rec["rank"], host=rec["host"]) for rec in ranks]
    out["cudnn_enabled"] = bool(torch.backends.cudnn.enabled and torch.backends.cudnn.is_available())
    version = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else None
    out["nccl_version"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else version
    out["torch_cuda"] = torch.version.cuda
    return out
