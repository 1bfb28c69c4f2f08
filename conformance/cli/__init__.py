"""wgk.conformance.cli"""
