"""A model's settings: its config, its bounds, a chat service's description."""
