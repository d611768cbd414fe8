"""Analysis of finished runs, run from the repository root: ``python -m experiments.tools.results``
(figures and CSV of runs' evaluations; its ``--reference`` and ``--discovery`` tables come from
``relative`` and ``discovery``)."""
