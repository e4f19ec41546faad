"""Container engines with the same few verbs: copy in, call, copy out (see base)."""
