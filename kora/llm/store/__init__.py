"""The call store: finished calls kept on disk, whole or not at all."""
