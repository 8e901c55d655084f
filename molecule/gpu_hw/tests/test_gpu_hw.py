"""GPU checks: nvidia-smi, a CuPy kernel, an NCCL allreduce across the local GPUs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

PYTHON = "/opt/mnc-gpu-hw/venv/bin/python"
USER = "mpiuser"

KERNEL = r"""
import cupy
square_plus = cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * x + y", "square_plus")
x = cupy.arange(1 << 20, dtype=cupy.float32)
z = square_plus(x, cupy.float32(1))
expected = x.get() ** 2 + 1
assert (z.get() == expected).all()
print("kernel ok", cupy.cuda.runtime.getDeviceCount(), cupy.cuda.runtime.runtimeGetVersion())
"""

ALLREDUCE = r"""
import cupy
from cupy.cuda import nccl
n = cupy.cuda.runtime.getDeviceCount()
comms = nccl.NcclCommunicator.initAll(list(range(n)))
bufs = []
for dev in range(n):
    with cupy.cuda.Device(dev):
        bufs.append(cupy.full(1 << 20, dev + 1, dtype=cupy.float32))
nccl.groupStart()
for dev, comm in enumerate(comms):
    with cupy.cuda.Device(dev):
        comm.allReduce(bufs[dev].data.ptr, bufs[dev].data.ptr, bufs[dev].size,
                       nccl.NCCL_FLOAT32, nccl.NCCL_SUM, cupy.cuda.Stream.null.ptr)
nccl.groupEnd()
want = n * (n + 1) / 2
for dev in range(n):
    with cupy.cuda.Device(dev):
        cupy.cuda.Device(dev).synchronize()
        assert float(bufs[dev].min()) == want == float(bufs[dev].max()), (dev, float(bufs[dev].min()))
print("allreduce ok", n, nccl.get_version())
"""


def _python(host, code):
    # As the MPI user in a login shell: CUDA_PATH from /etc/profile.d, libraries via ld.so.conf.
    host.run(f"cat > /tmp/gpu_check.py <<'PY'\n{code}\nPY\nchmod 0644 /tmp/gpu_check.py")
    return host.run(f"su - {USER} -c '{PYTHON} /tmp/gpu_check.py'")


def test_nvidia_smi_sees_every_gpu(host):
    smi = host.check_output("nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader")
    lspci = int(host.check_output("lspci -n | awk '$2 ~ /^03(00|02):/ && $3 ~ /^10de:/' | wc -l"))
    assert len(smi.splitlines()) == lspci > 0


def test_cupy_kernel(host):
    cmd = _python(host, KERNEL)
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.startswith("kernel ok")


def test_nccl_allreduce_across_local_gpus(host):
    cmd = _python(host, ALLREDUCE)
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.startswith("allreduce ok")


def test_cupy_finds_cudnn(host):
    # Chainer uses cupy.cudnn; CuPy 13 loads the pinned cuDNN 8 (libcudnn.so.8):
    # getVersion() is 8907 for 8.9.7.
    cmd = _python(host, "import cupy.cuda.cudnn as c; print(c.getVersion())")
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.strip().startswith("89")
