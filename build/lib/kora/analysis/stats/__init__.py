"""How sure is each figure. Pure maths over counts, then what is computed from records:

- `rates`: a rate k/n with its 95 % Wilson interval; the NO SIGNAL check.
- `paired`: the exact McNemar (sign) test of two targets or prompt variants on the same
  tests, the Holm / Benjamini-Hochberg adjustment, and the one wording of a comparison's
  outcome.
- `difference`: the confidence interval of a paired difference of failing rates
  (Newcombe's hybrid score, Tango's score).
- `power`: the power of the exact McNemar test, exactly and by simulation, and the number
  of paired tests a comparison needs (Connor's n, then the exact test's).
- `ranks`: targets ranked by failing rate with bootstrap rank intervals, and which are
  tied.
- `agreement`: Fleiss' and Cohen's kappa, percent agreement, flip matrices.
- `analyses`: grade summaries, judge agreement and paired comparisons of test records
  (`kora.analysis.records`).
- `commands`: `kora stats`, `kora compare`, `kora compare-targets`.
"""
