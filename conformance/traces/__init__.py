"""wgk.conformance.traces"""
