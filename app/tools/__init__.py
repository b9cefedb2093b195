"""Builtin tools and the registry that offers them to the model."""
