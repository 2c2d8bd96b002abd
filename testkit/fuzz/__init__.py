"""Long fuzz campaigns, run outside the suite: python -m testkit.fuzz.<parser> --inputs N (each
module says what it feeds)."""
