"""Judge quality: agreement of a judge's verdicts with labelled data (the built-in dev sets
or the user's rows), beside trivial baselines; pictures and a page of the results."""

from localjudge.quality.devsets import load_devset, overlap_verdict, wordlist_verdict
from localjudge.quality.labelled import (
    Agreement,
    DataError,
    QualityReport,
    Row,
    devset_rows,
    measure,
)
from localjudge.quality.rows import read_rows

__all__ = [
    "Agreement",
    "DataError",
    "QualityReport",
    "Row",
    "devset_rows",
    "load_devset",
    "measure",
    "overlap_verdict",
    "read_rows",
    "wordlist_verdict",
]
