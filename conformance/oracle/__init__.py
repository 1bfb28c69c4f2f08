"""wgk.conformance.oracle"""
