"""The leakage audit: temporal and split violations in every benchmark's evaluation items, their
fixed contexts and the stored retrieval results. Entry point: ``python -m pipelines.audit``
(see ``pipelines.audit.run``; the checks are ``udfs.audit``)."""
