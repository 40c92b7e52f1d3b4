"""How sure is each figure: pure maths over counts, then what is computed from records."""
