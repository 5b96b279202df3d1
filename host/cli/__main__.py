"""``python -m pageant.cli``: the same command line as the ``pageant`` script."""

from pageant.cli import main

# Guarded: CI's plain-install check imports every module, and an import must not run the CLI.
if __name__ == "__main__":
    main()
