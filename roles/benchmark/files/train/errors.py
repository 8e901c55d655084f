"""The benchmark's own error: a problem the user can fix, printed without a traceback.

It lives apart from ``train.cli`` so that the modules the command line runs
(``train.bench`` and below) never import the command line back.
"""


class BenchmarkError(Exception):
    """A problem the user can fix; printed without a traceback."""
