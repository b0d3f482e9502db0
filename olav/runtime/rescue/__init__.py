"""The rescue layer: what olav does when a small model fumbles a turn.

- :mod:`.salvage` runs tool calls the model wrote as text (:mod:`.formats` finds them,
  :mod:`.lenient` reads their JSON, :mod:`.schema` repairs and validates their arguments);
- :mod:`.think` keeps reasoning out of the answer;
- :mod:`.middleware` puts it in the agent loop, with one nudge for a narrated action, a loop
  guard and context accounting.

Everything but the middleware is pure functions over text: the benchmark
(``olav bench toolcalls``) runs the same code the agent does.
"""

from olav.runtime.rescue.salvage import Invalid, Salvage, TextCall, offered_name, salvage
from olav.runtime.rescue.schema import Checked, coerce, example
from olav.runtime.rescue.think import ThinkFilter, split_reasoning

__all__ = [
    "Checked",
    "Invalid",
    "Salvage",
    "TextCall",
    "ThinkFilter",
    "coerce",
    "example",
    "offered_name",
    "salvage",
    "split_reasoning",
]
