"""The bottom floor: what every layer of the host may use and none of it is about a world
event — the injected clock, the settings, instants in JSON, the JSON codec, metrics, typed
text, the words a refusal of authored JSON is said in, the host's own tasks, the
rehearsal's muted log, and what the read surfaces (the API and the web console) share to
answer many readers cheaply (kept answers, revalidation, a steady pace).

Nothing here imports anything of pageant above :mod:`pageant.errors`.
"""
