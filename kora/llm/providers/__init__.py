"""Each kind of model and how it is made: the providers' APIs, batches, chat services."""
