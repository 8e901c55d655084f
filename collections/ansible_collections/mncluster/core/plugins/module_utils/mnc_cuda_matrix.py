"""The GPU roles' install check (roles/cuda_matrix): do the chosen install methods, the CUDA
release, its wheels or packages, the cuDNN and NCCL records and the pinned driver fit together,
on this distribution?

roles/cuda_matrix reaches it through the ``mnc_cuda_matrix_problems`` filter
(plugins/filter/mnc.py), with one dict of the values it reads (``inputs`` below); each rule
adds one message where it is broken, and an empty answer means the check passes. In Python, not
Jinja, because a Jinja rule list is compiled again at every render in every worker, and every
value it names once more at each reference (about 200 compiles per node for this check).
Unit-tested in tests/unit/test_cuda_matrix_rules.py; the gpu_render scenario refuses each broken
rule end to end.

``inputs`` (the role's variables, resolved by the task):
    distribution, distribution_version, distro_id, distros, host
    cuda_version, stack_cuda_version, cupy_package, cudnn_cuda_major
    cuda_method, cudnn_method, nccl_method, driver_method, methods
    wheels (cuda_pip_wheels + cuda_pip_math_wheels), repo_packages
    distro_version, repo_distro, distro_nccl_packages  (vars/<distro>.yml; '' / [] elsewhere)
    repo_distros, driver_branch, driver_version, driver_min_version
    use_gpu, cudnn_without_gpu, nccl_without_gpu  (booleans)
    cudnn_pip_wheel, cudnn_version, cudnn_repo_packages, nccl_pip_wheel, nccl_version,
    nccl_repo_packages
"""

import re

from ansible.module_utils.compat.version import LooseVersion


def _s(value):
    return "" if value is None else str(value)


def _ok(pattern, value, how=re.match):
    return how(pattern, _s(value)) is not None


def _records(value):
    return value if isinstance(value, list) else []


def _repo_problem(v, from_repo):
    distro_id, cuda = v["distro_id"], _s(v["cuda_version"])
    debian13 = (
        f"; it has no driver branch {v['driver_branch']} (NVIDIA/cuda-repo-management issue 38), and"
        f" cuda-toolkit-{cuda.replace('.', '-')}, libcudnn8 and libnccl2 +cuda{cuda} are unconfirmed there"
        if distro_id == "debian13"
        else ""
    )
    return (
        f"cuda: {', '.join(from_repo)}: nvidia_repo on {v['host']} ({distro_id}), but NVIDIA's {distro_id}"
        f" repository is not known to carry the matrix's packages (stack_cuda_repo_distros:"
        f" {', '.join(v['repo_distros'])}){debian13}. Nothing was installed. Use cuda_install_method: pip"
        f" (CUDA, cuDNN and NCCL as NVIDIA's wheels, the driver from the distribution) or distro, or add"
        f" {distro_id} to stack_cuda_repo_distros once its Packages index has every pinned package."
    )


def _libraries_fit(v, major):
    cudnn, nccl, cuda = v["cudnn_method"], v["nccl_method"], _s(v["cuda_version"])
    cudnn_wheel, nccl_wheel = v["cudnn_pip_wheel"] or {}, v["nccl_pip_wheel"] or {}
    cudnn_pkgs, nccl_pkgs = _records(v["cudnn_repo_packages"]), _records(v["nccl_repo_packages"])
    if cudnn == "pip" and (
        _s(cudnn_wheel.get("name")) != f"nvidia-cudnn-cu{major}"
        or _s(cudnn_wheel.get("version")) != _s(v["cudnn_version"])
    ):
        return False
    if cudnn == "nvidia_repo":
        other_cuda = [
            p
            for p in cudnn_pkgs
            if not _ok(f"-cuda-{major}$", p.get("name"), re.search)
            and not _ok(f"[+]cuda{major}[.]", p.get("version"), re.search)
        ]
        pinned = [p for p in cudnn_pkgs if _ok(re.escape(_s(v["cudnn_version"])) + "-", p.get("version"))]
        if other_cuda or len(pinned) != len(cudnn_pkgs):
            return False
    if nccl == "pip" and (
        _s(nccl_wheel.get("name")) != f"nvidia-nccl-cu{major}"
        or _s(nccl_wheel.get("version")) != _s(v["nccl_version"])
    ):
        return False
    if nccl == "nvidia_repo":
        build = re.escape(_s(v["nccl_version"])) + "-[0-9]+[+]cuda" + re.escape(cuda) + "$"
        if len([p for p in nccl_pkgs if _ok(build, p.get("version"))]) != len(nccl_pkgs):
            return False
    if nccl == "distro" and not v["distro_nccl_packages"]:
        return False
    return cudnn != "distro"


def _libraries_problem(v, major):
    cuda = _s(v["cuda_version"])
    cudnn, nccl = v["cudnn_method"], v["nccl_method"]
    cudnn_what = (v["cudnn_pip_wheel"] or {}).get("name") if cudnn == "pip" else v["cudnn_repo_packages"]
    nccl_what = (v["nccl_pip_wheel"] or {}).get("name") if nccl == "pip" else v["nccl_repo_packages"]
    return (
        f"cuda: the cuDNN/NCCL records do not fit CUDA {cuda} (cudnn {cudnn}: {cudnn_what} version"
        f" {v['cudnn_version']}; nccl {nccl}: {nccl_what} version {v['nccl_version']}). Wheels must be the"
        f" -cu{major} builds of the pinned versions; repository packages the <version>-N+cuda{cuda} (NCCL)"
        f" and -cuda-{major} or +cuda{major}.x (cuDNN) builds. The distro method has no cuDNN anywhere (the"
        " distributions' nvidia-cudnn downloads from NVIDIA at install time) and no NCCL on Debian 12:"
        " use pip or nvidia_repo for them."
    )


