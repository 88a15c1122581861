"""REST service for the corrector: `python -m service` or `uvicorn service.app:app`.

`service.app.create_app(settings, corrector=None)` builds an app; see docs/service.md.
"""
