"""The filter mncluster.core.mnc_network (plugins/filter/mnc.py): the CIDR OpenMPI is pinned to
(roles/mpi_network, verify.yml)."""


import pytest
from ansible_collections.mncluster.core.plugins.filter import mnc as mnc_filters


@pytest.mark.parametrize(
    ("address", "prefix", "network"),
    [("10.89.78.11", 24, "10.89.78.0/24"), ("192.168.7.200", "26", "192.168.7.192/26"),
     ("172.16.5.4", 16, "172.16.0.0/16"), ("10.0.0.1", 32, "10.0.0.1/32")],
)  # fmt: skip
def test_the_host_bits_are_cleared(address, prefix, network):
    assert mnc_filters.mnc_network(address, prefix) == network


@pytest.mark.parametrize(("address", "prefix"), [("10.0.0.300", 24), ("node1", 24), ("10.0.0.1", 33)])
def test_what_is_not_an_address_and_prefix_is_refused(address, prefix):
    with pytest.raises(ValueError):
        mnc_filters.mnc_network(address, prefix)
