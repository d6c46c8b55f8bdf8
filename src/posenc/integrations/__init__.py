"""Adapters that put posenc's encodings into other libraries' models (imported on demand)."""
