"""The web console of ``olav serve``: memory, runs and drafts in a browser, for the same
operators and tokens as the API (docs/console.md).

Server-rendered HTML with a little plain JavaScript; its template, stylesheet and script are
package data, so it needs no network and no build step. A login exchanges a token for a
session cookie; every form that changes something carries a CSRF token and must come from the
console's own origin (:mod:`.sessions`).
"""

from olav.serve.console.app import Console

__all__ = ["Console"]
