"""What verify's node-health rows judge, collected on a GPU node in one run (as root: the
kernel log and the InfiniBand counters are root's to read; every program run is root's own
from the system's PATH). Prints one JSON document; a tool that is missing or fails is that
entry's rc and stderr, never a crash. Judged on the controller by
module_utils/mnc_verify_gpu_health.py.

    python3 mnc_gpu_health.py TIMEOUT
"""

import glob
import json
import os
import subprocess
import sys

SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def run(argv, timeout):
    try:
        p = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env={"PATH": SAFE_PATH, "LC_ALL": "C"},
            check=False,
        )
        return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-2000:]}
    except FileNotFoundError:
        return {"rc": 127, "stdout": "", "stderr": f"{argv[0]}: not found"}
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": "", "stderr": f"{argv[0]}: no answer in {timeout} s"}


def kernel_xids(timeout):
    """The driver's Xid lines since boot: the journal's kernel messages, else dmesg."""
    got = run(["journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"], timeout)
    if got["rc"] != 0:
        got = run(["dmesg"], timeout)
    got["stdout"] = "\n".join(line for line in got["stdout"].splitlines() if "NVRM: Xid" in line)
    return got


def ib_counters():
    out = {}
    for port in sorted(glob.glob("/sys/class/infiniband/*/ports/*")):
        counters = {}
        for name in ("link_downed", "link_error_recovery"):
            try:
                with open(os.path.join(port, "counters", name)) as f:
                    counters[name] = int(f.read().strip())
            except (OSError, ValueError):
                counters[name] = None
        parts = port.split("/")
        out[f"{parts[4]}:{parts[6]}"] = counters
    return out


def main():
    timeout = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    doc = {
        "nvidia_smi": run(["nvidia-smi", "-q"], timeout),
        "topo": run(["nvidia-smi", "topo", "-m"], timeout),
        "xid": kernel_xids(timeout),
        "uvm": [p for p in ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools") if os.path.exists(p)],
        "ib": ib_counters(),
    }
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
