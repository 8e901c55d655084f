"""State the distro method leaves on a Debian 12 node: Debian's CUDA 11.8 toolkit."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

USER = "mpiuser"


def test_nvcc_reports_the_distribution_release(host):
    out = host.check_output("nvcc --version")
    assert "release 11.8," in out


def test_headers_and_libraries(host):
    listing = host.check_output(
        "for f in /usr/include/cuda.h /usr/include/cuda_runtime.h "
        "/usr/lib/x86_64-linux-gnu/libcudart.so; do [ -e $f ] && echo $f; done"
    ).splitlines()
    assert listing == [
        "/usr/include/cuda.h",
        "/usr/include/cuda_runtime.h",
        "/usr/lib/x86_64-linux-gnu/libcudart.so",
    ]


KERNEL_CU = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
int main() { std::printf("%d\n", CUDART_VERSION); return 0; }
"""


def test_nvcc_compiles_a_kernel_and_links_the_runtime(host):
    # Device code needs nvcc (PTX for the kernel); the host part runs without a GPU.
    cmd = host.run(
        f"cat > /tmp/saxpy.cu <<'CU'\n{KERNEL_CU}\nCU\n"
        "cd /tmp && nvcc --ptx -o saxpy.ptx saxpy.cu && nvcc -o saxpy saxpy.cu"
        " && ./saxpy && grep -c '.entry' saxpy.ptx"
    )
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.split() == ["11080", "1"]


def test_environment_points_at_usr(host):
    out = host.check_output(f"su - {USER} -c 'echo $CUDA_HOME:$CUDA_PATH; command -v nvcc'")
    assert out.splitlines() == ["/usr:/usr", "/usr/bin/nvcc"]
    bashrc = host.file(f"/home/{USER}/.bashrc").content_string.splitlines()
    assert bashrc[0] == "# BEGIN mncluster cuda"


def test_cudnn_and_nccl_are_skipped_in_cpu_mode(host):
    assert host.run("ls /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/lib/x86_64-linux-gnu/libcudnn.so*").rc != 0
