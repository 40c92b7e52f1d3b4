"""The shard stages, in the order their results flow: seeds -> scenarios ->
conversations -> judgments (kora.run.stages.base describes what a stage is).

The one list of them: each name is a module of this package whose `STAGE` describes it
(kora.run.stages.registry reads them). The names alone here, importing nothing, because a
rule's script reads them to know that its job goes to the run's broker
(kora.run.dispatch), and a script must start fast.
"""

ORDER = ("seeds", "scenarios", "conversations", "judgments")
