"""Daily Oracle (Dai et al., ICML 2025): pure functions of the builder.

``selection`` picks each day's articles (pre-filters, text preprocessing, hot topics),
``parsing`` reads the four LLM steps' answers, ``questions`` holds the per-question rules
(answers, time elements, post-filters, the keep rule, option shuffling), ``units`` the articles
and questions a build carries through its steps, ``rows`` the output rows made from them and
``tables`` the Arrow schemas of the outputs. Spec: ``../shared/spec/daily_oracle.md``.
"""
