"""The bundled trace corpus (``wgk.traces``): data only, no code.

Installed as package data so that ``wgk gate`` finds the traces and their
schema (``schema/wgk-trace-1.schema.json``) outside a checkout; the code reaches
them with ``importlib.resources.files("wgk.traces")``.
"""
