"""Finding the exception a process died of in its stderr."""

from __future__ import annotations

from workers.tracebacks import exception_line

IMPORT_ERROR = """npulab: rank 0 of 1, local rank 0, cpu device 0, pid 12
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/opt/npulab/workers/training/launch.py", line 36, in main
    result = getattr(importlib.import_module(module_name), function_name)()
                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ModuleNotFoundError: No module named 'mymodel'
"""

CHAINED = """Traceback (most recent call last):
  File "train.py", line 3, in <module>
    load()
KeyError: 'weights'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "train.py", line 5, in <module>
    raise RuntimeError("no weights")
RuntimeError: no weights
"""

UNDER_TORCHRUN = """[rank1]: Traceback (most recent call last):
[rank1]:   File "train.py", line 9, in <module>
[rank1]:     import mymodel
[rank1]: ImportError: cannot import name 'Net' from 'mymodel'
E0101 00:00:00.000 1 torch/distributed/elastic/multiprocessing/api.py:882] failed
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
"""


def test_the_exception_line_of_a_traceback() -> None:
    assert exception_line(IMPORT_ERROR.splitlines()) == (
        "ModuleNotFoundError: No module named 'mymodel'"
    )


def test_the_last_of_chained_exceptions_counts() -> None:
    assert exception_line(CHAINED.splitlines()) == "RuntimeError: no weights"


def test_a_ranks_exception_beats_the_launchers_report() -> None:
    assert exception_line(UNDER_TORCHRUN.splitlines()) == (
        "ImportError: cannot import name 'Net' from 'mymodel'"
    )


def test_output_without_a_traceback_names_nothing() -> None:
    assert (
        exception_line(["usage: train.py [-h] --lr LR", "train.py: error: --lr is required"]) == ""
    )
    assert exception_line([]) == ""
