"""The report half: the summary model, the tuning rules, the replay model's pure parts, the
plots and the HTML and Markdown pages. Free of Spark (an import contract in pyproject.toml
holds it), so a report renders from a ``summary.json`` alone."""
