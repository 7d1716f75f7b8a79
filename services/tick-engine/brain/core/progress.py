"""What a long run reports as it goes, for a bar on a terminal: a step's name, how far it is, out
of how much (0: a step that does not count, such as waiting for the model).

The run calls it; the command decides whether anything is shown (only when stderr is a
terminal), so a CronJob's tick passes nothing and pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``step(name, done, total)``: ``name`` says what is counted ("files parsed"), ``total`` 0 when nothing is.
Step = Callable[[str, int, int], None]

#: Items between two reports inside a loop: a report per file would cost a cold tick more than it shows.
EVERY = 256
