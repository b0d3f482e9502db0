"""Who may connect to the servers olav offers (``olav serve``, ``olav mcp`` over HTTP): the
operators' tokens (:mod:`.tokens`), one file per workspace, each token an operator and a role."""
