# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How much of a run's gradient reduction overlapped compute, in numbers and in one sentence.

Pure functions over one benchmark document's ``overlap`` record (``train/document.py``,
``train/ddp_hook.py``), used by the verdict (``mnc_verdict``); no Ansible, no I/O.
"""

from __future__ import annotations


def percent(part, whole):
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def _ms(seconds):
    return f"{seconds * 1e3:.3g} ms"


def overlap_accounting(doc):
    """How much of the gradient reduction ran behind compute: the run's ``overlap`` in a few numbers.

    ``mode`` is ``ddp`` (PyTorch DDP: buckets reduced while backward runs, timed by a comm
    hook), ``double-buffering`` (ChainerMN: the reduction overlaps the next iteration) or
    ``serial`` (nothing overlaps). ``own`` is the reduction's own duration, ``hidden`` the part
    of it behind compute, ``exposed`` the rest (own - hidden), ``overlapped_percent`` hidden / own
    (DDP: over all iterations, as the document gives it).
    """
    ov = doc.get("overlap") or {}
    mode = ov.get("mode") or ("double-buffering" if ov.get("double_buffering") else "serial")
    own = (ov.get("allreduce_own") or {}).get("median")
    hidden = ov.get("hidden")
    ddp = ov.get("ddp") or {}
    share = ddp.get("overlapped_percent") if mode == "ddp" else percent(hidden, own)
    exposed = None if own is None or hidden is None else max(0.0, own - hidden)
    return {"mode": mode, "own": own, "hidden": hidden, "exposed": exposed, "overlapped_percent": share,
            "buckets": ddp.get("buckets"), "exposed_phase": ov.get("allreduce_exposed")}


def overlap_sentence(acc):
    """One sentence on the overlap of a run whose reduction overlaps compute, else None."""
    if acc["mode"] == "serial" or acc["own"] is None:
        return None
    if acc["mode"] == "ddp":
        head = "DDP reduced the gradient in {} bucket{} while backward ran".format(
            acc["buckets"], "" if acc["buckets"] == 1 else "s")
        if acc["overlapped_percent"] is None:
            return head + ", but nothing was reduced (p = 1)."
        text = head + ": {} of its {} reduction ({:.0f}%) was hidden behind backward, {} exposed".format(
            _ms(acc["hidden"]), _ms(acc["own"]), acc["overlapped_percent"], _ms(acc["exposed"]))
        if acc["buckets"] == 1:
            text += " (one bucket starts only when every gradient is ready: a smaller bucket_cap_mb lets " \
                    "DDP start reducing earlier)"
        return text + "."
    return ("Double buffering hid {} of the reduction's {} behind the next iteration's compute{}.".format(
        _ms(acc["hidden"]), _ms(acc["own"]), "" if acc["overlapped_percent"] is None else
        " ({:.0f}%)".format(acc["overlapped_percent"])))
