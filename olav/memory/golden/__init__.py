"""The golden suite: a project-authored set of guides, lessons, precedents and requests that
ships with olav (``data/``), and what reaches the model for each request. ``olav memory
calibrate`` chooses an embedder's relevance floors on it, ``olav bench golden`` and ``olav
bench rerank`` report on it.

``dataset`` loads and checks the set, ``suite`` loads it into a temporary store and recalls
every request as AutoRecall does (``run_golden``), ``block`` replays the block for other floors
and tiers and measures it, ``ceiling`` replays every combination of floors, ``rerank`` lays a
reranker's scores on the recalled candidates, and ``tables`` writes the report's rows. It sits
on top of the memory package (the ``memory`` contract in .importlinter): it loads guides
through ``ingest`` and recalls through ``recall``."""
