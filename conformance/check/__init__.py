"""wgk.conformance.check"""
