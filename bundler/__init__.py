"""The build toolchain of Pynox: runtimes, cross builds, bundles, wheels.

Run as `python -m bundler COMMAND`; each module does one job (see `__main__`).
"""
