"""The audit database (audit.duckdb): numbered migrations, the writer every run uses, and
queries.py, the one module that knows its SQL."""
