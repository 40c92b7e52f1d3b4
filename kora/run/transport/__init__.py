"""How a job travels between its rule's script and the broker: its spec, its log, the messages and the answer."""
