"""wgk.conformance.z3"""
