"""ChainerMN data-parallel training benchmark, run on every rank by mpiexec.

    mpiexec -n 2 python -m train --model mlp --iterations 50 --out bench.json

See train/README.md for what is timed and what the JSON document
holds. The package has no dependency on Ansible: the nodes get a copy of this
directory and run it with the virtualenv's Python.
"""

SCHEMA = "mncluster.benchmark/1"
