"""module_utils/mnc_ompi_info.py on real `ompi_info --parsable --all` output.

Fixtures (tests/unit/fixtures/, gzipped as captured):
* ompi_info-4.1.4-debian.txt.gz: Debian 12's openmpi-bin 4.1.4 (built without CUDA, with UCX).
* ompi_info-5.0.7-cuda12.6.txt.gz: the openmpi role's own build (5.0.7 --with-cuda against the
  pip CUDA 12.6 headers) on a node without an NVIDIA driver.
* ompi_info-5.0.7-cuda12.6-stub-libcuda.txt.gz: the same build run with a libcuda.so.1 on
  LD_LIBRARY_PATH (the link stub: no driver exists in the test bed), so the accelerator/cuda
  plugin opens, as it does on a node with the NVIDIA driver.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils.mnc_ompi_info import (
    OmpiInfoParseError,
    parse_configure_cli,
    parse_ompi_info,
    parse_records,
)

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    with gzip.open(FIXTURES / name, "rt", encoding="utf-8") as fh:
        return fh.read()


@pytest.fixture(scope="module")
def debian_414():
    return parse_ompi_info(fixture("ompi_info-4.1.4-debian.txt.gz"))


@pytest.fixture(scope="module")
def ours_507():
    return parse_ompi_info(fixture("ompi_info-5.0.7-cuda12.6.txt.gz"))


@pytest.fixture(scope="module")
def ours_507_libcuda():
    return parse_ompi_info(fixture("ompi_info-5.0.7-cuda12.6-stub-libcuda.txt.gz"))


def test_debian_414_identity(debian_414):
    assert debian_414["version"] == "4.1.4"
    assert debian_414["major"] == 4
    assert debian_414["package"] == "Debian OpenMPI"
    assert debian_414["prefix"] == "/usr"
    assert debian_414["libdir"] == "/usr/lib/x86_64-linux-gnu/openmpi/lib"
    assert debian_414["mpi_api_version"] == "3.1.0"


def test_debian_414_is_not_cuda_aware(debian_414):
    # The reason the project builds its own: the distro package has no CUDA support.
    cuda = debian_414["cuda_support"]
    assert cuda["built_with"] is False
    assert cuda["runtime"] is False
    assert cuda["accelerators"] == []  # 4.1 has no accelerator framework


def test_debian_414_configure_line_is_unquoted(debian_414):
    args = debian_414["configure_args"]
    assert args[0] == "--build=x86_64-linux-gnu"
    assert "--with-ucx" in args
    # A quoted value with a space stays one argument.
    assert "--with-package-string=Debian OpenMPI" in args
    # ${prefix} is kept literally, as configure received it.
    assert "--libdir=${prefix}/lib/x86_64-linux-gnu/openmpi/lib" in args
    assert debian_414["configure_cli"].startswith("'--build=x86_64-linux-gnu'")


def test_debian_414_transports(debian_414):
    tr = debian_414["transports"]
    assert set(tr["btl"]) == {"ofi", "openib", "tcp", "vader", "self"}
    assert set(tr["pml"]) == {"v", "cm", "ob1", "ucx", "monitoring"}
    assert "psm2" in tr["mtl"]
    assert tr["ucx"] is True


def test_507_identity(ours_507):
    assert ours_507["version"] == "5.0.7"
    assert ours_507["major"] == 5
    assert ours_507["prefix"] == "/opt/openmpi/5.0.7-cuda12.6"
    assert ours_507["libdir"] == "/opt/openmpi/5.0.7-cuda12.6/lib"


def test_507_configure_line_has_our_flags(ours_507):
    args = ours_507["configure_args"]
    assert "--prefix=/opt/openmpi/5.0.7-cuda12.6" in args
    assert any(a.startswith("--with-cuda=") for a in args)
    assert any(a.startswith("--with-cuda-libdir=") for a in args)


def test_507_built_with_cuda_but_no_driver(ours_507):
    # Built --with-cuda; on a node without libcuda.so.1 the accelerator/cuda
    # plugin does not open, so CUDA buffers would not work at run time.
    cuda = ours_507["cuda_support"]
    assert cuda["built_with"] is True
    assert "cuda" not in cuda["accelerators"]
    assert cuda["runtime"] is False


def test_507_with_libcuda_the_cuda_accelerator_opens(ours_507_libcuda):
    cuda = ours_507_libcuda["cuda_support"]
    assert cuda["built_with"] is True
    assert "cuda" in cuda["accelerators"]
    assert cuda["runtime"] is True


def test_507_transports_without_ucx(ours_507):
    tr = ours_507["transports"]
    # 5.x renamed vader to sm; tcp and self are always built.
    assert {"self", "sm", "tcp"} <= set(tr["btl"])
    assert "ob1" in tr["pml"]
    assert tr["ucx"] is False


def test_records_keep_colons_inside_values():
    text = (
        "ompi:version:full:5.0.7\n"
        "config:cli: '--with-foo=a:b' '--x'\n"
        "mca:opal:base:param:opal_built_with_cuda_support:value:true\n"
        "mca:opal:base:param:some_path:value:/a:/b\n"
        'mca:btl:tcp:version:"component:5.0.7"\n'
        'mca:btl:tcp:version:"mca:2.1.0"\n'
    )
    rec = parse_records(text)
    assert rec["params"]["some_path"] == "/a:/b"
    assert rec["components"] == {"btl": ["tcp"]}
    facts = parse_ompi_info(text)
    assert facts["configure_args"] == ["--with-foo=a:b", "--x"]
    assert facts["cuda_support"]["built_with"] is True


def test_synonym_is_used_when_the_opal_name_is_missing():
    text = "ompi:version:full:4.1.6\nmca:mpi:base:param:mpi_built_with_cuda_support:value:true\n"
    assert parse_ompi_info(text)["cuda_support"]["built_with"] is True


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ompi_info: error while loading shared libraries: libevent_core-2.1.so.7: cannot open\n",
        "Package: Open MPI\nOpen MPI: 5.0.7\n",  # the human-readable format, not --parsable
    ],
)
def test_not_parsable_output_is_an_error(text):
    with pytest.raises(OmpiInfoParseError):
        parse_ompi_info(text)


def test_unbalanced_quote_keeps_the_words():
    assert parse_configure_cli("'--prefix=/x' '--broken") == ["'--prefix=/x'", "'--broken"]
