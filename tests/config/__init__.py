"""pynox.toml: reading, the messages users see, profiles, discovery and the parsed-config
cache. Everything here runs in this process (marked unit) except test_startup.py, which
starts an interpreter.
"""
