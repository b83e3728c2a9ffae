"""The results viewer: server-rendered HTML pages under /view, served by `afpbench serve` and
`afpbench view` (api/cli_view.py).

Pages read the existing services only (the report cache for the summary, records for one cell, the ORM
rows through a session each page opens in its own thread, api/http/deps.py); the one write is a human
decision through workers/grading/adjudication.
Every user-derived string is escaped (model answers are hostile text); the pages load nothing from
another origin and carry a Content-Security-Policy that allows only this server's own script and style.
"""
