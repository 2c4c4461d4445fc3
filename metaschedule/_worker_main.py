"""The worker processes' main program: ``python -P -m metaschedule._worker_main``
(see :func:`metaschedule.worker.isolated_python`).

A module of its own, which nothing imports, so that running it as ``__main__`` never
duplicates a module the package already imported (see :mod:`metaschedule.worker`).
"""

from metaschedule.worker import main

if __name__ == "__main__":
    main()
