"""``brain eval feed``: boot-feed replay recall (../shared/FEED-METRIC.md).

One job per module:

- :mod:`needs` reads raw session logs (its own stdlib reader, not the extractor) into the
  items each session needed;
- :mod:`replay` orders the sessions, picks targets and builds the vault each target would have
  seen by running the product commands as subprocesses;
- :mod:`baselines` renders the naive feeds Brain is compared with;
- :mod:`metrics` scores every feed against the needed items and compares them;
- :mod:`report` prints the tables and the JSON.
"""
