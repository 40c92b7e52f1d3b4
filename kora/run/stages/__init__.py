"""The one list of the shard stages, in the order their results flow (kora.run.stages.base
says what a stage is): each name is a module of this package whose `STAGE` describes it
(kora.run.stages.registry). Names alone, importing nothing: a rule's script reads them to
hand its job to the run's broker (kora.run.broker.dispatch), and must start fast."""

ORDER = ("seeds", "scenarios", "conversations", "judgments")
