class ConfigError(Exception):
    pass


def load(text):
    try:
        return int(text)
    except ValueError as exc:
        raise ConfigError(f"bad number: {text!r}") from exc


load("twelve")
