"""Schema profiles (YAML) and the loader that validates and composes them."""
