"""``python -m kafkalite``: the same command line as the ``kafkalite`` script, from any interpreter that
can import the package (a notebook's kernel, a subprocess with only ``sys.executable`` to go on)."""

from kafkalite.cli import main

if __name__ == "__main__":
    main()
