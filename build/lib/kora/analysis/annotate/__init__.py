"""People grade a sample of a target's judged conversations (`kora annotate`), so the
judges can be checked against them (`kora agreement`)."""
