"""Everything that runs on an accelerator host.

Nothing under this package imports Django. Collectors, runners and the spec
module import only the standard library (runners also torch) and stay
compatible with Python 3.8, because they run inside the user's environment.
"""

__version__ = "0.1.0"
