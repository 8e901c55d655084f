"""State the pip method leaves on a node: a usable CUDA prefix built from NVIDIA's wheels."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

PREFIX = "/opt/nvidia/cuda-12.6"
USER = "mpiuser"

# A program that needs the runtime, cuDNN and NCCL headers and libraries and
# asks each library for its version (none of these calls needs a GPU).
VERSIONS_C = r"""
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdio.h>
int main(void) {
    int rt = 0, nccl = 0;
    cudaRuntimeGetVersion(&rt);
    ncclGetVersion(&nccl);
    printf("cudart=%d cuda_h=%d cudnn=%zu nccl=%d\n", rt, CUDA_VERSION, cudnnGetVersion(), nccl);
    return 0;
}
"""


PREFIX_FILES = [
    "include/cuda.h",
    "include/cuda_runtime.h",
    "include/cudnn.h",
    "include/nccl.h",
    "include/nvrtc.h",
    "include/cub/cub.cuh",
    "lib/libcudart.so.12",
    "lib/libnvrtc.so.12",
    "lib/libcudnn.so.8",
    "lib/libnccl.so.2",
    "nvvm/libdevice/libdevice.10.bc",
]
LINKER_NAMES = ["libcudart.so", "libcudnn.so", "libnccl.so", "libnvrtc.so"]


def test_prefix_has_headers_and_libraries(host):
    # One round trip: the test bed's ansible connection is slow.
    listing = host.check_output(
        "for f in " + " ".join(PREFIX_FILES) + f"; do [ -f {PREFIX}/$f ] && echo $f; done"
    ).splitlines()
    assert listing == PREFIX_FILES


def test_linker_names_point_at_the_versioned_libraries(host):
    targets = host.check_output(
        "for n in " + " ".join(LINKER_NAMES) + f"; do readlink {PREFIX}/lib/$n; done"
    ).splitlines()
    assert targets == [f"{n}.{v}" for n, v in zip(LINKER_NAMES, ["12", "8", "2", "12"], strict=True)]


def test_lib64_is_lib(host):
    assert host.file(f"{PREFIX}/lib64").linked_to == f"{PREFIX}/lib"


def test_no_python_package_debris_in_the_prefix(host):
    found = host.run(f"find {PREFIX} -name __init__.py -o -name __pycache__ -o -name .metadata").stdout
    assert found.strip() == ""


def test_ptxas_reports_cuda_12_6(host):
    # The nvcc wheel ships ptxas and libnvvm but no nvcc driver program.
    out = host.check_output(f"{PREFIX}/bin/ptxas --version")
    assert "release 12.6" in out
    assert not host.file(f"{PREFIX}/bin/nvcc").exists


def test_libcuda_stub_links_but_is_not_on_the_loader_path(host):
    stub = host.file(f"{PREFIX}/lib/stubs/libcuda.so")
    assert stub.is_file
    assert "Library soname: [libcuda.so.1]" in host.check_output(f"readelf -d {stub.path}")
    # OpenMPI's configure links a cuMemFree test against -lcuda.
    cmd = host.run(
        "printf 'char cuMemFree(void);\\nint main(void){return cuMemFree();}\\n' > /tmp/s.c && "
        f"cc /tmp/s.c -L{PREFIX}/lib/stubs -lcuda -o /tmp/s && readelf -d /tmp/s"
    )
    assert cmd.rc == 0, cmd.stderr
    assert "Shared library: [libcuda.so.1]" in cmd.stdout
    # Only a real driver may provide libcuda.so.1 at run time.
    assert "libcuda.so" not in host.check_output("ldconfig -p")


def test_dynamic_linker_finds_the_libraries(host):
    cache = host.check_output("ldconfig -p")
    for lib in ("libcudart.so.12", "libcudnn.so.8", "libnccl.so.2", "libnvrtc.so.12"):
        assert f"{lib} (libc6,x86-64) => {PREFIX}/lib/{lib}" in cache


def test_login_shell_environment_builds_and_runs_against_the_prefix(host):
    host.run(f"cat > /tmp/versions.c <<'C'\n{VERSIONS_C}\nC\nchmod 0644 /tmp/versions.c")
    # A login shell of the MPI user: /etc/profile.d sets CUDA_HOME; no
    # LD_LIBRARY_PATH: ld.so.conf.d finds the libraries at run time.
    cmd = host.run(
        f"su - {USER} -c '"
        'cc -I"$CUDA_HOME/include" /tmp/versions.c -L"$CUDA_HOME/lib" -lcudart -lcudnn -lnccl -o ~/versions'
        " && env -u LD_LIBRARY_PATH ~/versions'"
    )
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.strip() == "cudart=12060 cuda_h=12060 cudnn=8907 nccl=22304"


def test_login_shell_environment(host):
    out = host.check_output(f"su - {USER} -c 'echo $CUDA_HOME:$CUDA_PATH; command -v ptxas'")
    assert out.splitlines() == [f"{PREFIX}:{PREFIX}", f"{PREFIX}/bin/ptxas"]


def test_non_interactive_ssh_shell_environment(host):
    # What mpiexec does: ssh host 'cmd' -> sshd runs a non-interactive bash,
    # which reads neither /etc/profile.d nor the rest of ~/.bashrc.
    setup = host.run(
        f"""set -e
        systemctl start ssh
        home=/home/{USER}
        install -d -m 0700 -o {USER} -g {USER} $home/.ssh
        key=$home/.ssh/id_ed25519
        [ -f $key ] || runuser -u {USER} -- ssh-keygen -q -t ed25519 -N "" -f $key
        install -m 0600 -o {USER} -g {USER} $home/.ssh/id_ed25519.pub $home/.ssh/authorized_keys
        ssh-keyscan -t ed25519 localhost 2>/dev/null > /tmp/known_hosts
        """
    )
    assert setup.rc == 0, setup.stderr
    cmd = host.run(
        f"runuser -u {USER} -- ssh -o BatchMode=yes -o UserKnownHostsFile=/tmp/known_hosts localhost "
        "'echo $CUDA_HOME; command -v ptxas; ~/versions'"
    )
    assert cmd.rc == 0, cmd.stderr
    lines = cmd.stdout.splitlines()
    assert lines[0] == PREFIX
    assert lines[1] == f"{PREFIX}/bin/ptxas"
    assert lines[2].startswith("cudart=12060 ")


def test_bashrc_block_is_at_the_top(host):
    bashrc = host.file(f"/home/{USER}/.bashrc").content_string.splitlines()
    assert bashrc[0] == "# BEGIN mncluster cuda"
    assert "# END mncluster cuda" in bashrc


def test_cpu_mode_skips_the_math_libraries(host):
    # mnc_accelerator: cpu -> no cuBLAS etc. (cuDNN/NCCL forced on by the scenario).
    assert not host.file(f"{PREFIX}/lib/libcublas.so.12").exists


def test_wheels_are_not_left_on_the_node(host):
    assert host.run("ls /var/cache/mncluster/wheels/*.whl").rc != 0
