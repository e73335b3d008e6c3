"""The Tasks page: what a person sees at ``GET /``.

``static/`` holds the whole page: ``index.html``, ``app.css`` and small JavaScript modules
(``app.js`` and what it imports), written to run as they are in a current browser, with no
build step and nothing fetched from elsewhere. The API serves the folder
(``onthedot.api.routes_web``); the page uses only the public REST API, as any client would.
"""
