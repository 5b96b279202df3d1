"""The HTTP API (aiohttp): the app factory, routing, errors and the routes per resource."""
