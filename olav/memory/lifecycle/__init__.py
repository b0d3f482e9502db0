"""How memories age: decay, pinning, expiry and gc, conflicts, capacity and the archive."""
