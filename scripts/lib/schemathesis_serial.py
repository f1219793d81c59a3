"""Runs the Schemathesis command line with ast.parse serialised across threads.

CPython 3.11 keeps the recursion depth of its AST constructor in state that
threads share, so two threads parsing at once can fail with "SystemError: AST
constructor recursion depth mismatch". Hypothesis parses source files to
describe the lambdas of its strategies, from each of Schemathesis's worker
threads, and that error then fails the run inside the tool. One lock around
ast.parse keeps the workers from parsing at the same moment; nothing else
changes.
"""

import ast
import sys
import threading

_parse = ast.parse
_lock = threading.Lock()


def _serial_parse(*args, **kwargs):
    with _lock:
        return _parse(*args, **kwargs)


ast.parse = _serial_parse

from schemathesis.cli import schemathesis  # noqa: E402  (after the patch)

if __name__ == "__main__":
    sys.argv[0] = "st"
    sys.exit(schemathesis())
