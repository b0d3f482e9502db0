"""The memory library: one LanceDB table, its search and maintenance, ingest, recall and the
relevance decision, capture, lifecycle, lessons and episodes. Imports only olav.core."""
