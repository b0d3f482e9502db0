"""What enters memory: guides, documents, chat logs, captured turns, transfers."""
