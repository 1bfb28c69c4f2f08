"""Symbolic states for the model's own rules.

The rules, ``decide``, the projections and the invariants of ``wgk.model`` are
written with the operators of ``wgk.model.logic``. Installed as the backend of
those operators (``symbolic()``), z3 turns the very same functions into solver
terms when they run on a state whose fields are z3 constants. This module
provides that backend, the symbolic state (the model's own frozen dataclasses
holding z3 terms), symbolic counterparts of the two containers (``Evidence``
and ``Journal``) over bounded domains, the domain constraints, and the
decoding of a z3 model back into a concrete ``State``.

This module is the one place to import them from; they live in ``sym_backend``
(the backend), ``sym_containers`` (evidence and journal), ``sym_state`` (the
shape of a state, its leaves and domain constraints) and ``sym_decode``
(decoding, comparing and describing states).

Bounded domains:

- evidence: a fixed universe of ``(kind, id)`` pairs per task (record kinds
  the rules use, times the evidence ids of the bounds), one Bool each;
- journal: a fixed number of idempotency keys, each with a used flag, the
  request's digest (its *shape* plus the values of its symbolic fields), and
  the stored decision.
"""
from __future__ import annotations

from wgk.conformance.z3.sym_backend import (  # noqa: F401
    Z3Backend, substitute, BACKEND, symbolic, is_term, as_bool, NonZero, nonzero_int,
    IntTerm, int_var,
)
from wgk.conformance.z3.sym_containers import (  # noqa: F401
    SymEvidence, SymDigest, SymEntry, SymJournal,
)
from wgk.conformance.z3.sym_state import (  # noqa: F401
    ENUM_FIELDS, BOOL_FIELDS, INT_FIELDS, Space, fresh_task, fresh_journal, fresh_state,
    symbolic_graph, task_leaves, tail_leaves, leaves, DomainError, leaf_types, leaf_domain, within_type, domain,
    equals,
)
from wgk.conformance.z3.sym_decode import (  # noqa: F401
    value, decode_graph, decode_task, decode_journal, decode_state, free_constants, identical,
    field_diff, describe_task,
)

__all__ = [
    'Z3Backend', 'substitute', 'BACKEND', 'symbolic', 'is_term', 'as_bool', 'NonZero',
    'nonzero_int', 'IntTerm', 'int_var', 'SymEvidence', 'SymDigest', 'SymEntry', 'SymJournal', 'ENUM_FIELDS',
    'BOOL_FIELDS', 'INT_FIELDS', 'Space', 'fresh_task', 'fresh_journal', 'fresh_state',
    'symbolic_graph', 'task_leaves', 'tail_leaves', 'leaves', 'DomainError', 'leaf_types', 'leaf_domain',
    'within_type', 'domain', 'equals', 'value', 'decode_graph', 'decode_task', 'decode_journal',
    'decode_state', 'free_constants', 'identical', 'field_diff', 'describe_task',
]
