"""``python -m pageant.cli``: the same command line as the ``pageant`` script."""

from pageant.cli import main

main()
