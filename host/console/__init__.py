"""The web console: the pages staff use in a browser to author, watch and steer events.

Served by the API's own aiohttp app at ``/`` (the API stays under ``/api/v1``) and mounted by
:func:`pageant.api.app.make_app` through :func:`pageant.console.app.mount`. Pages are rendered
on the server with Jinja2; the one script is htmx, vendored in ``static/`` (see
``static/VENDORED.md``), which polls the live parts.

Not to be confused with :mod:`pageant.runs.console`, the *run console's data* (one run, its
steps, gate and log): the web console's run page is one of the surfaces that renders it.

Like the API, this package calls domain functions (events, runs, schedules, plugins,
access) and never SQL or the tables; it never imports :mod:`pageant.api`.
"""
