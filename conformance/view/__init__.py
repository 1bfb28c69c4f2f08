"""``wgk view``: a local page where a designer walks the model.

A ``Session`` holds one path (a graph, its seeded initial facts and wire steps)
with the model state after every step; ``api`` answers the page's JSON requests
from it, ``server`` serves page and API on 127.0.0.1, ``static`` writes the
stepper with a path's data embedded as one self-contained HTML file, ``dot``
draws a bounded, labelled piece of the state graph. The enabled steps of a
state come from the model's one enumeration of actions, imported through
``enumerate``.
"""
