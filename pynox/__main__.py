"""`python -m pynox`: the same command as the `pynox` launcher."""

from pynox.cli import main

main()
