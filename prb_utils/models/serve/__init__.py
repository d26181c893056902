"""The serve wing: reward models, the Best-of-N policy and LLM rubric judges on a server engine.

Written once over the engine's *dialect* (:class:`~prb_utils.models.serve.dialect.Dialect`: how its server is
started, what it is asked as ``(path, body)`` requests, how its answers, reports and log read, and its wording):

- :mod:`~prb_utils.models.serve.dialect`: the contract;
- :mod:`~prb_utils.models.serve.launcher`: starts and stops a local server (command line, Python, environment,
  health path and log reading from the dialect; every message names the engine);
- :mod:`~prb_utils.models.serve.client`: the HTTP client and the request cache; its errors
  (:class:`~prb_utils.models.serve.client.EngineError`, :class:`~prb_utils.models.serve.dialect.UnusableResponse`)
  are the contract every engine keeps;
- :mod:`~prb_utils.models.serve.connection`: one connection per model (its metadata names the engine and its
  dialect), the next-token log-probs and the chat generator;
- :mod:`~prb_utils.models.serve.adapters`: the ``judge:``, ``implicit:`` and ``classifier:`` adapters;
- :mod:`~prb_utils.models.serve.vllm`: the first dialect, vLLM's.

A new server engine is one dialect module (a :class:`~prb_utils.models.serve.dialect.Dialect` subclass) and one
record in :data:`prb_utils.models.engines.ENGINES` naming it.
"""
