"""`localjudge serve`: one loaded judge and one scheduler behind a local HTTP API, so
pipelines that are not Python (Mastra apps, shell scripts) use the scorers without
reloading the model per call (the extra `localjudge[serve]`: FastAPI and uvicorn).
`app.py` builds the app, `guard.py` the key, browser checks and body limit, `server.py`
what every route shares, `scorer_api.py` and `openai_api.py` the two APIs, `metrics.py`
/metrics, `errors.py` the JSON errors."""

from localjudge.serve.app import create_app
from localjudge.serve.errors import ServeError
from localjudge.serve.guard import LOOPBACK_HOSTS, Guard, check_binding
from localjudge.serve.scorer_api import MAX_POOLED_SCORERS, ScorerPool
from localjudge.serve.server import DEFAULT_MAX_BODY_BYTES, MAX_IN_FLIGHT, Server

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "LOOPBACK_HOSTS",
    "MAX_IN_FLIGHT",
    "MAX_POOLED_SCORERS",
    "Guard",
    "ScorerPool",
    "ServeError",
    "Server",
    "check_binding",
    "create_app",
]