def cuda_matrix_problems(v):
    """The broken rules of the GPU roles' choices, one message each (empty: they fit)."""
    distro_id = v["distro_id"]
    if distro_id not in v["distros"]:
        return [
            f"cuda: {v['distribution']} {v['distribution_version']} ({distro_id}) is not supported;"
            f" mncluster's GPU roles support {', '.join(v['distros'])}."
        ]
    cuda, matrix = _s(v["cuda_version"]), _s(v["stack_cuda_version"])
    major = cuda.split(".")[0]
    methods = v["methods"]
    cuda_m, cudnn_m, nccl_m = v["cuda_method"], v["cudnn_method"], v["nccl_method"]
    libraries = v["use_gpu"] or v["cudnn_without_gpu"] or v["nccl_without_gpu"]
    from_repo = (
        (["cuda_install_method"] if cuda_m == "nvidia_repo" else [])
        + (["cudnn_install_method"] if libraries and cudnn_m == "nvidia_repo" else [])
        + (["nccl_install_method"] if libraries and nccl_m == "nvidia_repo" else [])
        + (["nvidia_driver_install_method"] if v["use_gpu"] and v["driver_method"] == "nvidia_repo" else [])
    )
    toolkit = [f"nvidia-cuda-{part}-cu{major}" for part in ("runtime", "nvcc", "nvrtc", "cccl")]
    wheels = _records(v["wheels"])
    bad_wheels = [w for w in wheels if not _ok(f"^nvidia-[a-z0-9-]+-cu{major}$", w.get("name"))] + [
        w for w in wheels if w.get("name") in toolkit and not _ok(re.escape(cuda) + "[.]", w.get("version"))
    ]
    packages = _records(v["repo_packages"])
    bad_packages = [
        p for p in packages if not _ok("-" + cuda.replace(".", "-") + "$", p.get("name"), re.search)
    ] + [p for p in packages if not _ok(re.escape(cuda) + "[.]", p.get("version"))]
    distro_version = _s(v["distro_version"])
    distro_major = distro_version.split(".")[0]
    driver, branch = _s(v["driver_version"]), _s(v["driver_branch"])
    problems = []
    if from_repo and distro_id not in v["repo_distros"]:
        problems.append(_repo_problem(v, from_repo))
    if cuda_m not in methods or cudnn_m not in methods or nccl_m not in methods:
        problems.append(
            f"cuda: unknown install method (cuda_install_method={cuda_m}, cudnn_install_method={cudnn_m},"
            f" nccl_install_method={nccl_m}); choose one of {', '.join(methods)}."
        )
    if not _ok(r"^[0-9]+\.[0-9]+$", cuda) or major != matrix.split(".")[0]:
        problems.append(
            f"cuda: cuda_version {cuda} must be major.minor and have the matrix's CUDA major"
            f" (stack_cuda_version {matrix}): cuDNN, NCCL and {v['cupy_package']} are chosen for it."
        )
    if cuda_m == "pip" and bad_wheels:
        names = ", ".join(f"{w.get('name')} {w.get('version')}" for w in bad_wheels)
        problems.append(
            f"cuda: wheels that do not belong to CUDA {cuda}: {names}. Every wheel must be an"
            f" nvidia-*-cu{major} wheel, and the toolkit's own wheels ({', '.join(toolkit)}) must be"
            f" version {cuda}.x."
        )
    if cuda_m == "nvidia_repo" and bad_packages:
        names = ", ".join(f"{p.get('name')}={p.get('version')}" for p in bad_packages)
        problems.append(
            f"cuda: packages that are not CUDA {cuda}'s: {names} (expected e.g."
            f" cuda-toolkit-{cuda.replace('.', '-')}={cuda}.N-1)."
        )
    if cuda_m == "distro" and distro_major != major:
        problems.append(
            f"cuda: {v['repo_distro']} packages CUDA {distro_version}, but the matrix is CUDA {matrix}"
            f" (cuDNN for CUDA {v['cudnn_cuda_major']}, {v['cupy_package']}). Use cuda_install_method"
            f" nvidia_repo or pip, or set the matrix to the distribution's release (stack_cuda_version:"
            f' "{distro_version}", stack_cudnn_cuda_major: {distro_major}, stack_cupy_package:'
            f" cupy-cuda{distro_major}x)."
        )
    if libraries and not _libraries_fit(v, major):
        problems.append(_libraries_problem(v, major))
    if not driver.startswith(branch + ".") or LooseVersion(driver) < LooseVersion(
        _s(v["driver_min_version"])
    ):
        problems.append(
            f"cuda: driver {driver} (branch {branch}) cannot run CUDA {cuda}: it must belong to its branch"
            f" and be at least {v['driver_min_version']}."
        )
    return problems
