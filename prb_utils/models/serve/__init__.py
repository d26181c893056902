"""The serve wing: reward models, the Best-of-N policy and LLM rubric judges on an OpenAI-compatible server engine.

Written once over the engine's *dialect* (how its server is started, what it is asked, how its answers read):

- :mod:`~prb_utils.models.serve.launcher`: starts and stops a local server (command line, Python and environment
  from the dialect; every message names the engine);
- :mod:`~prb_utils.models.serve.client`: the HTTP client and the request cache; its errors
  (:class:`~prb_utils.models.serve.client.EngineError`, :class:`~prb_utils.models.serve.client.UnusableResponse`)
  are the contract every engine keeps;
- :mod:`~prb_utils.models.serve.connection`: one connection per model (its metadata names the engine), the
  next-token log-probs and the chat generator;
- :mod:`~prb_utils.models.serve.adapters`: the ``judge:``, ``implicit:`` and ``classifier:`` adapters;
- :mod:`~prb_utils.models.serve.vllm`: the first dialect, vLLM's.

A new server engine is a dialect module (a subclass of :class:`~prb_utils.models.serve.vllm.VLLMDialect` overriding
what its server does differently) and one record in :data:`prb_utils.models.engines.ENGINES` naming it.
"""
